"""A sketch in use on the files as stored gets its copy once the template's predicted uses grow.

The table is stored in ``k`` order with pages of 20,000 rows: a sketch of five groups reads one page
in ten.  A narrow copy sorted on ``k`` (1,000-row pages) would read a few thousand rows, but over the
few uses a new template is predicted the build does not pay; served again and again, the template's
predicted uses grow until it does, and the copy is built at a reuse.  Differential: every answer
equals the plain run's, before and after the copy.
"""

from __future__ import annotations

import re

import pytest
from pyspark.sql import functions as F

from advisor.context import Context
from advisor.layout.registry import layouts_of
from advisor.plan.parse import parse_sql
from advisor.serve import copy_revisit
from advisor.serve.query_path import serve_query
from advisor.serve.settings import AdviseSettings
from advisor.sketch.capture import capture

ROWS = 200_000
SQL = "SELECT k, sum(v) AS s FROM t GROUP BY k HAVING sum(v) > 300"
HOT = (1010, 1100, 1200, 1300, 1400)   # groups of four rows, all inside the first stored page


@pytest.fixture
def ctx(spark, tmp_path):
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    old = conf.get("parquet.page.row.count.limit")
    conf.set("parquet.page.row.count.limit", "20000")
    try:
        c = Context(tmp_path / "w", spark=spark)
        k = F.floor(F.col("id") / 4)
        df = (spark.range(ROWS).select(k.cast("bigint").alias("k"),
                                       F.when(k.isin(*HOT), 100).otherwise(1).cast("bigint").alias("v"),
                                       (F.col("id") % 7).alias("w"))
              .repartition(1).sortWithinPartitions("k"))
        c.catalog.create_table("t", df, "test")
    finally:
        conf.unset("parquet.page.row.count.limit") if old is None else conf.set("parquet.page.row.count.limit", old)
    copy_revisit._weighed.clear()
    return c


def test_a_copy_is_built_once_the_predicted_uses_grow(ctx):
    q = parse_sql(SQL, ctx.schema_lookup())
    sk = capture(ctx.catalog, q, {"t": "k"}, 2000).sketch
    s = AdviseSettings(advise=False, measured_costs=False)
    plain = serve_query(ctx, SQL, AdviseSettings(use=False))
    first = serve_query(ctx, SQL, s)
    assert first.record["decision"]["action"] == "reuse" and first.record["sketch_id"] == sk.id
    on_files = first.record["scan"]["rows"]
    assert on_files <= 0.2 * ROWS and "predicted uses grew" not in first.record["decision"]["reason"]
    assert first.record["result"] == plain.record["result"]
    built = None
    for _ in range(40):
        got = serve_query(ctx, SQL, s)
        assert got.record["result"] == plain.record["result"]
        if "predicted uses grew" in got.record["decision"]["reason"]:
            built = got
            break
    assert built is not None, "no copy was built within 40 uses"
    d = built.record["decision"]
    assert d["layout"]["built"] and d["layout"]["columns"] == ["k", "v"]
    grown = float(re.search(r"predicted uses grew to ([0-9.]+)", d["reason"]).group(1))
    assert grown > 3 + 1  # more than a new template's prior plus one use
    assert [x["columns"] for x in layouts_of(ctx.catalog.store, "t", "k")] == [["k", "v"]]
    after = serve_query(ctx, SQL, s)
    assert after.record["result"] == plain.record["result"]
    assert after.record["scan"]["rows"] < on_files / 3
