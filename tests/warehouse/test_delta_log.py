"""The Delta log read on the driver (delta-rs and pyarrow, ``delta_log``, ``delta_source``,
``delta_stats``, ``row_hash``) against Spark reading the same table: snapshots, row counts, file
lists, net changes and row ids must be equal, column bounds must contain Spark's, for every
version of a table with deletion vectors that INSERT, DELETE, UPDATE and MERGE commits changed."""

from __future__ import annotations

import datetime as dt
import decimal
from collections import Counter

import pytest
from pyspark.sql import functions as F

from advisor.warehouse import delta_log, delta_source, delta_stats, row_hash

COLS = ["id", "g", "d", "v", "s", "day"]
ROWS = 3000


def _rows(t) -> Counter:
    return Counter(tuple(r[c] for c in t.column_names) for r in t.to_pylist())


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory):
    """A Delta table with the change feed and deletion vectors, in three files, then changed by
    five commits; returns (path, last version)."""
    path = str(tmp_path_factory.mktemp("dlog") / "t")
    df = spark.range(0, ROWS).selectExpr(
        "id", "cast(id % 60 as int) AS g", "cast(id * 1.25 as decimal(12,2)) AS d",
        "CASE WHEN id % 11 = 0 THEN NULL ELSE cast(id as double) / 3 END AS v",
        "concat('s', cast(id % 13 as string)) AS s", "date_add(date'2020-01-01', cast(id % 40 as int)) AS day")
    (df.repartitionByRange(3, "id").write.format("delta").option("delta.enableChangeDataFeed", "true")
     .option("delta.enableDeletionVectors", "true").save(path))
    t = f"delta.`{path}`"
    for stmt in [
        f"INSERT INTO {t} VALUES (900001, 7, 5.00, NULL, 'zz', date'2031-01-01'), (900002, 70, -3.50, 1.0, 'a', NULL)",
        f"DELETE FROM {t} WHERE g = 3 OR id = 900002",                       # deletion vectors
        f"UPDATE {t} SET v = v + 1, s = 'upd' WHERE g = 4",
        f"MERGE INTO {t} t USING (SELECT id, g, d, v + 5 AS v, s, day FROM {t} WHERE g = 5 UNION ALL "
        f"SELECT 900003L, 1, 2.00, 3.0, 'y', date'2019-12-31') u ON t.id = u.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
        f"DELETE FROM {t} WHERE id < 1000",                                   # a whole file, which has a DV
    ]:
        spark.sql(stmt)
    return path, delta_source.latest_version(path)


def _spark_snapshot(spark, path, v):
    return spark.read.format("delta").option("versionAsOf", v).load(path)


def test_snapshots_row_counts_and_files_equal_sparks_at_every_version(spark, table):
    path, last = table
    assert last == 5
    for v in range(last + 1):
        got = delta_source.read_arrow(spark, path, v, COLS)
        want = _spark_snapshot(spark, path, v).select(*COLS).toArrow()
        assert _rows(got) == _rows(want), v
        assert delta_source.rows_at(spark, path, v) == want.num_rows
        df = _spark_snapshot(spark, path, v)
        assert sorted(delta_log.files(path, v), key=lambda f: f.path) and \
            {f.path for f in delta_log.files(path, v)} == {delta_log.local(f) for f in df.inputFiles()}
    assert any(f.keep is not None for f in delta_log.files(path, 3))  # read through deletion vectors


@pytest.mark.parametrize("span", [(v, v + 1) for v in range(5)] + [(0, 5), (0, 2)])
def test_net_changes_equal_the_change_feed_netted_by_spark(spark, table, span):
    path, _ = table
    a, b = span
    ins, dels = delta_source.net_changes(spark, path, a, b, COLS)
    s_ins, s_dels = delta_source._net_changes_on_spark(spark, path, a, b, COLS)
    assert (_rows(ins), _rows(dels)) == (_rows(s_ins), _rows(s_dels))
    if span == (0, 2):   # 900002 inserted, then deleted: cancels out
        assert [r["id"] for r in ins.to_pylist()] == [900001] and 900002 not in dels.column("id").to_pylist()
    if span == (4, 5):
        assert dels.num_rows > 900 and ins.num_rows == 0


def test_a_feed_switched_off_is_a_gap(spark, tmp_path):
    path = str(tmp_path / "gap")
    spark.range(10).write.format("delta").option("delta.enableChangeDataFeed", "true").save(path)
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (10)")
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES (delta.enableChangeDataFeed = false)")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (11)")
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    assert delta_source.feed_covers(path, 0, 1)
    assert not delta_source.feed_covers(path, 0, 4) and not delta_source.feed_covers(path, 2, 3)
    with pytest.raises(delta_source.ChangeFeedGap):
        delta_source.net_changes(spark, path, 1, 4, ["id"])


def test_row_ids_equal_sparks_xxhash64(spark):
    df = spark.createDataFrame(
        [(1, 10 ** 12, dt.date(2020, 1, 2), decimal.Decimal("12.34"), True, 3),
         (None, -5, None, decimal.Decimal("-0.01"), False, None),
         (-7, None, dt.date(1969, 12, 31), None, None, -2 ** 15),
         (2 ** 31 - 1, 2 ** 63 - 1, dt.date(2100, 6, 1), decimal.Decimal("9999999999.99"), True, 0)],
        "a INT, b BIGINT, c DATE, d DECIMAL(12,2), e BOOLEAN, f SMALLINT")
    cols = df.columns
    want = df.select(*[F.xxhash64(c).alias(f"h_{c}") for c in cols], F.xxhash64(*cols).alias("all"),
                     F.xxhash64("b", "a").alias("ba")).toArrow()
    t = df.toArrow()
    for c in cols:
        assert row_hash.xxhash64([t.column(c)]).to_pylist() == want.column(f"h_{c}").to_pylist(), c
    assert row_hash.xxhash64([t.column(c) for c in cols]).to_pylist() == want.column("all").to_pylist()
    assert row_hash.xxhash64([t.column("b"), t.column("a")]).to_pylist() == want.column("ba").to_pylist()
    assert not row_hash.supports(["s"], {"s": "string"}) and row_hash.supports(["a"], {"a": "int32"})


def test_samples_row_ids_on_the_driver_equal_sparks(spark, table):
    path, last = table
    got = delta_source.read_arrow(spark, path, last, ["g"], key=["id"], with_rid=True)
    want = delta_source.snapshot(spark, path, last, ["id"], with_rid=True).select("g", "_rid").toArrow()
    assert _rows(got) == _rows(want) and got.column_names == ["g", "_rid"]


def test_column_bounds_from_the_log_contain_the_live_values(spark, table, tmp_path):
    from advisor.context import Context
    from advisor.warehouse.column_stats import column_stats
    from advisor.warehouse.imports import import_table

    path, last = table
    ctx = Context(tmp_path / "wh", spark=spark)
    import_table(ctx.catalog, "t", path, "delta", key=["id"], as_of=0)
    column_stats(ctx.catalog, "t", 0)                       # the first version: one Spark job
    for v in range(1, last + 1):
        assert delta_stats.from_log(ctx.catalog, "t", v, COLS) is not None, v   # no Spark job
        got = column_stats(ctx.catalog, "t", v)
        df = _spark_snapshot(spark, path, v)
        r = df.agg(*[F.min(c).alias(f"lo_{c}") for c in COLS], *[F.max(c).alias(f"hi_{c}") for c in COLS],
                   *[F.sum(F.col(c).isNull().cast("int")).alias(f"n_{c}") for c in COLS]).first()
        nulls = {x["col"]: x["nulls"] for x in ctx.store.query(
            "SELECT col, nulls FROM colstats WHERE table_name='t' AND version=?", (v,))}
        for c in COLS:
            lo, hi, _ = got[c]
            assert lo <= r[f"lo_{c}"] and hi >= r[f"hi_{c}"], (v, c)
            assert nulls[c] >= r[f"n_{c}"], (v, c)   # an upper bound: no NULL is missed
    assert column_stats(ctx.catalog, "t", 1)["day"][1] == dt.date(2031, 1, 1)   # the insert widened it
    assert column_stats(ctx.catalog, "t", 1)["g"][1] == 70 and column_stats(ctx.catalog, "t", 1)["d"][0] == decimal.Decimal("-3.50")


def test_a_deletion_vector_commit_changes_by_the_flipped_rows_only(spark, table):
    """The DELETE with deletion vectors re-adds its files: the change read is the deleted rows alone
    (no insert images for ``net`` to cancel), equal to Spark's feed."""
    path, _ = table
    acts = delta_log._actions(path, 2)
    again = {a["add"]["path"] for a in acts if "add" in a} & {a["remove"]["path"] for a in acts if "remove" in a}
    assert again  # the commit re-adds files with new vectors
    feed = delta_log.changes(path, 1, 2, COLS)
    assert set(feed.column("_change_type").to_pylist()) == {"delete"}
    s_ins, s_dels = delta_source._net_changes_on_spark(spark, path, 1, 2, COLS)
    assert s_ins.num_rows == 0 and _rows(feed.select(COLS)) == _rows(s_dels)
