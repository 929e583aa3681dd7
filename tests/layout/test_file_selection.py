"""``file_selection.touched_files`` against brute force: a file is touched exactly when an integer
in its [min, max] falls in a sketched fragment, or it holds NULLs and the NULL fragment is sketched."""

from __future__ import annotations

import bisect

from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.layout.file_selection import touched_files
from advisor.partition.range_partition import RangePartition


@st.composite
def cases(draw):
    bounds = sorted(set(draw(st.lists(st.integers(-50, 50), min_size=1, max_size=8))))
    nfr = len(bounds) + 1
    part = RangePartition(0, "t", "a", "bigint", tuple(bounds), tuple([1] * nfr + [1]))
    files = []
    for k in range(draw(st.integers(0, 6))):
        lo = draw(st.integers(-60, 60))
        hi = lo + draw(st.integers(0, 30))
        empty = draw(st.booleans()) and k == 0  # a file of NULLs only
        files.append({"path": f"f{k}", "min": None if empty else lo, "max": None if empty else hi,
                      "nulls": 1 if empty else draw(st.integers(0, 1))})
    frags = frozenset(draw(st.lists(st.integers(0, nfr), max_size=nfr + 1)))  # nfr is the NULL fragment
    return part, files, frags


@settings(max_examples=300, deadline=None)
@given(cases())
def test_touched_files_equal_brute_force(case):
    part, files, frags = case
    want = []
    for m in files:
        hit = part.null_id in frags and m["nulls"] > 0
        if m["min"] is not None:
            hit = hit or any(bisect.bisect_right(part.boundaries, v) in frags for v in range(m["min"], m["max"] + 1))
        if hit:
            want.append(m["path"])
    assert touched_files(files, part, frags) == want


def test_an_open_ended_run_reaches_the_last_files():
    part = RangePartition(0, "t", "a", "bigint", (10, 20), (1, 1, 1, 0))
    files = [{"path": "a", "min": 0, "max": 5, "nulls": 0}, {"path": "b", "min": 20, "max": 99, "nulls": 0}]
    assert touched_files(files, part, frozenset({2})) == ["b"]
    assert touched_files(files, part, frozenset({0, 2})) == ["a", "b"]
    assert touched_files(files, part, frozenset()) == []


def test_ends_touch_exactly():
    """A run [10, 20) reaches a file whose max is 10 and not one whose min is 20."""
    part = RangePartition(0, "t", "a", "bigint", (10, 20), (1, 1, 1, 0))
    files = [{"path": "a", "min": 0, "max": 10, "nulls": 0}, {"path": "b", "min": 20, "max": 30, "nulls": 0}]
    assert touched_files(files, part, frozenset({1})) == ["a"]
