"""A Delta snapshot read as the Parquet files its log lists (``advisor.warehouse.delta_parquet``)
holds exactly the rows Spark's Delta reader gives, at every version: deletion vectors, UPDATE,
MERGE, an added column; and what it cannot read that way goes to Delta's reader."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from advisor.context import Context
from advisor.warehouse import delta_log, delta_parquet
from advisor.warehouse.imports import import_table


def _rows(df) -> list:
    return sorted(repr(tuple(r)) for r in df.select(*sorted(df.columns)).collect())


def _write(spark, path: str, n: int = 4000, partition: str | None = None, rows_tracked: bool = False) -> None:
    df = spark.range(n).selectExpr("id", "id % 37 AS g", "CAST(id * 1.5 AS DECIMAL(12, 2)) AS x",
                                   "CAST(id AS STRING) AS s")
    w = (df.repartition(4).write.format("delta").option("delta.enableDeletionVectors", "true")
         .option("delta.enableChangeDataFeed", "true").option("delta.enableRowTracking", str(rows_tracked).lower()))
    (w.partitionBy(partition) if partition else w).save(path)


def _same_at_every_version(spark, path: str) -> int:
    last = DeltaTable(path).version()
    read = 0
    for v in range(last + 1):
        delta_log.forget(path)
        ref = spark.read.format("delta").option("versionAsOf", v).load(path)
        got = delta_parquet.frame(spark, path, v)
        assert got is not None, delta_parquet.why_not(path, v)
        assert _rows(got) == _rows(ref), f"version {v}"
        read += 1
    return read


def test_every_version_reads_the_rows_delta_reads(spark, tmp_path):
    path = str(tmp_path / "t")
    _write(spark, path)
    for stmt in (f"DELETE FROM delta.`{path}` WHERE g = 3",
                 f"UPDATE delta.`{path}` SET x = x + 1 WHERE g = 5",
                 f"INSERT INTO delta.`{path}` VALUES (100000, 1, 2.50, 'new')",
                 f"MERGE INTO delta.`{path}` t USING (SELECT id FROM range(0, 4000, 7)) s ON t.id = s.id "
                 "WHEN MATCHED AND t.g = 11 THEN DELETE WHEN MATCHED THEN UPDATE SET t.s = 'merged'",
                 f"ALTER TABLE delta.`{path}` ADD COLUMNS (extra INT)",
                 f"INSERT INTO delta.`{path}` VALUES (100001, 2, 3.00, 'late', 7)"):
        spark.sql(stmt)
    # deletion vectors are what this exercises: some version holds a file with one
    assert any(f.keep is not None for v in range(1, 5) for f in delta_log.files(path, v))
    assert _same_at_every_version(spark, path) == 7


def test_what_the_files_alone_cannot_give_goes_to_deltas_reader(spark, tmp_path, monkeypatch):
    path = str(tmp_path / "p")
    _write(spark, path, partition="g")
    assert delta_parquet.why_not(path, 0) == "partitioned table"
    assert delta_parquet.frame(spark, path, 0) is None

    many = str(tmp_path / "many")
    _write(spark, many)
    spark.sql(f"DELETE FROM delta.`{many}` WHERE id % 3 = 0")
    monkeypatch.setattr(delta_parquet, "MAX_LISTED", 100)
    why = delta_parquet.why_not(many, 1)
    assert why is not None and "rows deleted by deletion vectors" in why
    assert delta_parquet.frame(spark, many, 1) is None
    monkeypatch.undo()
    assert delta_parquet.why_not(many, 1) is None  # 1,334 rows listed: within the default cap


@pytest.mark.parametrize("with_rid,key,files", [(False, None, True), (True, ["id"], True), (True, None, False)])
def test_the_catalog_reads_a_delta_table_through_its_files_unless_row_ids_are_asked(spark, tmp_path, with_rid, key,
                                                                                     files):
    """Row ids hashed from a key come from the files' read too; row tracking ids need Delta's reader."""
    path = str(tmp_path / "c")
    _write(spark, path, n=500, rows_tracked=True)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE g < 4")
    ctx = Context(tmp_path / "wh", spark=spark)
    import_table(ctx.catalog, "dp_table", path, "delta", key=key)
    df = ctx.catalog.read("dp_table", with_rid=with_rid)
    plan = df._jdf.queryExecution().executedPlan().toString()
    # Delta's reader filters on its deletion-vector column; the files' read on the row index
    assert ("__delta_internal_is_row_deleted" not in plan) == files
    ref = spark.read.format("delta").load(path)
    assert sorted(r.id for r in df.select("id").collect()) == sorted(r.id for r in ref.select("id").collect())
    if with_rid:
        assert df.select("_rid").distinct().count() == ref.count()
