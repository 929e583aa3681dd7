"""Two-attribute candidates end to end (``advisor.selection.attribute_pairs``): offered when each attribute alone is weak,
sized within a few points of the capture, captured as two sketches, used as their conjunction with
answers equal to the plain run, and maintained to what a recapture gives.

Table ``p``: 8 x 8 cells of ``a`` and ``b`` (500 rows each, 32k rows); the 16 cells with a < 4 and
b < 4 are heavy (``x`` 10 or 11, else 0 or 1; whole numbers, so sums do not depend on order), so ``HAVING sum(x) > 2000`` keeps exactly them:
25 % of the rows, while ``a < 4`` alone and ``b < 4`` alone are 50 % each.  Two layouts (a then b,
b then a; 500 rows per file, one cell per file) let both filters skip files.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from advisor.context import Context
from advisor.sketch.run import run_query
from advisor.engine.execute import versions_now
from advisor.sketch.lookup import usable_sketches
from advisor.layout.clustered_copy import build_layout
from advisor.selection.attribute_pairs import catch_up, combine
from advisor.plan.parse import parse_sql
from advisor.selection.recommend import recommend
from advisor.selection.cost_model import CostParams

SQL = "SELECT a, b, sum(x) AS s FROM p GROUP BY a, b HAVING sum(x) > 2000"


@pytest.fixture(scope="module")
def ctx(spark, tmp_path_factory):
    rng = np.random.default_rng(11)
    a = np.repeat(np.arange(8), 4000)
    b = np.tile(np.repeat(np.arange(8), 500), 8)
    heavy = (a < 4) & (b < 4)
    pdf = pd.DataFrame({"a": a, "b": b, "x": np.where(heavy, rng.integers(10, 12, a.size), rng.integers(0, 2, a.size)).astype(float)})
    c = Context(tmp_path_factory.mktemp("pairs"), spark=spark)
    c.catalog.create_table("p", spark.createDataFrame(pdf.sample(frac=1.0, random_state=1)), "test")
    build_layout(c.catalog, "p", "a", rows_per_file=500, then="b")
    build_layout(c.catalog, "p", "b", rows_per_file=500, then="a")
    return c


@pytest.fixture(scope="module")
def rec(ctx):
    return recommend(ctx, SQL, "CB-OPT-GB", fragments=100, capture=True, params=CostParams(prior_reuses=10))


def _cells(rows):
    return {(r[0], r[1]) for r in rows}


def test_the_pair_is_offered_sized_and_picked_when_each_attribute_alone_is_weak(rec):
    c = {x["attr"]: x for x in rec["candidates"]}
    assert abs(c["a"]["selectivity"] - 0.5) <= 0.05 and abs(c["b"]["selectivity"] - 0.5) <= 0.05
    pair = c["a&b"]
    assert pair["safe"] and pair["attrs"] == ["a", "b"] and "gb" in pair["roles"]
    assert abs(pair["selectivity"] - 0.25) <= 0.03
    lo, hi = pair["ci"]
    assert lo - 0.01 <= 0.25 <= hi + 0.01
    assert pair["read_fraction"] <= 0.3 < min(c["a"]["read_fraction"], c["b"]["read_fraction"])
    d = rec["decision"]
    assert d["attr"] == "a&b" and d["go"] and sorted(d["attrs"]) == ["a", "b"]
    cap = rec["captured"]
    assert len(cap["sketch_ids"]) == 2 and cap["selectivity"] == pytest.approx(0.25)


def test_the_pair_is_used_as_a_conjunction_with_the_plain_answer(ctx, rec):
    cat = ctx.catalog
    q = parse_sql(SQL, ctx.schema_lookup())
    versions = versions_now(cat, q)
    good, _ = usable_sketches(cat, q, versions)
    both = combine(cat, q, versions, good)
    assert sorted(p.attr for p in both.parts) == ["a", "b"]
    plain = run_query(cat, q, versions)
    single = run_query(cat, q, versions, sketch=good[0])
    paired = run_query(cat, q, versions, sketch=both)
    assert _cells(plain.rows) == {(i, j) for i in range(4) for j in range(4)}
    assert sorted(paired.rows) == sorted(plain.rows) == sorted(single.rows)
    assert paired.metrics.rows_read <= 0.3 * 32_000 < single.metrics.rows_read


def test_advisor_run_uses_both_sketches(ctx, rec, capsys):
    from advisor.cli.main import main

    with pytest.raises(SystemExit) as e:
        main(["--warehouse", str(ctx.warehouse), "run", SQL])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "16 row(s)" in out and "(two attributes: " in out
    assert sorted(out.split("(two attributes: ")[1].split(")")[0].split(" AND ")) == ["a", "b"]


def test_a_batch_maintains_both_sketches_to_their_recapture(ctx, rec):
    from advisor.sketch.capture import capture
    from advisor.partition.range_partition import load_partition
    from advisor.warehouse.sketch_records import load_sketch

    cat = ctx.catalog
    spark = cat.spark
    q = parse_sql(SQL, ctx.schema_lookup())
    # cell (6, 6) turns heavy: 300 rows of x = 10 -> sum > 2000; cell (0, 0) loses its rows with b = 0, a = 0
    ins = pd.DataFrame({"a": np.full(300, 6), "b": np.full(300, 6), "x": np.full(300, 10.0)})
    cur = cat.read("p", cat.current_version("p"), with_rid=True)
    cat.apply_frames("p", spark.createDataFrame(ins), cur.where("a = 0 AND b = 0").select("_rid"))
    done = catch_up(cat, q)
    from advisor.maintain.policy.triggers import before_use

    done += before_use(cat, q)
    assert len(done) == 2
    versions = versions_now(cat, q)
    good, _ = usable_sketches(cat, q, versions)
    both = combine(cat, q, versions, good)
    assert len(both.parts) == 2
    for part in both.parts:
        old = next(load_sketch(ctx.store, i) for i in rec["captured"]["sketch_ids"]
                   if load_sketch(ctx.store, i).parts[0].attr == part.attr)
        fresh = capture(cat, q, {"p": part.attr}, 100, versions,
                        partitions={"p": load_partition(ctx.store, part.partition_id)})
        assert part.fragments == fresh.sketch.parts[0].fragments != old.parts[0].fragments
    plain = run_query(cat, q, versions)
    assert _cells(plain.rows) == {(i, j) for i in range(4) for j in range(4)} - {(0, 0)} | {(6, 6)}
    assert sorted(run_query(cat, q, versions, sketch=both).rows) == sorted(plain.rows)


def test_no_pair_is_offered_when_a_single_attribute_is_selective_enough(ctx, rec):
    strong = recommend(ctx, "SELECT a, b, sum(x) AS s FROM p WHERE a = 0 GROUP BY a, b HAVING sum(x) > 2000",
                       "CB-OPT", fragments=100, params=CostParams(prior_reuses=10))
    c = {x["attr"]: x for x in strong["candidates"]}
    assert c["a"]["selectivity"] < 0.2  # one value of a: 12.5 % of the rows
    assert not any("&" in k for k in c) and strong["decision"]["attrs"] is None
