"""TPC-H Q18 as the specification writes it (``o_orderkey IN (SELECT l_orderkey ... GROUP BY
l_orderkey HAVING sum(l_quantity) > 300)``) over seeded tables with a layout of lineitem on
l_orderkey: the sketch on l_orderkey filters both reads of lineitem (the outer join and the IN
subquery) and the sketched answer equals the plain one; the advise path sizes the query by itself
(the subquery's sketch bounds the query's) and captures.

Data: 25,000 orders of 1-7 lines (~100,000 lines, ~100 layout blocks of 1,000 rows); the 4 orders
``HEAVY`` get 7 lines of 45-50 (sum > 300), the rest 1-7 lines of 1-40 (sum <= 280), so exactly
those 4 pass."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from advisor.context import Context
from advisor.engine.execute import versions_now
from advisor.layout.clustered_copy import build_layout
from advisor.plan.parse import parse_sql
from advisor.serve.query_path import serve_query
from advisor.serve.settings import AdviseSettings
from advisor.sketch.capture import capture
from advisor.sketch.run import run_query

Q18 = "\n".join(line for line in (Path(__file__).resolve().parents[2] / "workloads" / "tpch_queries" / "q18.sql")
                .read_text().splitlines() if not line.startswith("--"))
ORDERS = 25_000
HEAVY = np.array([1234, 8000, 15_000, 23_000])  # spread over the key range


def tables(seed=3):
    rng = np.random.default_rng(seed)
    keys = np.arange(1, ORDERS + 1) * 4  # TPC-H-like sparse order keys
    lines = np.where(np.isin(np.arange(ORDERS), HEAVY), 7, rng.integers(1, 8, ORDERS))
    lk = np.repeat(keys, lines)
    heavy = np.isin(lk, keys[HEAVY])
    qty = np.where(heavy, rng.integers(45, 51, lk.size), rng.integers(1, 41, lk.size))
    order = rng.permutation(lk.size)  # base files in random order: only a layout clusters l_orderkey
    lineitem = pd.DataFrame({"l_orderkey": lk[order], "l_linenumber": np.concatenate(
        [np.arange(1, n + 1) for n in lines])[order], "l_quantity": qty[order].astype(float)})
    orders = pd.DataFrame({"o_orderkey": keys, "o_custkey": rng.integers(1, 501, ORDERS),
                           "o_totalprice": rng.uniform(1000, 400000, ORDERS).round(2),
                           "o_orderdate": [dt.date(1995, 1, 1) + dt.timedelta(days=int(d))
                                           for d in rng.integers(0, 1000, ORDERS)]})
    customer = pd.DataFrame({"c_custkey": np.arange(1, 501), "c_name": [f"Customer#{i:09d}" for i in range(1, 501)]})
    return {"lineitem": lineitem, "orders": orders, "customer": customer}


def warehouse(spark, path):
    """The seeded tables with the layout of lineitem on l_orderkey, and no sketch yet."""
    c = Context(path, spark=spark)
    for name, pdf in tables().items():
        c.catalog.create_table(name, spark.createDataFrame(pdf), "test")
    build_layout(c.catalog, "lineitem", "l_orderkey")
    return c


@pytest.fixture
def ctx(spark, tmp_path):
    return warehouse(spark, tmp_path / "wh")


def test_the_sketch_filters_both_reads_of_lineitem_and_keeps_the_answer(ctx):
    cat = ctx.catalog
    q = parse_sql(Q18, ctx.schema_lookup())
    versions = versions_now(cat, q)
    sk = capture(cat, q, {"lineitem": "l_orderkey"}, 1000, versions).sketch
    plain, sketched = run_query(cat, q, versions), run_query(cat, q, versions, sk)
    assert len(plain.rows) == len(HEAVY) and sorted(map(repr, sketched.rows)) == sorted(map(repr, plain.rows))
    total = cat.version("lineitem", versions["lineitem"]).rows
    plain_li = [s for s in plain.metrics.scans if s["rows"] == total]
    assert len(plain_li) == 2, plain.metrics.scans  # the plan reads lineitem twice
    li = [s for s in sketched.metrics.scans if s["relation"].startswith("layout_l_orderkey")]
    # both reads go through the sketch on the layout: the blocks (pages) of 4 orders, each a 1,000-row page or two
    assert len(li) == 2 and all(s["rows"] <= 8000 for s in li), (li, total)
    assert sum(s["rows"] for s in sketched.metrics.scans) < sum(s["rows"] for s in plain.metrics.scans) - total


def test_the_advise_path_sizes_q18_and_captures_on_its_own(ctx):
    got = serve_query(ctx, Q18)
    d = got.record["decision"]
    assert d["action"] == "capture" and d["attr"] == "lineitem.l_orderkey", d
    plain = serve_query(ctx, Q18, AdviseSettings(use=False))
    assert got.record["result"] == plain.record["result"] and plain.record["result"]["rows"] == len(HEAVY)
    # the capture job answered the query (lineitem by value, orders by fragment ids): no second run
    assert d["reason"].endswith("answered by the capture job (no separate run)"), d["reason"]
    again = serve_query(ctx, Q18)
    assert again.record["decision"]["action"] == "reuse", again.record["decision"]
    assert again.record["result"] == plain.record["result"]
    assert again.record["scan"]["rows"] < plain.record["scan"]["rows"]
