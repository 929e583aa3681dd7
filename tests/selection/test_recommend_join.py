"""Sketches on a joined (dimension) table's group-by column: recommended, captured, used and
maintained under updates of the other table (``candidates.dim_candidates``).

Facts ``ff`` (40k rows) reference dimension ``dd`` (2,000 keys, 20 per ``day``, 100 days).  Facts of
the 10 days with ``day % 10 == 3`` carry values in [40, 50), the rest in [0, 10), so
``HAVING sum(v) > 8000`` keeps exactly those 10 days (~18,000 against ~2,000): 10 % of ``dd``.  A
layout of ``dd`` on ``day`` (one file per day) lets a sketch on it skip.  ``ff`` has no group-by
column; its join key ``fk`` decides the day (``dk`` is the key of ``dd``), so the CB-OPT-GB pool
holds ``dd.day`` and ``ff.fk``, and without a copy of ``ff`` sorted on ``fk`` (the advice here builds
none) only ``dd.day`` can skip.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from advisor.sketch.capture import capture_batch
from advisor.context import Context
from advisor.sketch.run import run_query
from advisor.layout.clustered_copy import build_layout
from advisor.maintain.spark.service import maintain_sketch
from advisor.partition.range_partition import load_partition
from advisor.plan.parse import parse_sql
from advisor.selection.recommend import recommend as _recommend
from advisor.selection.cost_model import CostParams
from advisor.warehouse.sketch_records import load_sketch

SQL = "SELECT day, sum(v) AS s FROM ff JOIN dd ON fk = dk GROUP BY day HAVING sum(v) > 8000"
HEAVY = {d for d in range(100) if d % 10 == 3}


@pytest.fixture(scope="module")
def ctx(spark, tmp_path_factory):
    rng = np.random.default_rng(11)
    dk = np.arange(2000, dtype="int64")
    dims = pd.DataFrame({"dk": dk, "day": (dk // 20).astype("int32"), "region": [f"r{i % 7}" for i in dk]})
    fk = rng.integers(0, 2000, 40_000).astype("int64")
    heavy = np.isin(fk // 20, list(HEAVY))
    facts = pd.DataFrame({"fid": np.arange(40_000, dtype="int64"), "fk": fk,
                          "v": np.where(heavy, rng.uniform(40, 50, fk.size), rng.uniform(0, 10, fk.size))})
    c = Context(tmp_path_factory.mktemp("recj"), spark=spark)
    c.catalog.create_table("dd", spark.createDataFrame(dims), "test")
    c.catalog.create_table("ff", spark.createDataFrame(facts), "test")
    build_layout(c.catalog, "dd", "day", rows_per_file=20)
    return c


def recommend(ctx, sql, *a, **kw):
    """Ten predicted uses: the cost model's verdict is not what these tests are about; no copies
    are built (a narrow copy of ``ff`` on ``fk`` would let the fact table skip too)."""
    return _recommend(ctx, sql, *a, params=CostParams(prior_reuses=10, build_layouts=False), **kw)


def _days(rows) -> set:
    return {r[0] for r in rows}


@pytest.fixture(scope="module")
def rec(ctx):
    """The CB-OPT-GB recommendation, captured (once: later advice would see its measured costs)."""
    return recommend(ctx, SQL, "CB-OPT-GB", fragments=100, capture=True)


def test_dimension_group_by_column_is_the_cb_opt_gb_pick(ctx, rec):
    d = rec["decision"]
    assert rec["table"] == "ff"  # the sampled table is the fact side
    assert (d["table"], d["attr"], d["go"]) == ("dd", "day", True), d["reason"]
    day = next(c for c in rec["candidates"] if c["table"] == "dd" and c["attr"] == "day")
    assert day["safe"] and day["picked"] and "gb" in day["roles"]
    # the join key that decides the groups is the one fact column in the pool, dropped before
    # sampling since no copy of ff may be built and its files do not cluster it
    pool = {c["attr"]: c for c in rec["candidates"] if c["table"] == "ff" and (c["estimated"] or c["layout_note"])}
    assert set(pool) == {"fk"} and not pool["fk"]["estimated"]
    assert "no layout clusters it" in pool["fk"]["layout_note"]
    real = rec["captured"]["selectivity"]
    assert abs(real - 0.10) < 1e-9  # the 10 heavy days' 200 keys of 2,000
    assert abs(day["selectivity"] - real) <= 0.03
    sk = load_sketch(ctx.store, rec["captured"]["sketch_id"])
    assert [(p.table, p.attr) for p in sk.parts] == [("dd", "day")]


def test_sketched_run_returns_the_plain_rows_and_reads_fewer_dimension_rows(ctx, rec):
    sk = load_sketch(ctx.store, rec["captured"]["sketch_id"])
    q = parse_sql(SQL, ctx.schema_lookup())
    plain, sketched = run_query(ctx.catalog, q), run_query(ctx.catalog, q, sketch=sk)
    assert _days(plain.rows) == HEAVY
    assert sorted(sketched.rows) == sorted(plain.rows)
    # facts are read in full either way; the dimension drops from 2,000 rows to its 10 days' files
    assert sketched.metrics.rows_read <= plain.metrics.rows_read - 1500


def test_exact_method_sizes_the_dimension_candidate_from_one_capture(ctx):
    rec = recommend(ctx, SQL, "CB-OPT-GB", fragments=100, method="exact")
    assert rec["exact"] and rec["decision"]["table"] == "dd" and rec["decision"]["attr"] == "day"
    day = next(c for c in rec["candidates"] if c["attr"] == "day")
    assert abs(day["selectivity"] - 0.10) < 1e-9


def test_dimension_sketch_maintained_under_fact_updates_equals_recapture(ctx, rec):
    cat = ctx.catalog
    q = parse_sql(SQL, ctx.schema_lookup())
    sk = load_sketch(ctx.store, rec["captured"]["sketch_id"])
    spark = cat.spark
    # day 5 turns heavy (400 inserted facts of 45 on its keys), day 13 stops being heavy (its facts deleted)
    ins = pd.DataFrame({"fid": np.arange(10**6, 10**6 + 400, dtype="int64"),
                        "fk": np.repeat(np.arange(100, 120, dtype="int64"), 20), "v": np.full(400, 45.0)})
    cur = cat.read("ff", cat.current_version("ff"), with_rid=True)
    dels = cur.where("fk >= 260 AND fk < 280").select("_rid")
    cat.apply_frames("ff", spark.createDataFrame(ins), dels)
    res = maintain_sketch(cat, sk.id)
    new = load_sketch(ctx.store, res.new_id)
    versions = {"ff": cat.current_version("ff"), "dd": cat.current_version("dd")}
    (fresh,), _ = capture_batch(cat, [(q, {"dd": "day"}, {"dd": load_partition(ctx.store, sk.parts[0].partition_id)})],
                                versions)
    assert new.parts[0].fragments == fresh.parts[0].fragments
    assert new.parts[0].fragments != sk.parts[0].fragments  # the batch did change the sketch
    plain = run_query(cat, q, versions)
    assert _days(plain.rows) == (HEAVY - {13}) | {5}
    assert sorted(run_query(cat, q, versions, sketch=new).rows) == sorted(plain.rows)
