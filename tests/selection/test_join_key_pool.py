"""A fact table's join key that decides the groups is sketched through the join
(``advisor.selection.join_keys``): the fact side of a join grouped by a dimension column is read in
part, not in full.

Facts ``lf`` (40k rows) reference dimension ``od`` (2,000 keys ``ok``, 20 per ``day``).  Facts of
the 10 days with ``day % 10 == 3`` carry integers in [40, 50), the rest in [0, 10), so
``HAVING sum(v) > 8000`` keeps exactly those 10 days: 200 of the 2,000 keys, 10 % of the facts,
in 10-20 of 100 equi-depth ``fk`` ranges.  ``lf`` is clustered on ``fk`` (files of 400 rows), so a
sketch on ``fk`` skips most of the facts;
``od`` has no layout, so a sketch on ``od.day`` could only skip dimension rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from advisor.context import Context
from advisor.layout.clustered_copy import build_layout
from advisor.plan.parse import parse_sql
from advisor.selection.cost_model import CostParams
from advisor.selection.recommend import recommend
from advisor.sketch.run import run_query
from advisor.warehouse.sketch_records import load_sketch

SQL = "SELECT day, sum(v) AS s FROM lf JOIN od ON fk = ok GROUP BY day HAVING sum(v) > 8000"
HEAVY = {d for d in range(100) if d % 10 == 3}


@pytest.fixture(scope="module")
def ctx(spark, tmp_path_factory):
    rng = np.random.default_rng(12)
    ok = np.arange(2000, dtype="int64")
    dims = pd.DataFrame({"ok": ok, "day": (ok // 20).astype("int32")})
    fk = rng.integers(0, 2000, 40_000).astype("int64")
    heavy = np.isin(fk // 20, list(HEAVY))
    facts = pd.DataFrame({"fid": np.arange(40_000, dtype="int64"), "fk": fk,
                          "v": np.where(heavy, rng.integers(40, 50, fk.size), rng.integers(0, 10, fk.size))})
    c = Context(tmp_path_factory.mktemp("joinkey"), spark=spark)
    c.catalog.create_table("od", spark.createDataFrame(dims), "test")
    c.catalog.create_table("lf", spark.createDataFrame(facts), "test")
    build_layout(c.catalog, "lf", "fk", rows_per_file=400)
    return c


@pytest.fixture(scope="module")
def rec(ctx):
    return recommend(ctx, SQL, "CB-OPT-GB", fragments=100, capture=True, params=CostParams(prior_reuses=10))


def test_the_join_key_is_in_the_group_by_pool_and_picked(rec):
    fk = next(c for c in rec["candidates"] if (c["table"], c["attr"]) == ("lf", "fk"))
    assert fk["safe"] and "gb" in fk["roles"] and fk["estimated"]
    # a fact column that does not decide the day stays out of the group-by pool
    v = next(c for c in rec["candidates"] if (c["table"], c["attr"]) == ("lf", "v"))
    assert "gb" not in v["roles"] and not v["estimated"]
    d = rec["decision"]
    assert (d["table"], d["attr"], d["go"]) == ("lf", "fk", True), d["reason"]
    real = rec["captured"]["selectivity"]
    # each heavy day's 20 keys fall in one or two of the 100 equi-depth fk ranges
    assert 0.09 <= real <= 0.21
    assert abs(fk["selectivity"] - real) <= 0.05


def test_the_sketched_join_reads_a_fraction_of_the_facts_and_answers_as_plain(ctx, rec):
    sk = load_sketch(ctx.store, rec["captured"]["sketch_id"])
    assert [(p.table, p.attr) for p in sk.parts] == [("lf", "fk")]
    q = parse_sql(SQL, ctx.schema_lookup())
    plain, sketched = run_query(ctx.catalog, q), run_query(ctx.catalog, q, sketch=sk)
    assert {r[0] for r in plain.rows} == HEAVY
    assert sorted(sketched.rows) == sorted(plain.rows)
    facts_plain = plain.metrics.rows_read - 2000  # the dimension is read in full either way
    facts_sketched = sketched.metrics.rows_read - 2000
    assert facts_plain == 40_000
    # the selected ranges' rows lie in about twice as many 400-row files (boundaries not aligned)
    assert facts_sketched <= 0.45 * facts_plain, sketched.metrics
