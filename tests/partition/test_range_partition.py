"""Equi-depth partitions and binary-search fragment assignment for every supported type."""

import datetime as dt
import decimal

import pandas as pd
import pytest
from pyspark.sql import types as T

from advisor.warehouse.catalog import Catalog
from advisor.partition.range_partition import RangePartition, assign_column, build_partition
from advisor.warehouse.store import Store
from advisor.sketch.range_filter import range_condition


def _ref_frag(part, v):
    """Reference assignment: linear scan over the half-open ranges."""
    if v is None or (isinstance(v, float) and v != v):
        return part.null_id
    for i in range(part.n_ranges):
        lo, hi = part.range_of(i)
        if (lo is None or v >= lo) and (hi is None or v < hi):
            return i
    raise AssertionError("no range covers value")


CASES = {
    "int": (T.LongType(), [((i * 37) % 1000) for i in range(2000)] + [None]),
    "dec": (T.DecimalType(15, 2), [decimal.Decimal(i % 500) / 4 for i in range(2000)] + [None]),
    "dbl": (T.DoubleType(), [((i * 7) % 301) / 3.0 for i in range(2000)] + [None, float("nan")]),
    "date": (T.DateType(), [dt.date(2000, 1, 1) + dt.timedelta(days=i % 900) for i in range(2000)] + [None]),
    "ts": (T.TimestampType(), [dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(minutes=13 * i)
                               for i in range(2000)] + [None]),
    "str": (T.StringType(), [f"s{(i * 11) % 700:04d}" for i in range(2000)] + [None]),
}


@pytest.fixture(scope="module")
def cat(spark, tmp_path_factory):
    c = Catalog(spark, Store(tmp_path_factory.mktemp("wh")))
    for name, (typ, vals) in CASES.items():
        schema = T.StructType([T.StructField("a", typ, True)])
        c.create_table(f"t_{name}", spark.createDataFrame([(v,) for v in vals], schema))
    return c


@pytest.mark.parametrize("on_driver", [None, False])
@pytest.mark.parametrize("name", list(CASES))
def test_assignment_matches_reference_and_use_filter(spark, cat, name, on_driver):
    part = build_partition(cat, f"t_{name}", "a", 20, on_driver=on_driver)
    assert 2 <= part.n_ranges <= 21
    assert sum(part.sizes) == len(CASES[name][1])
    # equi-depth: no range holds more than 3x its fair share (values are near-uniform here)
    assert max(part.sizes[: part.n_ranges]) <= 3 * len(CASES[name][1]) / (part.n_ranges - 1)
    rows = assign_column(cat.read(f"t_{name}"), "a", part, "f").collect()
    for r in rows:
        assert r["f"] == _ref_frag(part, r["a"]), (r["a"], r["f"])
    # the use filter for a fragment set selects exactly the rows assigned to those fragments
    chosen = frozenset({0, 3, 4, 5, part.null_id, part.n_ranges - 1})
    cat.read(f"t_{name}").createOrReplaceTempView("pv")
    got = spark.sql(f"SELECT count(*) FROM pv WHERE {range_condition(part, chosen, 'a')}").first()[0]
    assert got == sum(1 for r in rows if r["f"] in chosen)


@pytest.mark.parametrize("on_driver", [True, False])
def test_few_distinct_values_get_one_range_each(spark, cat, on_driver):
    if "small" not in cat.tables():
        cat.create_table("small", spark.createDataFrame(pd.DataFrame({"a": [1, 2, 2, 3, 3, 3] * 10})))
    part = build_partition(cat, "small", "a", 1000, on_driver=on_driver)
    assert part.boundaries == (1, 2, 3)
    assert list(part.sizes) == [0, 10, 20, 30, 0]


@pytest.mark.parametrize("name", [n for n in CASES if n != "ts"])
def test_driver_sizes_equal_spark_counts_at_a_version_with_deletes(spark, cat, name):
    """The driver path reads the snapshot (base + inserts - deletes) with pyarrow; its sizes must
    equal Spark's own assignment of that snapshot, fragment by fragment."""
    from pyspark.sql import functions as F

    table = f"v_{name}"
    if table not in cat.tables():
        typ, vals = CASES[name]
        schema = T.StructType([T.StructField("a", typ, True)])
        cat.create_table(table, spark.createDataFrame([(v,) for v in vals], schema))
        snap = cat.read(table, with_rid=True)
        gone = snap.orderBy("_rid").limit(300).select("_rid")
        cat.apply_frames(table, spark.createDataFrame([(v,) for v in vals[:150]], schema), gone)
    ver = cat.version(table)
    assert ver.rows == len(CASES[name][1]) + 150 - 300
    for n in (7, 200, 1000):
        part = build_partition(cat, table, "a", n, on_driver=True)
        assert sum(part.sizes) == ver.rows
        distinct = len({v for v in CASES[name][1] if v is not None and v == v})
        if n == 1000 and distinct <= 900:  # one range per value, as the Spark path makes (its NDV
            # is approx_count_distinct's, so it is only sure to take that path well below n)
            by_spark = build_partition(cat, table, "a", n, on_driver=False)
            assert (part.boundaries, part.sizes) == (by_spark.boundaries, by_spark.sizes)
        got = assign_column(cat.read(table), "a", part, "f").groupBy("f").agg(F.count(F.lit(1)).alias("c")).collect()
        spark_sizes = [0] * part.n_fragments
        for r in got:
            spark_sizes[r["f"]] = r["c"]
        assert list(part.sizes) == spark_sizes, (name, n)


@pytest.mark.parametrize("name", list(CASES))
def test_many_runs_search_tree_selects_exactly_the_fragments(spark, cat, name):
    """Past ``TREE_LEAF`` runs the filter is a search tree over the runs' bounds: it must still admit
    exactly the rows of the chosen fragments (NULL and NaN included or not), and still reach the
    Parquet reader as a pushed filter (row-group skipping)."""
    import random

    from advisor.sketch.range_filter import TREE_LEAF
    from advisor.partition.fragment_runs import runs

    part = build_partition(cat, f"t_{name}", "a", 200)
    rng = random.Random(name)
    rows = assign_column(cat.read(f"t_{name}"), "a", part, "f").collect()
    cat.read(f"t_{name}").createOrReplaceTempView("pv")
    for with_null in (False, True):
        chosen = frozenset(f for f in range(part.n_ranges) if rng.random() < 0.4) | (
            {part.null_id} if with_null else set())
        assert len(runs(chosen, part)) > 2 * TREE_LEAF  # two levels of the tree at least
        cond = range_condition(part, chosen, "a", max_runs=10_000)
        got = spark.sql(f"SELECT count(*) FROM pv WHERE {cond}").first()[0]
        assert got == sum(1 for r in rows if r["f"] in chosen), (name, with_null)
        if not with_null:
            pushable = cond  # isnan() (the NULL fragment of a float column) is not a Parquet filter
    spark.conf.set("spark.sql.maxMetadataStringLength", "1000000")  # explain truncates PushedFilters
    try:
        plan = spark.sql(f"SELECT a FROM pv WHERE {pushable}")._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.conf.unset("spark.sql.maxMetadataStringLength")
    pushed = plan.split("PushedFilters: ", 1)[1].split(", ReadSchema", 1)[0]
    assert pushed.count("Or(") > 2 * TREE_LEAF, pushed


def test_empty_sketch_filters_everything():
    part = RangePartition(1, "t", "a", "bigint", (10, 20))
    assert range_condition(part, frozenset(), "a") == "false"
    assert range_condition(part, frozenset({0, 1, 2}), "a") == "(`a` IS NOT NULL)"
    assert range_condition(part, frozenset({1, 3}), "a") == "(`a` >= 10 AND `a` < 20) OR `a` IS NULL"


def test_capped_runs_bridge_cheapest_gaps_and_keep_every_fragment():
    from advisor.partition.fragment_runs import capped_runs, runs

    part = RangePartition(1, "t", "a", "bigint", tuple(range(10, 1000, 10)), tuple([5] * 50 + [1] * 51))
    frags = frozenset(range(0, 100, 2))  # 50 isolated fragments, gaps of one fragment each
    assert len(runs(frags, part)) == 50
    capped = capped_runs(frags, part, max_runs=10)
    assert len(capped) <= 10
    covered = {f for lo, hi in capped for f in range(lo, hi + 1)}
    assert frags <= covered  # a superset: still a safe sketch
    # the 24 cheap gaps (1-row fragments 51..97) are all bridged before any 5-row gap: one run ends at 98
    # and starts at or below 50
    assert any(lo <= 50 and hi == 98 for lo, hi in capped)
    bridged_rows = sum(part.sizes[f] for lo, hi in capped for f in range(lo, hi + 1)) - sum(part.sizes[f] for f in frags)
    assert bridged_rows == 24 * 1 + 16 * 5  # 40 gaps bridged, cheapest first


@pytest.mark.parametrize("name", list(CASES))
def test_partition_carried_over_small_batches_has_exact_sizes(spark, tmp_path, name):
    """fine_partition at a later version reuses the boundaries and updates the fragment sizes from
    the batch files; they equal Spark's assignment of the new version's rows."""
    from advisor.partition.refine import fine_partition

    typ, vals = CASES[name]
    schema = T.StructType([T.StructField("a", typ, True)])
    c = Catalog(spark, Store(tmp_path))
    c.create_table("t", spark.createDataFrame([(v,) for v in vals], schema))
    p1 = fine_partition(c, "t", "a", 20, 1)
    ins = spark.createDataFrame([(v,) for v in vals[::37]], schema)
    dels = c.read("t", with_rid=True).limit(25).select("_rid")
    v2 = c.apply_frames("t", ins, dels).version
    p2 = fine_partition(c, "t", "a", 20, v2)
    assert p2.table_version == v2 and p2.id != p1.id
    counts = assign_column(c.read("t", v2).select("a"), "a", p2, "__f").groupBy("__f").count().collect()
    want = [0] * p2.n_fragments
    for r in counts:
        want[r["__f"]] += int(r["count"])
    assert list(p2.sizes) == want and sum(want) == c.version("t", v2).rows
    if name != "ts":  # zoned timestamps may be rebuilt rather than carried (both are exact)
        assert p2.boundaries == p1.boundaries


def test_jvm_bucketizer_equals_pyspark_wrapper(spark):
    """``_bucketize`` hands the splits to the JVM as one byte array; it must bucket exactly as
    PySpark's Bucketizer wrapper does, at the split values themselves, between them, beyond the
    outer splits, and for NaN / NULL (``handleInvalid=keep``), with 10,002 splits."""
    from pyspark.ml.feature import Bucketizer

    from advisor.partition.range_partition import _bucketize

    splits = [float("-inf")] + [i * 0.5 - 2500.0 for i in range(10_000)] + [float("inf")]
    vals = [i * 0.25 - 2600.0 for i in range(21_000)] + [float("nan"), None, -1e300, 1e300, 0.0, -0.0]
    df = spark.createDataFrame([(i, v) for i, v in enumerate(vals)], "i long, x double")
    ref = Bucketizer(splits=splits, inputCol="x", outputCol="b", handleInvalid="keep").transform(df)
    got = _bucketize(df, splits, "x", "b")
    r = {row["i"]: row["b"] for row in ref.collect()}
    g = {row["i"]: row["b"] for row in got.collect()}
    assert g == r
    assert g[len(vals) - 6] == len(splits) - 1 and g[len(vals) - 5] is None  # NaN kept, NULL stays NULL
    assert len({v for v in g.values() if v is not None}) > 9_000


@pytest.mark.parametrize("name", ["int", "date"])
def test_short_runs_become_one_in_list_that_parquet_receives(spark, cat, name):
    """On an integer or date column, runs of at most ``POINT_WIDTH`` values are written as one IN
    list (wider runs stay ranges): the filter must still admit exactly the chosen fragments' rows,
    and the list must reach the Parquet reader as a value set, not as its [min, max]."""
    from advisor.sketch.range_filter import POINT_WIDTH

    part = build_partition(cat, f"t_{name}", "a", 1000)  # ~one value per fragment
    rows = assign_column(cat.read(f"t_{name}"), "a", part, "f").collect()
    single = [f for f in range(1, part.n_ranges - 1) if f % 7 == 3]
    wide = set(range(200, 200 + 3 * POINT_WIDTH))  # one run wider than POINT_WIDTH values
    chosen = frozenset(single) | wide | {part.null_id}
    cond = range_condition(part, chosen, "a", max_runs=10_000)
    assert " IN (" in cond and ">=" in cond, cond
    cat.read(f"t_{name}").createOrReplaceTempView("pv")
    got = spark.sql(f"SELECT count(*) FROM pv WHERE {cond}").first()[0]
    assert got == sum(1 for r in rows if r["f"] in chosen)
    spark.conf.set("spark.sql.maxMetadataStringLength", "1000000")
    try:
        plan = spark.sql(f"SELECT a FROM pv WHERE {cond}")._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.conf.unset("spark.sql.maxMetadataStringLength")
    pushed = plan.split("PushedFilters: ", 1)[1].split(", ReadSchema", 1)[0]
    assert "In(a, [" in pushed, pushed[:500]
