"""The driver's draw (pyarrow) keeps exactly the rows Spark's draw keeps, with the same keys, sizes
and stratum labels, so the two can stand in for each other and be maintained alike."""

from __future__ import annotations

import datetime
import decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from advisor.estimation import size_estimates as estimate_module
from advisor.estimation import sample_store as samples_module
from advisor.warehouse.catalog import Catalog
from advisor.estimation.size_estimates import get_sample
from advisor.warehouse.store import Store
from estimators.sampling import reservoir_local as sampling_local
from estimators.sampling.reservoir_spark import sample_key, stratified_sample
from estimators.sampling.spark_hash import sample_keys
from estimators.sampling.stratum_labels import labels, supported_spark_type


def test_keys_equal_spark_xxhash64(spark):
    rng = np.random.default_rng(1)
    ids = np.concatenate([rng.integers(-2 ** 63, 2 ** 63 - 1, 300, dtype=np.int64), np.arange(-3, 200),
                          [2 ** 63 - 1, -2 ** 63]])
    df = spark.createDataFrame([(int(i),) for i in ids], "_rid long")
    for seed in (0, 7, 2 ** 31 - 1, -3, 2 ** 31, -2 ** 40):  # int and long literals hash differently
        want = np.array([r[0] for r in df.select(sample_key(df, seed, "_rid")).collect()])
        np.testing.assert_array_equal(sample_keys(seed, ids), want)


MIXED = [
    (1, 10, "a", datetime.date(2013, 1, 1), datetime.datetime(2013, 1, 1, 5), decimal.Decimal("1.50"), True),
    (None, -10, 'q"uo\\te', datetime.date(1998, 12, 31), datetime.datetime(2013, 1, 1, 5, 0, 0, 123456),
     decimal.Decimal("0.00"), False),
    (2, None, "ctl\x01\x1f\n\t\r\b\fé€😀/,", None, None, decimal.Decimal("-12345.67"), None),
    (None, None, None, None, None, None, None),
    (3, 2 ** 40, "", datetime.date(1, 1, 1), datetime.datetime(1970, 1, 1, 0, 0, 0, 999000),
     decimal.Decimal("0.01"), True),
]
MIXED_SCHEMA = "a int, b long, s string, d date, t timestamp, m decimal(15,2), f boolean"


@pytest.mark.parametrize("strata", [["a"], ["a", "b"], ["s"], ["d", "t"], ["m", "f"], list("absdtmf")])
def test_labels_equal_spark_to_json(spark, tmp_path, strata):
    from pyspark.sql import functions as F

    df = spark.createDataFrame(MIXED, MIXED_SCHEMA).coalesce(1)
    df.write.parquet(str(tmp_path / "t"))  # read back as the catalog reads it (INT96 timestamps)
    back = spark.read.parquet(str(tmp_path / "t"))
    want = [r[0] for r in back.select(F.to_json(F.struct(*[F.col(c) for c in strata]))).collect()]
    tab = ds.dataset(str(tmp_path / "t"), format="parquet").to_table()
    assert labels(tab, strata, np.arange(tab.num_rows)) == want
    assert len(want) == len(MIXED) and want.count("{}") >= 1  # the all-NULL row is labelled, not dropped


def test_only_reproduced_types_are_drawn_on_the_driver():
    assert all(supported_spark_type(t) for t in ("int", "bigint", "string", "date", "timestamp", "boolean",
                                                 "decimal(15,2)", "DECIMAL(10, 6)"))
    assert not any(supported_spark_type(t) for t in ("double", "float", "decimal(38,10)", "binary",
                                                     "array<int>"))


@pytest.fixture(scope="module")
def stored(spark, tmp_path_factory):
    """A skewed table with NULL keys and one-row strata, written by Spark and read by pyarrow."""
    rng = np.random.default_rng(4)
    n = 6000
    g = rng.choice(["x", "y", "z", None], n, p=[0.7, 0.2, 0.09, 0.01])
    h = rng.zipf(1.6, n) % 97
    day = pd.to_datetime("2020-01-01") + pd.to_timedelta(rng.integers(0, 40, n), unit="D")
    pdf = pd.DataFrame({"g": g, "h": h.astype("int64"), "day": day, "v": rng.normal(size=n),
                        "_rid": rng.permutation(n).astype("int64") * 7 + 11})
    path = str(tmp_path_factory.mktemp("drawn") / "t")
    spark.createDataFrame(pdf).write.parquet(path)
    return spark.read.parquet(path), ds.dataset(path, format="parquet").to_table()


def _canon(t: pa.Table) -> pd.DataFrame:
    cols = [c for c in ("_rid", "_key", "_n_g", "_stratum", "_in", "g", "h", "v") if c in t.column_names]
    return t.select(cols).to_pandas().sort_values("_rid").reset_index(drop=True)


@pytest.mark.parametrize("strata,theta,reserve,max_strata", [
    (["g"], 0.05, True, None),
    (["g", "h"], 0.1, True, None),
    (["day", "g"], 0.2, False, None),
    (["h"], 0.05, True, 10),     # more strata than allowed: the post-stratified uniform fallback
    ([], 0.07, False, None),     # no strata: one uniform sample
    (["g"], 1.0, True, None),
])
def test_driver_draw_equals_spark_draw(spark, stored, strata, theta, reserve, max_strata):
    sdf, tab = stored
    s = stratified_sample(sdf, strata, theta, seed=5, id_col="_rid", reserve=reserve, max_strata=max_strata)
    loc = sampling_local.draw(tab, strata, theta, 5, reserve=reserve, max_strata=max_strata)
    want = s.df.toArrow()
    assert loc.table.column_names == want.column_names
    assert (loc.population, loc.n_strata, loc.sample_size, loc.uniform_fallback) == \
        (s.population, s.n_strata, s.sample_size, s.uniform_fallback)
    got, exp = _canon(loc.table), _canon(want)
    assert len(exp) >= s.sample_size > 0
    pd.testing.assert_frame_equal(got, exp, check_dtype=False)
    # the day column (a timestamp) comes through with the row, not reordered
    both = pd.DataFrame({"rid": loc.table.column("_rid").to_numpy(), "day": loc.table.column("day").to_pandas()})
    ref = sdf.select("_rid", "day").toPandas().set_index("_rid")["day"]
    assert (both.set_index("rid")["day"].dt.tz_localize(None) == ref.loc[both["rid"]].dt.tz_localize(None).values).all()


def test_bad_arguments_are_refused(stored):
    _, tab = stored
    with pytest.raises(ValueError, match="theta"):
        sampling_local.draw(tab, ["g"], 0.0, 1)
    with pytest.raises(ValueError, match="nope"):
        sampling_local.draw(tab, ["nope"], 0.1, 1)


def test_get_sample_draws_on_the_driver_and_maintains_a_timestamp_stratum(spark, tmp_path, monkeypatch):
    """Labels of a timestamp stratum written by the driver match the delta's, which Spark labels."""
    rng = np.random.default_rng(2)
    n = 900
    pdf = pd.DataFrame({"k": rng.choice(["p", "q"], n),
                        "ts": pd.to_datetime("2013-01-01 05:00") + pd.to_timedelta(rng.integers(0, 6, n), unit="h"),
                        "v": rng.integers(0, 100, n)})
    cat = Catalog(spark, Store(tmp_path / "wh"))
    cat.create_table("t", spark.createDataFrame(pdf), "test")
    s1 = get_sample(cat, "t", ["ts", "k"], 0.1, 3, 1)
    assert s1.meta["drawn_on"] == "driver" and s1.meta["reserve"]
    assert dict(spark.read.parquet(s1.path).dtypes)["ts"] == "timestamp"  # Spark reads what the driver wrote
    rids = [r["_rid"] for r in cat.read("t", 1, with_rid=True).select("_rid").collect()]
    ins = spark.createDataFrame(pd.DataFrame({"k": ["p"] * 5, "ts": [pd.Timestamp("2013-01-01 06:00")] * 5,
                                              "v": [1] * 5}))
    v2 = cat.apply_frames("t", ins, spark.createDataFrame(pd.DataFrame({"_rid": rids[:7]}))).version
    s2 = get_sample(cat, "t", ["ts", "k"], 0.1, 3, v2)
    assert s2.meta.get("maintained_from") == 1
    monkeypatch.setattr(samples_module, "LOCAL_DRAW", False)
    fresh = stratified_sample(cat.read("t", v2, with_rid=True), ["k", "ts"], 0.1, 3, id_col="_rid", reserve=True)
    got = spark.read.parquet(s2.path).filter("_in").select("_rid", "_n_g", "_stratum").toPandas()
    want = fresh.df.filter("_in").select("_rid", "_n_g", "_stratum").toPandas()
    pd.testing.assert_frame_equal(got.sort_values("_rid").reset_index(drop=True),
                                  want.sort_values("_rid").reset_index(drop=True))
    assert got["_stratum"].nunique() == 12 and got["_stratum"].str.contains("T06:00:00.000Z").any()


@pytest.mark.parametrize("sql", [
    "SELECT g, sum(v) FROM t GROUP BY g HAVING sum(v) > 2050",
    "SELECT g, k, count(*) AS n FROM t GROUP BY g, k ORDER BY n DESC LIMIT 8",
])
def test_estimates_do_not_depend_on_where_the_sample_was_drawn(spark, tmp_path, monkeypatch, sql):
    """Spark writes a sample in shuffle order, the driver in table order: the same rows must give the
    same estimates, intervals included."""
    from advisor.context import Context
    from advisor.estimation.size_estimates import analyze, estimate
    from advisor.plan.parse import parse_sql

    rng = np.random.default_rng(9)
    n = 4000
    pdf = pd.DataFrame({"g": rng.integers(0, 40, n), "k": rng.integers(0, 3, n),
                        "v": np.round(rng.gamma(2.0, 10.0, n), 2)})
    runs = {}
    for where in ("spark", "driver"):
        monkeypatch.setattr(samples_module, "LOCAL_DRAW", where == "driver")
        monkeypatch.setattr(estimate_module._GROUPS, "max_entries", 0)
        c = Context(tmp_path / where, spark=spark)
        c.catalog.create_table("t", spark.createDataFrame(pdf.sample(frac=1.0, random_state=1)).repartition(3), "test")
        shape = analyze(parse_sql(sql, c.schema_lookup()), lambda t: c.catalog.version(t).rows)
        runs[where] = estimate(c.catalog, shape, {"g": (20,), "k": (3,)}, 0.2, 0)
        assert runs[where].sample.meta["drawn_on"] == where
    a, b = runs["spark"], runs["driver"]
    assert a.sizes.keys() == b.sizes.keys() and a.sizes
    assert any(0 < s.rows_expected < n for s in a.sizes.values())  # not a trivial all-or-nothing case
    for key in a.sizes:
        x, y = a.sizes[key], b.sizes[key]
        assert (x.rows_expected, x.rows_point, x.ci_lo, x.ci_hi) == (y.rows_expected, y.rows_point, y.ci_lo, y.ci_hi)


def _wide_table(spark, tmp_path, draw_locally: bool):
    rng = np.random.default_rng(12)
    n = 3000
    pdf = pd.DataFrame({"g": rng.integers(0, 30, n), "k": rng.integers(0, 5, n),
                        "v": np.round(rng.gamma(2.0, 10.0, n), 2), "w": rng.integers(0, 1000, n),
                        "note": rng.choice(["a", "bb", "ccc"], n)})
    c = Catalog(spark, Store(tmp_path / ("driver" if draw_locally else "spark")))
    c.create_table("t", spark.createDataFrame(pdf), "test")
    return c


def _rows(path) -> pd.DataFrame:
    t = ds.dataset(path, format="parquet").to_table()
    return t.to_pandas().sort_values("_rid").reset_index(drop=True)


@pytest.mark.parametrize("draw_locally", [True, False])
def test_a_narrow_sample_is_widened_for_its_own_rows(spark, tmp_path, monkeypatch, draw_locally):
    monkeypatch.setattr(samples_module, "LOCAL_DRAW", draw_locally)
    cat = _wide_table(spark, tmp_path, draw_locally)
    s1 = get_sample(cat, "t", ["g"], 0.1, 4, 1, columns=["v"])
    narrow = _rows(s1.path)
    assert {"g", "v", "_rid"} <= set(narrow.columns) and not {"w", "k", "note"} & set(narrow.columns)
    assert s1.meta["columns"] == ["g", "v"]
    s2 = get_sample(cat, "t", ["g"], 0.1, 4, 1, columns=["w", "v"])
    assert s2.cached and s2.path == s1.path and s2.meta["columns"] == ["g", "v", "w"]
    wide = _rows(s2.path)
    # same rows, keys and strata; the new column holds each row's own value
    cols = ["_rid", "_key", "_n_g", "_stratum", "_in", "g", "v"]
    pd.testing.assert_frame_equal(wide[cols], narrow[cols])
    table = cat.read("t", 1, with_rid=True).select("_rid", "w").toPandas().set_index("_rid")["w"]
    assert (wide["w"].to_numpy() == table.loc[wide["_rid"]].to_numpy()).all()
    # and a full draw keeps the very same rows
    monkeypatch.setattr(samples_module, "LOCAL_DRAW", True)
    full = sampling_local.draw(cat.read_arrow("t", 1, with_rid=True), ["g"], 0.1, 4)
    f = full.table.to_pandas().sort_values("_rid").reset_index(drop=True)
    pd.testing.assert_frame_equal(wide[cols + ["w"]], f[cols + ["w"]])
    s3 = get_sample(cat, "t", ["g"], 0.1, 4, 1)  # every column
    assert s3.meta["columns"] is None and {"k", "note"} <= set(_rows(s3.path).columns)
    assert get_sample(cat, "t", ["g"], 0.1, 4, 1, columns=["v"]).seconds == 0.0  # a superset serves


def test_a_narrow_sample_is_maintained_with_its_columns(spark, tmp_path):
    cat = _wide_table(spark, tmp_path, True)
    get_sample(cat, "t", ["g"], 0.1, 4, 1, columns=["v"])
    rids = [r["_rid"] for r in cat.read("t", 1, with_rid=True).select("_rid").collect()]
    ins = spark.createDataFrame(pd.DataFrame({"g": [3] * 6, "k": [1] * 6, "v": [1.5] * 6, "w": [7] * 6,
                                              "note": ["a"] * 6}))
    v2 = cat.apply_frames("t", ins, spark.createDataFrame(pd.DataFrame({"_rid": rids[:9]}))).version
    s2 = get_sample(cat, "t", ["g"], 0.1, 4, v2, columns=["v", "w"])
    assert s2.meta.get("maintained_from") == 1 and s2.meta["columns"] == ["g", "v", "w"]
    got = _rows(s2.path)
    fresh = sampling_local.draw(cat.read_arrow("t", v2, with_rid=True), ["g"], 0.1, 4).table.to_pandas()
    cols = ["_rid", "_key", "_n_g", "_stratum", "g", "v", "w"]
    # the sampled rows are a fresh draw's (the reserve may have shrunk: deletions eat it)
    got, fresh = (f[f["_in"]].sort_values("_rid").reset_index(drop=True)[cols] for f in (got, fresh))
    assert len(fresh) > 0
    pd.testing.assert_frame_equal(got, fresh, check_dtype=False)


def test_estimates_over_a_narrow_sample_equal_those_over_a_full_one(spark, tmp_path, monkeypatch):
    from advisor.context import Context
    from advisor.estimation.size_estimates import analyze, estimate

    from advisor.plan.parse import parse_sql

    monkeypatch.setattr(estimate_module._GROUPS, "max_entries", 0)
    rng = np.random.default_rng(3)
    n = 3000
    pdf = pd.DataFrame({"g": rng.integers(0, 30, n), "k": rng.integers(0, 5, n),
                        "v": np.round(rng.gamma(2.0, 10.0, n), 2), "w": rng.integers(0, 1000, n)})
    sql = "SELECT g, sum(v) FROM t WHERE w < 800 GROUP BY g HAVING sum(v) > 1650"
    got = {}
    for full in (True, False):
        c = Context(tmp_path / str(full), spark=spark)
        c.catalog.create_table("t", spark.createDataFrame(pdf), "test")
        if full:
            get_sample(c.catalog, "t", ["g"], 0.2, 0, 1)  # stored with every column first
        shape = analyze(parse_sql(sql, c.schema_lookup()), lambda t: c.catalog.version(t).rows)
        e = estimate(c.catalog, shape, {"g": (10,), "k": (5,)}, 0.2, 0)
        assert (e.sample.meta["columns"] is None) == full
        got[full] = {k: (s.rows_expected, s.ci_lo, s.ci_hi) for k, s in e.sizes.items()}
    assert got[True] == got[False] and any(0 < x[0] < n for x in got[True].values())


def test_a_failed_write_leaves_the_stored_sample_whole(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    path = str(tmp_path / "samples" / "v000001_abc")
    sampling_local.write(pa.table({"_rid": [1, 2, 3]}), path)
    sampling_local.write(pa.table({"_rid": [4, 5]}), path)  # replaced whole
    assert sorted(ds.dataset(path, format="parquet").to_table().column("_rid").to_pylist()) == [4, 5]

    def broken(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", broken)
    with pytest.raises(OSError):
        sampling_local.write(pa.table({"_rid": [6]}), path)
    assert sorted(ds.dataset(path, format="parquet").to_table().column("_rid").to_pylist()) == [4, 5]
    assert [p.name for p in (tmp_path / "samples").iterdir()] == ["v000001_abc"]  # no attempt left over


@pytest.mark.parametrize("ncols,spread,dense", [(1, 4, True), (2, 4, True), (2, 1000, True), (2, 4, False),
                                                (3, 1000, False)])
def test_stratum_codes_number_values_by_first_appearance_with_null_as_a_value(ncols, spread, dense, monkeypatch):
    """``group_codes`` takes the dictionary's indices directly for one column, numbers a combined
    key of few possible values through a dense array, and factorizes one of many (forced here by
    a negative ``DENSE_SLACK``): every way the codes are pandas' factorize of the rows' value tuples
    (NULL a value of its own), and ``first`` is each code's first row; chunked columns included."""
    from estimators.sampling import stratum_labels
    from estimators.sampling.stratum_labels import group_codes

    if not dense:
        monkeypatch.setattr(stratum_labels, "DENSE_SLACK", -10 ** 9)

    rng = np.random.default_rng(7)
    for _ in range(150):
        n = int(rng.integers(0, 40))
        cols = {}
        for j in range(ncols):
            vals = [None if rng.random() < 0.2 else int(rng.integers(0, spread)) for _ in range(n)]
            cols[f"c{j}"] = pa.chunked_array([pa.array(vals[:n // 2], pa.int64()), pa.array(vals[n // 2:], pa.int64())]) \
                if j % 2 == 0 else pa.array([None if v is None else str(v) for v in vals], pa.string())
        table = pa.table(cols)
        codes, first = group_codes(table, list(cols))
        keys = list(zip(*[table.column(c).to_pylist() for c in cols])) if n else []
        want, uniq = pd.factorize(pd.Series(keys, dtype=object), use_na_sentinel=False)
        np.testing.assert_array_equal(codes, want)
        assert len(first) == len(uniq)
        for i, row in enumerate(first):
            assert codes[row] == i and not (codes[:row] == i).any()


@pytest.mark.parametrize("make", [
    lambda v: pa.array([None if x is None else x - 50 for x in v], pa.int32()),  # negative values
    lambda v: pa.array(v, pa.uint32()),
    lambda v: pa.array([None if x is None else datetime.date(1998, 1, 1) + datetime.timedelta(days=x) for x in v],
                       pa.date32()),
    lambda v: pa.array([None if x is None else x * 10 ** 12 for x in v], pa.int64()),  # too wide: dictionary
    lambda v: pa.array([None] * len(v), pa.int64()),  # all NULL
])
def test_stratum_codes_of_integer_and_date_columns_match_factorize(make):
    """Integer and date strata indexed by their offset from the minimum (or, too wide or all NULL,
    dictionary-encoded) number the values exactly as pandas' factorize does, alone and paired."""
    from estimators.sampling.stratum_labels import group_codes

    rng = np.random.default_rng(11)
    for _ in range(60):
        n = int(rng.integers(1, 50))
        col = make([None if rng.random() < 0.15 else int(rng.integers(0, 30)) for _ in range(n)])
        other = pa.array([str(int(x)) for x in rng.integers(0, 3, n)])
        for table, cols in ((pa.table({"a": col}), ["a"]), (pa.table({"a": col, "b": other}), ["a", "b"])):
            codes, first = group_codes(table, cols)
            keys = list(zip(*[table.column(c).to_pylist() for c in cols]))
            want, uniq = pd.factorize(pd.Series(keys, dtype=object), use_na_sentinel=False)
            np.testing.assert_array_equal(codes, want)
            np.testing.assert_array_equal(first, [int(np.flatnonzero(want == i)[0]) for i in range(len(uniq))])


@pytest.mark.parametrize("G", [3, 2048, 2049, 70_000])
@pytest.mark.parametrize("ties", [True, False])
def test_stratum_then_key_order_is_lexsort(G, ties):
    """The draw orders candidates exactly as ``np.lexsort((u, code))``: by one 64-bit key when the
    strata fit 11 bits and no (stratum, key) pair repeats, else by two stable sorts (16-bit radix
    or wider codes), ties broken by position.  Keys are multiples of 2^-53, as ``sample_keys``'."""
    rng = np.random.default_rng(G)
    code = rng.integers(0, G, 5000)
    u = (rng.integers(0, 40, 5000) / 40.0 if ties  # many equal keys
         else rng.integers(0, 2 ** 53, 5000, dtype=np.int64) / 2.0 ** 53)
    u[:3] = [0.0, 1.0 - 2.0 ** -53, 0.5]
    np.testing.assert_array_equal(sampling_local._by_stratum_then_key(code, u, G), np.lexsort((u, code)))


def test_a_drawn_sample_is_read_from_memory_as_from_its_file(spark, tmp_path, monkeypatch):
    """The draw primes ``sample_query`` with the table it wrote, so its estimate reads the rows from
    memory: dates, timestamps, decimals, strings and NULLs must come back exactly as from the file."""
    from advisor.estimation import sample_eval as sample_query

    monkeypatch.setattr(samples_module, "LOCAL_DRAW", True)
    rng = np.random.default_rng(5)
    n = 2000
    pdf = pd.DataFrame({"g": rng.integers(0, 20, n), "d": [datetime.date(2020, 1, 1) + datetime.timedelta(days=int(x))
                                                             for x in rng.integers(0, 400, n)],
                        "ts": pd.to_datetime(rng.integers(1.5e9, 1.7e9, n), unit="s"),
                        "p": [None if i % 13 == 0 else decimal.Decimal(int(x)) / 100 for i, x in enumerate(rng.integers(0, 10 ** 6, n))],
                        "s": rng.choice(["x", "yy", None], n)})
    cat = Catalog(spark, Store(tmp_path / "w"))
    cat.create_table("t", spark.createDataFrame(pdf, "g long, d date, ts timestamp, p decimal(12,2), s string"), "test")
    sample_query._DRAWN.clear()
    info = get_sample(cat, "t", ["g"], 0.1, 3, 1, columns=["d", "ts", "p", "s"])
    assert info.meta["drawn_on"] == "driver" and len(sample_query._DRAWN) == 1  # primed
    cols = ["d", "ts", "p", "s", "_n_g", "_stratum"]
    sample_query._SAMPLES.clear()
    from_memory = sample_query.local_rows(info.path, cols)
    sample_query._DRAWN.clear()
    sample_query._SAMPLES.clear()
    from_file = sample_query.local_rows(info.path, cols)
    assert len(from_file) == info.meta["sample_size"]
    pd.testing.assert_frame_equal(from_memory, from_file)
