"""Scan metrics on real Spark plans: the groups a query formed are counted once, also when a sort
without LIMIT makes Spark run the aggregation twice (sampling its range exchange, then writing it)."""

from __future__ import annotations

import pytest

from advisor.engine.scan_metrics import collect_scan_metrics


@pytest.fixture(scope="module")
def grouped(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("metrics") / "t")
    spark.range(0, 20000).selectExpr("id", "id % 700 AS g").write.parquet(path)
    return path


@pytest.mark.parametrize("tail, groups", [
    ("", 700),
    (" ORDER BY g", 700),
    (" ORDER BY n DESC, g", 700),
    (" HAVING count(*) > 28 ORDER BY g", 700),   # 20000 = 700 * 28 + 400: groups formed, before HAVING
])
def test_groups_are_the_groups_formed_once(spark, grouped, tail, groups):
    df = spark.sql(f"SELECT g, count(*) AS n FROM parquet.`{grouped}` GROUP BY g{tail}")
    rows = df.collect()
    m = collect_scan_metrics(df)
    assert m.groups == groups
    assert len(rows) == (400 if "HAVING" in tail else 700)
    assert m.rows_read >= 20000
