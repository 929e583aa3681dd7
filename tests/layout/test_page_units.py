"""Page-level read units of a clustered layout (``skipping._page_units``), checked against Spark.

Differential: for sketches of random fragment sets on integer, date and string attributes (NULLs
included), the rows the model predicts a sketched scan of the layout reads must equal the rows
Spark's Parquet reader actually returns after skipping row groups and pages by the column index.
Small pages (50 rows, below parquet-mr's first size check at 100 rows, so each row group starts
with a 100-row page) and small row groups make every row group end in a short page.  Both builds
are checked: Spark's (pages modelled) and the driver's (``arrow_copy``: pages read from the files'
page index).
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from advisor.layout import clustered_copy as layout
from advisor.context import Context
from advisor.engine.scan_metrics import collect_scan_metrics
from advisor.partition.refine import fine_partition
from advisor.layout.skip_prediction import _page_units, boundary_values, read_fraction_of, read_units
from advisor.sketch.range_filter import range_condition
from advisor.partition.fragment_runs import read_set

ATTRS = ("k", "d", "s")


@pytest.fixture(scope="module")
def ctx(spark, tmp_path_factory):
    rng = np.random.default_rng(11)
    n = 6000
    k = pd.array(rng.integers(0, 3000, n), dtype="Int64")
    k[rng.random(n) < 0.03] = pd.NA
    s = pd.Series([f"s{v:04d}" for v in rng.integers(0, 500, n)], dtype=object)
    s[rng.random(n) < 0.02] = None
    pdf = pd.DataFrame({"k": k, "d": [dt.date(2020, 1, 1) + dt.timedelta(days=int(v)) for v in rng.integers(0, 400, n)],
                        "s": s, "x": rng.random(n)})
    c = Context(tmp_path_factory.mktemp("pages"), spark=spark)
    frame = spark.createDataFrame(pdf).selectExpr("CAST(k AS BIGINT) AS k", "d", "s", "x")
    saved = layout.PAGE_ROWS, layout.ROW_GROUP_BYTES, layout.ARROW_BUILD
    lays = {}
    try:
        for table, on_driver in TABLES.items():
            c.catalog.create_table(table, frame, "test")
            layout.PAGE_ROWS, layout.ROW_GROUP_BYTES, layout.ARROW_BUILD = 50, 16 << 10, on_driver
            lays[table] = {a: layout.build_layout(c.catalog, table, a, rows_per_file=2500) for a in ATTRS}
    finally:
        layout.PAGE_ROWS, layout.ROW_GROUP_BYTES, layout.ARROW_BUILD = saved
    return c, lays


TABLES = {"pg": False, "pa": True}   # built by Spark, built on the driver


def _page_sizes(c, table: str, attr: str) -> tuple:
    """(version, page sizes) of the layout of ``table`` on ``attr``, checked to be pages of every row."""
    v = c.catalog.current_version(table)
    units = read_units(c.catalog, table, attr, v)
    assert "pages" in units.source and units.rows == 6000
    return v, [u.rows for u in units.units]


@pytest.mark.parametrize("attr", ATTRS)
def test_units_are_pages_of_the_layouts_own_attribute(ctx, attr):
    c, _ = ctx
    v, sizes = _page_sizes(c, "pg", attr)
    # a group's first page is 100 rows, the rest 50 or a shorter tail; a group of 51-99 rows (a
    # file's last) is one page, and the next unit starts a new group
    assert sizes.count(100) >= 3, sizes
    assert all(r <= 50 or r == 100 or (r < 100 and sizes[i + 1:i + 2] in ([], [100]))
               for i, r in enumerate(sizes)), sizes
    assert sum(r < 50 for r in sizes) >= 3  # row groups end in short pages
    other = read_units(c.catalog, "pg", "x", v, layout_attr=attr)  # not the sort column: row groups
    assert "row groups" in other.source


@pytest.mark.parametrize("attr", ATTRS)
def test_driver_built_pages_are_page_rows_long_and_read_from_the_index(ctx, attr):
    c, _ = ctx
    v, sizes = _page_sizes(c, "pa", attr)
    assert sizes.count(50) >= len(sizes) - 2 * len(sizes) // 25, sizes  # only row groups' last pages are short
    assert "pages" in read_units(c.catalog, "pa", "x", v, layout_attr=attr).source  # every column has an index


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("attr", ATTRS)
def test_predicted_rows_read_equal_sparks(ctx, spark, attr, table):
    c, lays = ctx
    lays = lays[table]
    cat = c.catalog
    v = cat.current_version(table)
    part = fine_partition(cat, table, attr, 40, v)
    units = read_units(cat, table, attr, v)
    rng = np.random.default_rng(len(attr))
    ids = list(range(len(part.boundaries) + 1))
    cases = [frozenset(rng.choice(ids, size=m, replace=False).tolist()) for m in (1, 2, 3, 5, 8)]
    cases.append(frozenset({part.null_id, int(rng.integers(0, len(ids)))}))
    for frags in cases:
        want = read_fraction_of(units.units, boundary_values(part), read_set(frags, part), part.null_id) * 6000
        df = spark.read.parquet(lays[attr]["path"]).where(range_condition(part, frags, attr))
        df.collect()
        assert collect_scan_metrics(df).rows_read == round(want), (attr, sorted(frags))


def test_an_unsorted_column_gives_no_page_units(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    f = str(tmp_path / "u.parquet")
    pq.write_table(pa.table({"a": [3, 1, 2, 5]}), f)
    assert _page_units([f], "a", 2) is None
    g = str(tmp_path / "n.parquet")
    pq.write_table(pa.table({"a": [1, None, 2, 5]}), g)  # NULLs not first
    assert _page_units([g], "a", 2) is None
    h = str(tmp_path / "ok.parquet")
    pq.write_table(pa.table({"a": [None] * 98 + [1, 2, 2, 7, 9] + [10] * 150}), h)
    assert [(u.rows, u.lo, u.hi, u.nulls) for u in _page_units([h], "a", 120)] == \
        [(120, 1, 10, 98), (120, 10, 10, 0), (13, 10, 10, 0)]
    assert [(u.rows, u.lo, u.hi, u.nulls) for u in _page_units([h], "a", 30)][:3] == \
        [(100, 1, 2, 98), (30, 2, 10, 0), (30, 10, 10, 0)]


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("attr,n", [("k", 3000), ("d", 400)])
def test_one_value_runs_as_an_in_list_skip_pages_like_ranges(ctx, spark, attr, n, table):
    """At about one value per fragment a sketch's runs become one IN list (``use.POINT_WIDTH``):
    Spark must still skip exactly the pages the model predicts, which needs the session's
    ``inFilterThreshold`` (``advisor.engine.session``); at Spark's default of 10 values only the list's
    [min, max] reaches Parquet and the scan reads more."""
    c, lays = ctx
    lays = lays[table]
    cat = c.catalog
    v = cat.current_version(table)
    part = fine_partition(cat, table, attr, n, v)
    units = read_units(cat, table, attr, v)
    rng = np.random.default_rng(n)
    frags = frozenset(rng.choice(range(1, len(part.boundaries)), size=12, replace=False).tolist())
    cond = range_condition(part, frags, attr)
    assert " IN (" in cond and " OR " not in cond, cond
    want = read_fraction_of(units.units, boundary_values(part), read_set(frags, part), part.null_id) * 6000

    def rows_read():
        df = spark.read.parquet(lays[attr]["path"]).where(cond)
        df.collect()
        return collect_scan_metrics(df).rows_read

    assert rows_read() == round(want) < 3000
    old = spark.conf.get("spark.sql.parquet.pushdown.inFilterThreshold")
    spark.conf.set("spark.sql.parquet.pushdown.inFilterThreshold", "10")
    try:
        assert rows_read() > round(want)
    finally:
        spark.conf.set("spark.sql.parquet.pushdown.inFilterThreshold", old)
