"""Counting values per value gives the partition that sorting them gives (``driver_boundaries``)."""

import datetime as dt

import pyarrow as pa
from hypothesis import given, settings, strategies as st

from advisor.partition import range_partition as rp

VALUES = {
    "bigint": st.integers(-500, 500),
    "int": st.integers(-(2 ** 31), 2 ** 31 - 1),
    "date": st.dates(dt.date(1995, 1, 1), dt.date(1995, 12, 31)),
    "boolean": st.booleans(),
}
ARROW = {"bigint": pa.int64(), "int": pa.int32(), "date": pa.date32(), "boolean": pa.bool_()}


def _sorted_answer(col, dtype, n):
    span, rp.COUNT_SPAN = rp.COUNT_SPAN, 0  # every column takes the sort
    try:
        return rp.driver_boundaries(col, dtype, n)
    finally:
        rp.COUNT_SPAN = span


@settings(max_examples=150, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(sorted(VALUES)), n=st.integers(1, 40))
def test_counting_equals_sorting(data, dtype, n):
    vals = data.draw(st.lists(st.one_of(st.none(), VALUES[dtype]), max_size=300))
    col = pa.array(vals, type=ARROW[dtype])
    got = rp.driver_boundaries(col, dtype, n)
    assert got == _sorted_answer(col, dtype, n)
    bounds, sizes = got
    assert sum(sizes) == len(vals) and sizes[-1] == vals.count(None)


def test_narrow_columns_are_counted_and_wide_ones_sorted():
    narrow = pa.array(list(range(1000)) * 3, type=pa.int64())
    wide = pa.array([i * 1_000_003 for i in range(1000)], type=pa.int64())
    assert rp._counted_boundaries(narrow, "int", "bigint", 10, [300 * k for k in range(1, 10)], 0) is not None
    assert rp._counted_boundaries(wide, "int", "bigint", 10, [100 * k for k in range(1, 10)], 0) is None


def test_quantiles_of_a_skewed_column_by_hand():
    # 1 x6, 2, 3, 5, 9 x2 (5 distinct values, more than 3 + 1): 3 fragments cut at sorted
    # positions 3 and 7 -> values 1 and 3; below 1: none, [1, 3): seven, from 3: four, one NULL
    col = pa.array([1, 9, 1, 5, 1, 2, 1, 3, 1, 9, 1, None], type=pa.int64())
    bounds, sizes = rp.driver_boundaries(col, "bigint", 3)
    assert [rp.decode_value(b, "bigint") for b in bounds] == [1, 3]
    assert sizes == [0, 7, 4, 1]
