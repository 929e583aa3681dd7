"""A layout clustered on a timestamp skips like one on any other type: timestamps are written as
INT64 microseconds (with min/max statistics and a column index), not as Spark's legacy INT96."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from advisor.context import Context
from advisor.engine.execute import versions_now
from advisor.layout.clustered_copy import build_layout
from advisor.plan.parse import parse_sql
from advisor.sketch.capture import capture
from advisor.sketch.lookup import read_fraction, usable_sketches
from advisor.sketch.run import run_query

SQL = "SELECT ts, sum(v) AS s FROM t GROUP BY ts HAVING sum(v) > 1000"


def test_a_timestamp_layout_skips_for_a_selective_sketch(spark, tmp_path):
    rng = np.random.default_rng(4)
    hour = rng.permutation(np.repeat(np.arange(500), 40))  # 500 hours of 40 rows, shuffled
    start = dt.datetime(2013, 1, 1)
    pdf = pd.DataFrame({"ts": [start + dt.timedelta(hours=int(h)) for h in hour],
                        "v": np.where(hour < 10, 50, 1)})  # the first 10 hours pass: 2 % of the rows
    ctx = Context(tmp_path / "wh", spark=spark)
    cat = ctx.catalog
    cat.create_table("t", spark.createDataFrame(pdf))
    lay = build_layout(cat, "t", "ts")
    f = sorted((tmp_path / "wh").rglob("layout_ts_*/*.parquet"))[0]
    col = next(pq.ParquetFile(f).metadata.row_group(0).column(i) for i in range(3)
               if pq.ParquetFile(f).metadata.row_group(0).column(i).path_in_schema == "ts")
    assert col.physical_type == "INT64" and col.statistics.has_min_max and lay["attr"] == "ts"
    q = parse_sql(SQL, ctx.schema_lookup())
    sk = capture(cat, q, {"t": "ts"}, 100).sketch
    versions = versions_now(cat, q)
    assert read_fraction(cat, sk, versions) <= 0.15
    good, bad = usable_sketches(cat, q, versions)
    assert [s.id for s in good] == [sk.id], bad
    sketched, plain = run_query(cat, q, versions, sk), run_query(cat, q, versions)
    assert sorted(sketched.rows) == sorted(plain.rows) and len(plain.rows) == 10
    assert plain.metrics.rows_read == 20_000 and sketched.metrics.rows_read <= 0.15 * 20_000
