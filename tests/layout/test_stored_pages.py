"""Read units of tables as stored (no layout): pages from the files' own page index.

Differential: a table written by Spark in the order of its key (as TPC-H arrives, as ingest jobs
write by time) keeps each page's key range narrow, and Spark's reader skips pages by the column
index.  For sketches of random fragment sets, the rows the model predicts a sketched scan of the
stored files reads must equal the rows Spark's reader returns, for the own store and for a Delta
table written by plain Spark, while row groups alone would predict the whole file.
"""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.sql import functions as F

from advisor.context import Context
from advisor.engine.scan_metrics import collect_scan_metrics
from advisor.layout.skip_prediction import boundary_values, read_fraction_of, read_units
from advisor.partition.fragment_runs import read_set
from advisor.partition.refine import fine_partition
from advisor.sketch.range_filter import range_condition
from advisor.warehouse import page_index

ROWS = 30_000
PAGE_ROWS = 1_000


def _frame(spark):
    """Rows in ``k`` order (NULLs of ``k`` first), ``d`` a date rising with ``k``, ``s`` unordered."""
    return (spark.range(ROWS).selectExpr(
        "CASE WHEN id < 300 THEN NULL ELSE id * 3 END AS k",
        "date_add(DATE '2020-01-01', CAST(id / 40 AS INT)) AS d",
        "CAST(id * 7919 % 1000 AS STRING) AS s", "id % 13 AS x").repartition(1).sortWithinPartitions(
        F.col("k").asc_nulls_first()))


@pytest.fixture(scope="module")
def ctx(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("stored_pages")
    old = spark.sparkContext._jsc.hadoopConfiguration().get("parquet.page.row.count.limit")
    spark.sparkContext._jsc.hadoopConfiguration().set("parquet.page.row.count.limit", str(PAGE_ROWS))
    try:
        c = Context(root / "w", spark=spark)
        c.catalog.create_table("ordered", _frame(spark), "test")
        delta = str(root / "delta_t")
        _frame(spark).write.format("delta").option("parquet.page.row.count.limit", PAGE_ROWS).save(delta)
        c.catalog.register_delta("dordered", delta, 0)
    finally:
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        conf.unset("parquet.page.row.count.limit") if old is None else conf.set("parquet.page.row.count.limit", old)
    return c


@pytest.mark.parametrize("table", ["ordered", "dordered"])
@pytest.mark.parametrize("attr", ["k", "d"])
def test_predicted_rows_read_equal_sparks(ctx, spark, table, attr):
    cat = ctx.catalog
    v = cat.current_version(table)
    units = read_units(cat, table, attr, v)
    assert "pages" in units.source and units.rows == ROWS, units.source
    assert len(units.units) >= ROWS // PAGE_ROWS
    part = fine_partition(cat, table, attr, 200, v)
    rng = np.random.default_rng(7)
    ids = list(range(len(part.boundaries) + 1))
    cases = [frozenset(rng.choice(ids, size=m, replace=False).tolist()) for m in (1, 2, 4, 9)]
    cases.append(frozenset({part.null_id, int(rng.integers(0, len(ids)))}))
    frame = cat.read(table, v)
    for frags in cases:
        want = read_fraction_of(units.units, boundary_values(part), read_set(frags, part), part.null_id) * ROWS
        df = frame.where(range_condition(part, frags, attr)).select(attr)
        df.collect()
        got = collect_scan_metrics(df).rows_read
        assert got == round(want), (table, attr, sorted(frags))
        assert got < ROWS / 2  # the pages skip: a row group spans every value


def test_an_unordered_column_skips_nothing_by_its_pages(ctx):
    cat = ctx.catalog
    units = read_units(cat, "ordered", "s", cat.current_version("ordered"))
    assert "pages" in units.source
    # every page of s spans nearly the whole value range: no sketch skips a page
    assert all(u.lo <= "001" and u.hi >= "998" for u in units.units)


def test_a_file_without_a_page_index_gives_row_groups(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    f = str(tmp_path / "plain.parquet")
    pq.write_table(pa.table({"a": list(range(1000))}), f, row_group_size=250)
    assert page_index.column_pages(lambda o, n: open(f, "rb").read()[o:o + n], len(open(f, "rb").read()), "a") is None
    g = str(tmp_path / "indexed.parquet")
    pq.write_table(pa.table({"a": list(range(1000)), "b": pa.array([None] * 1000, pa.int64())}), g, row_group_size=500,
                   write_page_index=True, data_page_size=512, use_dictionary=False, write_batch_size=100)
    data = open(g, "rb").read()
    chunks = page_index.column_pages(lambda o, n: data[o:o + n], len(data), "a")
    assert [sum(c.rows) for c in chunks] == [500, 500]
    pages = [(lo, hi, r) for c in chunks for lo, hi, r in zip(c.lo, c.hi, c.rows)]
    assert len(pages) > 2 and pages[0][0] == 0 and pages[-1][1] == 999
    assert all(hi - lo + 1 == r for lo, hi, r in pages)  # a page of consecutive values: its bounds
    nulls = page_index.column_pages(lambda o, n: data[o:o + n], len(data), "b")
    assert all(lo is None and n == r for c in nulls for lo, n, r in zip(c.lo, c.nulls, c.rows))


def test_the_decision_weighs_the_files_as_stored_against_a_copy(ctx, spark):
    """A table in key order with Spark's default pages (20,000 rows): 50 duplicated keys in one
    page leave about a tenth of it to read.  Over a few predicted uses the sketch is used on the files as
    they are; over many a narrow copy of the two columns the query reads (1,000-row pages) pays
    more, and the decision line says both."""
    from advisor.selection.cost_model import CostParams
    from advisor.selection.recommend import recommend

    rows = spark.range(200_000).union(spark.range(40_000, 40_050)).selectExpr(
        "id AS k", "id % 7 AS x", "repeat('p', 20) AS pad").repartition(1).sortWithinPartitions("k")
    ctx.catalog.create_table("keyed", rows, "test")
    sql = "SELECT k, count(x) AS n FROM keyed GROUP BY k HAVING count(x) > 1"
    few = recommend(ctx, sql, fragments=1000, params=CostParams(prior_reuses=3), pairs=False)
    many = recommend(ctx, sql, fragments=1000, params=CostParams(prior_reuses=200), pairs=False)
    f, m = few["decision"], many["decision"]
    assert f["go"] and f["layout"] is None and "stored files' pages" in f["reason"], f["reason"]
    assert m["go"] and m["layout"]["columns"] == ["k", "x"] and not m["layout"]["built"], m["reason"]
    assert "files as stored" in m["reason"] and "narrow copy of keyed (k, x)" in m["reason"]
    assert "pays after" in m["reason"] and "a full layout" in m["reason"]
