"""The vectorised conversions of `advisor.maintain.frames` agree with the value-by-value rules.

`column_values` converts numeric columns in one step and `_infer_dtype` decides from the set of
types; both must give exactly what normalising every value with `py_scalar` / `is_null` gives,
including NULL flavours, NaN, numpy scalars and Decimals. Also: fragment assignment decodes a
partition's boundaries once and reuses them, with the same result.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.partition import assign_pandas as fragments
from advisor.maintain.frames import _infer_dtype, column_values, from_values, is_null, py_scalar
from advisor.partition.range_partition import RangePartition


def infer_by_value(vals: list):
    """The specification: classify every non-NULL value, then map the set of kinds to a dtype."""
    kinds = set()
    for v in vals:
        if is_null(v):
            continue
        if isinstance(v, (bool, np.bool_)):
            kinds.add("bool")
        elif isinstance(v, (int, np.integer)):
            kinds.add("int")
        elif isinstance(v, (float, np.floating, decimal.Decimal)):
            kinds.add("float")
        elif isinstance(v, str):
            kinds.add("str")
        elif isinstance(v, (dt.date, dt.datetime, pd.Timestamp, np.datetime64)):
            kinds.add("date")
        else:
            return None
    table = {frozenset(): "Int64", frozenset({"int"}): "Int64", frozenset({"float"}): "Float64",
             frozenset({"int", "float"}): "Float64", frozenset({"bool"}): "boolean",
             frozenset({"str"}): "string", frozenset({"date"}): "datetime64[ns]"}
    return table.get(frozenset(kinds))


scalars = st.one_of(
    st.none(), st.just(pd.NA), st.just(pd.NaT), st.just(float("nan")), st.just(np.float32("nan")),
    st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-100, 100).map(np.int64), st.floats(-1e6, 1e6).map(np.float64),
    st.decimals(-1000, 1000, places=2, allow_nan=False), st.text(max_size=3),
    st.dates().map(lambda d: d), st.builds(object),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(scalars, max_size=8))
def test_infer_dtype_matches_the_value_by_value_rule(vals):
    assert _infer_dtype(vals) == infer_by_value(vals)


def test_infer_dtype_cases():
    assert _infer_dtype([1, None, float("nan")]) == "Int64"          # NaN is NULL
    assert _infer_dtype([1, 2.5]) == "Float64"
    assert _infer_dtype([np.float32("nan")]) == "Float64"             # not a Python float: counts
    assert _infer_dtype([True, 1]) is None                            # bool and int do not mix
    assert _infer_dtype([]) == "Int64"


def _same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        (x is None and y is None) or (type(x) is type(y) and (x == y or (x != x and y != y))) for x, y in zip(a, b))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-2**62, 2**62)), max_size=20),
       st.lists(st.one_of(st.none(), st.floats(allow_infinity=False)), max_size=20),
       st.lists(st.one_of(st.none(), st.booleans()), max_size=20))
def test_column_values_matches_py_scalar(ints, floats, bools):
    cases = [
        pd.Series(pd.array(ints, dtype="Int64")),
        pd.Series(pd.array([x for x in ints if x is not None], dtype="Int64")).astype("int64"),
        pd.Series(pd.array([None if x is None or math.isnan(x) else x for x in floats], dtype="Float64")),
        pd.Series([np.nan if x is None else x for x in floats], dtype="float64"),
        pd.Series(pd.array(bools, dtype="boolean")),
        pd.Series([x for x in bools if x is not None], dtype=bool),
    ]
    for s in cases:
        assert _same(column_values(s), [py_scalar(v) for v in s.tolist()]), s.dtype


def test_column_values_nan_in_a_nullable_float_is_null():
    # 0/0 inside a Float64 array is NaN but not masked; it is NULL for the engine all the same
    s = pd.Series(pd.array([0.0, 1.0], dtype="Float64")) / pd.Series(pd.array([0.0, 2.0], dtype="Float64"))
    assert column_values(s) == [None, 0.5]
    assert column_values(pd.Series(pd.array([3, None], dtype="Int64"))) == [3, None]
    assert type(column_values(pd.Series([1, 2], dtype="int32"))[0]) is int


def test_from_values_plain_numbers_keep_their_dtype():
    assert str(from_values([1, 2, 3]).dtype) == "Int64"
    s = from_values([1, 2.5, None])
    assert str(s.dtype) == "Float64" and s.isna().tolist() == [False, False, True]
    assert from_values([1, float("nan")]).isna().tolist() == [False, True]


def test_fragment_assignment_with_cached_boundaries():
    part = RangePartition(7, "t", "a", "bigint", (10, 20, 30))
    vals = pd.Series(pd.array([5, 10, 25, None, 31], dtype="Int64"))
    first = fragments.assign(vals, part).tolist()
    second = fragments.assign(vals, part).tolist()
    assert first == second == [0, 1, 2, part.null_id, 3]
    # the same boundaries compared as floats (a float column): decoded separately, same ranges
    assert fragments.assign(pd.Series([9.5, 30.0]), part).tolist() == [0, 3]
    # a different partition with the same id must not reuse the cached boundaries
    other = RangePartition(7, "t", "a", "bigint", (100,))
    assert fragments.assign(vals, other).tolist() == [0, 0, 0, other.null_id, 0]


def test_topk_tuple_key_orders_like_the_comparison_function():
    """The engine's tuple key gives the reference order (NULLS FIRST ascending, NULLS LAST
    descending, then the other attributes, then the annotation) on numbers, strings and NULLs."""
    import random

    from advisor.maintain.frames import topk_sort_key, topk_tuple_key

    rnd = random.Random(4)
    names = ["a", "b", "c"]
    for order in ([("a", False)], [("a", True)], [("b", False), ("a", True)], [("c", False)]):
        entries = [((rnd.choice([None, 1, 2, 2.5, -3]), rnd.choice([None, "x", "y", "z"]),
                     rnd.choice([None, 7, 8])), (frozenset(rnd.sample(range(5), 2)),)) for _ in range(300)]
        entries = list(dict.fromkeys(entries))
        spec = sorted(entries, key=topk_sort_key(names, order))
        assert sorted(entries, key=topk_tuple_key(names, order)) == spec
    # incomparable values raise, so that callers fall back to the comparison function
    mixed = [((1, "x", 7), (frozenset(),)), (("s", "x", 7), (frozenset(),))]
    with pytest.raises(TypeError):
        sorted(mixed, key=topk_tuple_key(names, [("a", True)]))


# ---------- the small-side hash join against pandas' merge ----------
def _side(rows, names, sid):
    from advisor.maintain.frames import frame_from_rows, singleton

    return frame_from_rows(names, [r[:-2] for r in rows], [r[-2] for r in rows], [sid],
                           [(singleton(r[-1]),) for r in rows])


_KEY = st.one_of(st.none(), st.integers(0, 4), st.sampled_from([1.0, 2.5]))


@settings(max_examples=150, deadline=None)
@given(left=st.lists(st.tuples(_KEY, st.integers(0, 9), st.sampled_from([-1, 1, 2]), st.integers(0, 3)), max_size=12),
       right=st.lists(st.tuples(_KEY, st.integers(0, 9), st.sampled_from([-1, 1]), st.integers(0, 3)), max_size=12),
       residual=st.booleans())
def test_small_join_matches_the_merge_join(left, right, residual):
    """Same rows, multiplicities and annotations, in any order, with or without a residual
    condition besides the key equality; NULL keys never match and 1 equals 1.0."""
    import sqlglot

    from advisor.maintain import relops
    from advisor.maintain.frames import M, fcol, row_values

    a = _side(left, ["k", "x"], 0)
    b = _side(right, ["k2", "y"], 1)
    cond = sqlglot.parse_one("k = k2 AND x < y" if residual else "k = k2")

    def rows(df):
        vals = row_values(df, ["k", "x", "k2", "y"])
        return sorted(zip(vals, df[M].tolist(), df[fcol(0)].map(sorted).tolist(), df[fcol(1)].map(sorted).tolist()),
                      key=repr)

    small = relops.join(a, b, cond, ["k", "x"], ["k2", "y"], [0], [1])
    saved, relops.SMALL_JOIN = relops.SMALL_JOIN, -1
    try:
        merged = relops.join(a, b, cond, ["k", "x"], ["k2", "y"], [0], [1])
    finally:
        relops.SMALL_JOIN = saved
    assert list(small.columns) == list(merged.columns)
    assert rows(small) == rows(merged)


# ---------- numpy masks for numeric comparisons against the expression evaluator ----------
_NUMS = st.one_of(st.none(), st.integers(-5, 5), st.floats(-5, 5), st.just(float("nan")))


@settings(max_examples=200, deadline=None)
@given(ints=st.lists(st.one_of(st.none(), st.integers(-5, 5)), min_size=1, max_size=15),
       floats=st.lists(_NUMS, min_size=1, max_size=15),
       atoms=st.lists(st.tuples(st.sampled_from(["i", "f", "g"]), st.sampled_from([">", ">=", "<", "<=", "=", "<>"]),
                                st.sampled_from(["0", "2", "-3", "2.5", "-0.5"]), st.booleans()), min_size=1, max_size=3),
       ors=st.lists(st.booleans(), min_size=2, max_size=2))
def test_fast_numeric_mask_matches_the_evaluator(ints, floats, atoms, ors):
    """Nullable Int64 / Float64 (with NaN that is not NULL) and a plain float64 column whose NaN
    is NULL; literals on either side; ANDs and ORs of them."""
    import sqlglot

    from advisor.maintain import exprs

    n = min(len(ints), len(floats))
    f = pd.array([None if v is None else float(v) for v in floats[:n]], dtype="Float64")
    f[np.isnan(np.array([np.nan if v is None else v for v in floats[:n]], dtype=float)) & ~f.isna()] = np.nan
    df = pd.DataFrame({"i": pd.array(ints[:n], dtype="Int64"), "f": f,
                       "g": np.array([np.nan if v is None else float(v) for v in floats[:n]])})
    terms = [f"{c} {op} {lit}" if left else f"{lit} {op} {c}" for c, op, lit, left in atoms]
    sql = terms[0]
    for t, use_or in zip(terms[1:], ors):
        sql = f"({sql}) {'OR' if use_or else 'AND'} {t}"
    e = sqlglot.parse_one(sql)
    fast = exprs._fast_mask(e, df)
    assert fast is not None
    slow = exprs._as_bool(exprs.evaluate(e, df)).fillna(False).to_numpy(dtype=bool)
    assert fast.tolist() == slow.tolist(), sql


def _general_path(vals):
    """`from_values` with the numeric fast path switched off."""
    from advisor.maintain import frames

    fast = frames._fast_numbers
    frames._fast_numbers = lambda v: None
    try:
        return frames.from_values(vals)
    finally:
        frames._fast_numbers = fast


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-2 ** 63, 2 ** 63 - 1), st.floats(allow_infinity=True)),
                max_size=30))
def test_numeric_fast_path_builds_the_same_column_as_the_general_path(vals):
    a, b = from_values(vals), _general_path(vals)
    assert str(a.dtype) == str(b.dtype)
    assert a.isna().tolist() == b.isna().tolist()
    assert [x for x in a.tolist() if x is not pd.NA] == [x for x in b.tolist() if x is not pd.NA]
