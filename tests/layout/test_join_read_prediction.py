"""On join queries, a sketch that is applied reads about what was predicted: the predicted read
fraction of lineitem (its l_orderkey layout's pages under the sketch's blocks) against the rows
Spark's scan of lineitem returned (scan metrics), TPC-H SF 0.01, 1,000 fragments; the sketched
answer equals the plain one."""

from __future__ import annotations

import pytest

from advisor.engine.execute import versions_now
from advisor.layout.clustered_copy import build_layout
from advisor.plan.parse import parse_sql
from advisor.sketch.capture import capture
from advisor.sketch.lookup import read_fraction, usable_sketches
from advisor.sketch.run import run_query
from advisor.warehouse.catalog import Catalog
from advisor.warehouse.store import Store
from workloads.data.datasets import load_dataset

JOIN = "lineitem JOIN orders ON l_orderkey = o_orderkey"
QUERIES = [
    # the top-10 customers by revenue: provenance scattered over l_orderkey
    f"SELECT o_custkey, sum(l_extendedprice) AS rev FROM {JOIN} GROUP BY o_custkey ORDER BY rev DESC LIMIT 10",
    f"SELECT o_custkey, sum(l_extendedprice) AS rev FROM {JOIN} GROUP BY o_custkey ORDER BY rev DESC LIMIT 1",
    # provenance in a run of l_orderkey: a selective sketch the layout serves
    f"SELECT o_custkey, sum(l_extendedprice) AS rev FROM {JOIN} WHERE l_orderkey < 4000 GROUP BY o_custkey "
    "ORDER BY rev DESC LIMIT 10",
    f"SELECT o_orderpriority, count(*) AS n FROM {JOIN} WHERE o_orderkey < 9000 GROUP BY o_orderpriority "
    "HAVING count(*) > 100",
]


@pytest.fixture(scope="module")
def cat(spark, tmp_path_factory):
    c = Catalog(spark, Store(tmp_path_factory.mktemp("joinread")))
    load_dataset(c, "tpch", sf=0.01)
    build_layout(c, "lineitem", "l_orderkey")
    return c


@pytest.mark.parametrize("sql", QUERIES)
def test_an_applied_join_sketch_reads_what_was_predicted(cat, sql):
    q = parse_sql(sql, lambda t: cat.schema(t))
    versions = versions_now(cat, q)
    sk = capture(cat, q, {"lineitem": "l_orderkey"}, 1000, versions).sketch
    predicted = read_fraction(cat, sk, versions)
    good, bad = usable_sketches(cat, q, versions)
    applied = sk.id in [s.id for s in good]
    assert applied == (predicted <= 0.5), (predicted, bad)
    sketched, plain = run_query(cat, q, versions, sk), run_query(cat, q, versions)
    assert sorted(map(repr, sketched.rows)) == sorted(map(repr, plain.rows)) and plain.rows
    rows = cat.version("lineitem", versions["lineitem"]).rows
    scans = [s for s in sketched.metrics.scans if s["relation"].startswith("layout_l_orderkey")]
    measured = sum(s["rows"] for s in scans) / rows if scans else None
    if applied or scans:  # the scan read the layout: it must read about the predicted share
        assert measured is not None and abs(measured - predicted) <= 0.10, (predicted, measured)
    if "l_orderkey < 4000" in sql:
        assert applied and measured <= 0.2, (predicted, measured)
