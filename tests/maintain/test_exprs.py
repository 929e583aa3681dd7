"""The pandas expression evaluator (SQL three-valued logic, Spark-like functions) and fragment
assignment."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisor.errors import Unsupported
from advisor.maintain.exprs import evaluate, like_to_regex, mask, spark_substring
from advisor.partition.assign_pandas import assign
from advisor.maintain.frames import coerce_to, normalize_frame
from maintain_helpers import E, part

NA = pd.NA


@pytest.fixture
def df():
    return normalize_frame(pd.DataFrame({
        "a": pd.array([1, 2, None, 4], dtype="Int64"),
        "b": pd.array([0, 2, 3, None], dtype="Int64"),
        "x": [1.5, -2.5, None, 0.125],
        "s": ["abc", "Xyz", None, "a_%"],
        "d": pd.to_datetime(["2020-01-05", "2021-03-01", None, "2019-12-31"]),
    }))


def ev(sql, df):
    return evaluate(E(sql), df).tolist()


@pytest.mark.parametrize("sql,want", [
    ("a + b", [1, 4, NA, NA]),
    ("a - b * 2", [1, -2, NA, NA]),
    ("a / b", [NA, 1.0, NA, NA]),            # division by zero is NULL
    ("a % 3", [1, 2, NA, 1]),
    ("-a", [-1, -2, NA, -4]),
    ("x * 2", [3.0, -5.0, NA, 0.25]),
    ("a > 1", [False, True, NA, True]),
    ("a = b", [False, True, NA, NA]),
    ("a <> b", [True, False, NA, NA]),
    ("a > 1 AND b > 1", [False, True, NA, NA]),
    ("a > 1 OR b > 1", [False, True, True, True]),
    ("NOT a > 1", [True, False, NA, False]),
    ("a BETWEEN 1 AND 2", [True, True, NA, False]),
    ("a IN (1, 4)", [True, False, NA, True]),
    ("a IN (1, NULL)", [True, NA, NA, NA]),
    ("a NOT IN (1, NULL)", [False, NA, NA, NA]),
    ("a IS NULL", [False, False, True, False]),
    ("b IS NOT NULL", [True, True, True, False]),
    ("a <=> b", [False, True, False, False]),
    ("s LIKE 'ab%'", [True, False, NA, False]),
    ("s LIKE 'a\\\\_%'", [False, False, NA, True]),
    ("s NOT LIKE '_yz'", [True, False, NA, True]),
    ("s ILIKE 'x%'", [False, True, NA, False]),
    ("CASE WHEN a > 1 THEN 'big' WHEN a = 1 THEN 'one' END", ["one", "big", NA, "big"]),
    ("CASE a WHEN 1 THEN 10 ELSE 20 END", [10, 20, 20, 20]),
    ("if(a > 1, a, 0)", [0, 2, 0, 4]),
    ("CAST(a AS STRING)", ["1", "2", NA, "4"]),
    ("CAST(x AS INT)", [1, -2, NA, 0]),
    ("CAST('12' AS INT) + a", [13, 14, NA, 16]),
    ("CAST('zz' AS INT)", [NA, NA, NA, NA]),
    ("CAST(x AS DECIMAL(10,1))", [1.5, -2.5, NA, 0.1]),
    ("abs(x)", [1.5, 2.5, NA, 0.125]),
    ("round(x)", [2.0, -3.0, NA, 0.0]),        # half away from zero, like Spark
    ("round(x, 2)", [1.5, -2.5, NA, 0.13]),
    ("year(d)", [2020, 2021, NA, 2019]),
    ("month(d)", [1, 3, NA, 12]),
    ("substring(s, 2, 1)", ["b", "y", NA, "_"]),
    ("substr(s, -2)", ["bc", "yz", NA, "_%"]),
    ("coalesce(a, b, 99)", [1, 2, 3, 4]),
    ("lower(s)", ["abc", "xyz", NA, "a_%"]),
    ("upper(s)", ["ABC", "XYZ", NA, "A_%"]),
    ("d >= DATE '2020-01-01'", [True, True, NA, False]),
    ("d < '2020-01-01'", [False, False, NA, True]),
    ("TRUE AND a > 0", [True, True, NA, True]),
    ("a = NULL", [NA, NA, NA, NA]),
])
def test_expressions(df, sql, want):
    got = ev(sql, df)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if w is NA:
            assert g is NA or g is None or (isinstance(g, float) and np.isnan(g)), (sql, got)
        elif isinstance(w, float):
            assert g == pytest.approx(w), (sql, got)
        else:
            assert g == w, (sql, got)


def test_where_keeps_only_true(df):
    assert mask(E("a > 1 OR b > 1"), df).tolist() == [False, True, True, True]
    assert mask(E("NOT (a > 1 AND b > 1)"), df).tolist() == [True, False, False, False]
    assert mask(E("a > 1"), df.iloc[:0]).tolist() == []


@pytest.mark.parametrize("sql", ["rand()", "a || 'x'", "EXISTS (SELECT 1)", "a IN (SELECT 1)", "sha1(s)"])
def test_unsupported_is_clear(df, sql):
    with pytest.raises(Unsupported):
        evaluate(E(sql), df)


def test_unknown_column(df):
    with pytest.raises(Unsupported, match="unknown attribute"):
        evaluate(E("zz + 1"), df)


def test_like_and_substring_helpers():
    assert like_to_regex("a%b_c") == "a.*b.c"
    assert like_to_regex("50\\%") == "50%"
    assert spark_substring("hello", 0, 2) == "he"
    assert spark_substring("hello", -3, 2) == "ll"
    assert spark_substring("hello", 2, None) == "ello"


def test_assign_half_open_ranges_and_nulls():
    p = part("t", "v", (601, 1001, 1501))
    vals = pd.Series(pd.array([1, 600, 601, 1000, 1001, 1500, 1501, 10**6, None], dtype="Int64"))
    assert assign(vals, p).tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4]
    assert assign(pd.Series([0.5, np.nan, 601.0]), p).tolist() == [0, 4, 1]
    # a NaN *value* of a nullable float column (how Arrow's doubles arrive) is NULL's, as in Bucketizer
    nan_value = pd.arrays.FloatingArray(np.array([0.5, np.nan, 601.0]), np.zeros(3, dtype=bool))
    assert assign(pd.Series(nan_value), p).tolist() == [0, 4, 1]
    assert assign(pd.Series([], dtype="Int64"), p).tolist() == []
    assert assign(pd.Series([5, 7]), part("t", "v", ())).tolist() == [0, 0]
    # nullable ints take a numpy fast path: the same ids, NULL still to null_id (= 1 with no bounds)
    assert assign(pd.Series(pd.array([5, None], dtype="Int64")), part("t", "v", ())).tolist() == [0, 1]


def test_assign_strings_and_dates():
    ps = part("t", "s", ("b", "d"), dtype="string")
    assert assign(pd.Series(["a", "b", "c", "d", "zz", None]), ps).tolist() == [0, 1, 1, 2, 2, 3]
    pdt = part("t", "d", ("2020-01-01", "2021-01-01"), dtype="date")
    dates = coerce_to(pd.Series([dt.date(2019, 5, 1), dt.date(2020, 1, 1), None, dt.date(2022, 1, 1)]), "date")
    assert assign(dates, pdt).tolist() == [0, 1, 3, 2]
    pdec = part("t", "p", ("10.5",), dtype="decimal(10,2)")
    assert assign(pd.Series([10.49, 10.5, None]), pdec).tolist() == [0, 1, 2]


@given(st.lists(st.one_of(st.none(), st.integers(-40_000, 40_000)), max_size=40),
       st.lists(st.integers(-40_000, 40_000), max_size=6, unique=True))
def test_assign_vectorised_dates_and_floats_match_the_value_by_value_path(days, bounds):
    """datetime64 and numeric columns are assigned without per-value objects; the ids must be those
    of the object path (each value converted on its own, as the engine did before)."""
    bounds = sorted(bounds)
    base = dt.date(2000, 1, 1)
    pdt = part("t", "d", tuple(str(base + dt.timedelta(days=b)) for b in bounds), dtype="date")
    dates = pd.Series(pd.to_datetime([None if d is None else base + dt.timedelta(days=d) for d in days]),
                      dtype="datetime64[ns]")
    assert assign(dates, pdt).tolist() == assign(dates.astype(object), pdt).tolist()
    pf = part("t", "x", tuple(b / 8 for b in bounds), dtype="double")
    floats = pd.Series(pd.array([None if d is None else d / 16 for d in days], dtype="Float64"))
    assert assign(floats, pf).tolist() == assign(floats.astype(object), pf).tolist()
    ints = pd.Series(pd.array(days, dtype="Int64"))
    assert assign(ints, pf).tolist() == assign(ints.astype(object), pf).tolist()


@given(st.integers(-3, 3), st.integers(1, 3_000), st.lists(st.integers(-3_500, 3_500), max_size=8, unique=True),
       st.booleans(), st.integers(0, 2 ** 32))
def test_assign_looks_up_narrow_integer_and_date_ranges_exactly(shift, span, bounds, with_nulls, seed):
    """Integers and whole-day dates of a range narrower than the column go through a lookup table
    (``fragments._search``, only from 4,096 values on); the ids must be ``np.searchsorted``'s,
    NULLs included, at and around every boundary and for values offset from zero."""
    from advisor.partition.assign_pandas import _search

    rng = np.random.default_rng(seed)
    n = 5_000
    raw = rng.integers(-span, span + 1, n) + shift * 10 ** 6
    bounds = sorted(b + shift * 10 ** 6 for b in bounds)
    pi = part("t", "v", tuple(bounds))
    arr = np.array(bounds, dtype=np.int64)
    np.testing.assert_array_equal(_search(arr, raw), np.searchsorted(arr, raw, side="right"))
    ints = pd.Series(pd.array([None if with_nulls and i % 97 == 0 else int(x) for i, x in enumerate(raw)], dtype="Int64"))
    want = [pi.null_id if x is pd.NA else int(np.searchsorted(arr, x, side="right")) for x in ints]
    assert assign(ints, pi).tolist() == want
    base = dt.date(1995, 1, 1)
    days = raw - shift * 10 ** 6
    pdt = part("t", "d", tuple(str(base + dt.timedelta(days=int(b - shift * 10 ** 6))) for b in bounds), dtype="date")
    dates = pd.Series(pd.to_datetime([None if with_nulls and i % 89 == 0 else base + dt.timedelta(days=int(d))
                                      for i, d in enumerate(days)]), dtype="datetime64[ns]")
    assert assign(dates, pdt).tolist() == assign(dates.astype(object), pdt).tolist()
    stamps = dates + pd.Timedelta(hours=1)  # not whole days: the plain search
    assert assign(stamps, pdt).tolist() == assign(stamps.astype(object), pdt).tolist()


def test_coerce_types():
    assert str(coerce_to(pd.Series([1.0, None]), "int").dtype) == "Int64"
    assert coerce_to(pd.Series([1.0, None]), "int").tolist() == [1, NA]
    assert str(coerce_to(pd.Series(["x", None]), "string").dtype).startswith("string")
    assert str(coerce_to(pd.Series([1, 2]), "double").dtype) == "Float64"
