"""Layout-aware read fractions (advisor.layout.skip_prediction): pure logic on hand-built read units."""

import datetime as dt
from decimal import Decimal

import pandas as pd
import pytest

from advisor.partition.range_partition import RangePartition
from advisor.layout.skip_prediction import (
    ReadUnit, expected_read_fraction, fragment_spans, read_fraction_of, sketch_read_fraction, skip_ceiling)

# Four files of 100 rows clustered on a value in [0, 400): file k holds [100k, 100k + 99].
CLUSTERED = [ReadUnit(100, 100 * k, 100 * k + 99) for k in range(4)]
# The same rows unclustered: every file spans the whole range.
SPREAD = [ReadUnit(100, 0, 399) for _ in range(4)]
BOUNDS = [50, 100, 200, 300]  # fragments: (-inf,50) [50,100) [100,200) [200,300) [300,inf)


def test_spans_follow_half_open_fragments():
    assert fragment_spans(CLUSTERED, BOUNDS) == [(0, 1), (2, 2), (3, 3), (4, 4)]
    assert fragment_spans([ReadUnit(5, 100, 100)], BOUNDS) == [(2, 2)]  # 100 starts fragment 2
    assert fragment_spans([ReadUnit(5, None, None, nulls=5)], BOUNDS) == [None]


def test_captured_sketch_reads_only_overlapping_files():
    # fragment 2 = [100, 200) lies in file 1 only
    assert read_fraction_of(CLUSTERED, BOUNDS, {2}, null_id=5) == pytest.approx(0.25)
    # fragments 1 and 4 touch files 0 and 3
    assert read_fraction_of(CLUSTERED, BOUNDS, {1, 4}, null_id=5) == pytest.approx(0.5)
    assert read_fraction_of(CLUSTERED, BOUNDS, set(), null_id=5) == 0.0
    # unclustered: any non-empty sketch reads everything
    assert read_fraction_of(SPREAD, BOUNDS, {2}, null_id=5) == pytest.approx(1.0)


def test_expected_fraction_combines_fragment_probabilities():
    # P(fragment 0) = 0.5, P(fragment 1) = 0.5 -> file 0 read with 1 - 0.25 = 0.75; file 1 with 0.2
    probs = [0.5, 0.5, 0.2, 0.0, 0.0]
    got = expected_read_fraction(CLUSTERED, BOUNDS, probs)
    assert got == pytest.approx((100 * 0.75 + 100 * 0.2) / 400)
    # a certain fragment before the span must not poison later spans (log(0) bookkeeping)
    assert expected_read_fraction(CLUSTERED, BOUNDS, [1.0, 0.0, 0.0, 0.0, 0.5]) == pytest.approx(150 / 400)


def test_nulls_and_always_read_units():
    units = CLUSTERED + [ReadUnit(50, None, None, nulls=50), ReadUnit(50, always=True)]
    # the all-NULL file is read only with the NULL fragment; the batch rows always
    assert read_fraction_of(units, BOUNDS, {2}, null_id=5) == pytest.approx(150 / 500)
    assert read_fraction_of(units, BOUNDS, {2, 5}, null_id=5) == pytest.approx(200 / 500)


def test_sketch_read_fraction_from_estimator_probabilities():
    part = RangePartition(1, "t", "a", "int", tuple(BOUNDS), (50, 50, 100, 100, 100, 0), 0, 5)
    prob = pd.Series([0.0, 0.0, 1.0, 0.0, 0.0, 0.0], index=range(6))
    assert sketch_read_fraction(CLUSTERED, part, prob) == pytest.approx(0.25)
    assert sketch_read_fraction(SPREAD, part, prob) == pytest.approx(1.0)


def test_typed_values_dates_and_decimals():
    days = [ReadUnit(10, dt.date(1995, 1, 1), dt.date(1995, 6, 30)), ReadUnit(10, dt.date(1995, 7, 1), dt.date(1995, 12, 31))]
    assert read_fraction_of(days, [dt.date(1995, 7, 1)], {1}, null_id=2) == pytest.approx(0.5)
    money = [ReadUnit(10, Decimal("1.00"), Decimal("9.99")), ReadUnit(30, Decimal("10.00"), Decimal("99.00"))]
    assert read_fraction_of(money, [Decimal("10.00")], {0}, null_id=2) == pytest.approx(0.25)


def test_skip_ceiling_separates_clustered_from_spread():
    assert skip_ceiling(CLUSTERED, 0, 399) == pytest.approx(99 / 399)
    assert skip_ceiling(SPREAD, 0, 399) == pytest.approx(1.0)
    assert skip_ceiling(CLUSTERED + [ReadUnit(400, always=True)], 0, 399) == pytest.approx((99 / 399 + 1) / 2)
    assert skip_ceiling(CLUSTERED, "a", "z") is None  # numbers against string bounds: no verdict


def test_skip_ceiling_for_strings_reads_units_spanning_the_domain():
    spread = [ReadUnit(100, "AIR", "TRUCK") for _ in range(3)]  # every row group holds every mode
    assert skip_ceiling(spread, "AIR", "TRUCK") == pytest.approx(1.0)
    clustered = [ReadUnit(100, "AIR", "FOB"), ReadUnit(100, "MAIL", "RAIL"), ReadUnit(100, "AIR", "TRUCK")]
    assert skip_ceiling(clustered, "AIR", "TRUCK") == pytest.approx(1 / 3)
    assert skip_ceiling(clustered + [ReadUnit(100, always=True)], "AIR", "TRUCK") == pytest.approx(0.5)


def test_bridged_gaps_are_read_for_certain():
    # P = 1 on fragment 0 only; bridging declares fragment 2 read (a gap the filter cannot skip)
    part = RangePartition(1, "t", "a", "int", tuple(BOUNDS), (50, 50, 100, 100, 100, 0), 0, 5)
    prob = pd.Series([1.0, 0.0, 0.0, 0.0, 0.0, 0.0], index=range(6))
    assert sketch_read_fraction(CLUSTERED, part, prob) == pytest.approx(0.25)
    assert sketch_read_fraction(CLUSTERED, part, prob, certain={2}) == pytest.approx(0.5)


def test_read_set_bridges_to_the_cap_and_keeps_nulls():
    from advisor.partition.fragment_runs import read_set

    part = RangePartition(1, "t", "a", "int", tuple(range(1, 10)), (10,) * 10 + (0,), 0, 10)
    frs = frozenset({0, 2, 4, 6, 10})  # four single-fragment runs and the NULL fragment
    assert read_set(frs, part, max_runs=4) == frs
    got = read_set(frs, part, max_runs=2)
    assert len(got) == 7 and got > frs and 10 in got  # two gaps of one fragment bridged; NULL kept


# ---- the numeric fast path against the per-unit loop (hypothesis) ----
from hypothesis import given, settings, strategies as st  # noqa: E402

from advisor.layout.skip_prediction import _keep_scalar, unit_keep_probability  # noqa: E402


def _prob_tables(p, null_prob):
    import numpy as np

    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    certain = np.concatenate([[0], np.cumsum(p >= 1.0)])
    logmiss = np.concatenate([[0.0], np.cumsum(np.where(p >= 1.0, 0.0, np.log1p(-np.minimum(p, 0.999999))))])
    return certain, logmiss


_unit = st.one_of(
    st.tuples(st.integers(1, 500), st.integers(-50, 50), st.integers(0, 30), st.integers(0, 5)).map(
        lambda t: ReadUnit(t[0], t[1], t[1] + t[2], t[3])),
    st.integers(1, 500).map(lambda r: ReadUnit(r, always=True)),
    st.integers(1, 500).map(lambda r: ReadUnit(r, None, None, nulls=r)),
    st.integers(1, 500).map(lambda r: ReadUnit(r, None, None)),
)


@settings(max_examples=300, deadline=None)
@given(units=st.lists(_unit, min_size=1, max_size=40),
       bounds=st.sets(st.integers(-60, 90), max_size=25).map(sorted),
       probs=st.data(), null_prob=st.sampled_from([0.0, 0.3, 1.0]), as_dates=st.booleans())
def test_fast_path_equals_the_per_unit_loop(units, bounds, probs, null_prob, as_dates):
    if as_dates:  # dates take the fast path through their ordinals
        day = lambda v: None if v is None else dt.date(2000, 1, 1) + dt.timedelta(days=v)  # noqa: E731
        units = [ReadUnit(u.rows, day(u.lo), day(u.hi), u.nulls, u.always) for u in units]
        bounds = [day(b) for b in bounds]
    p = probs.draw(st.lists(st.sampled_from([0.0, 0.1, 0.5, 0.999, 1.0]), min_size=len(bounds) + 1,
                            max_size=len(bounds) + 1))
    want = _keep_scalar(units, bounds, *_prob_tables(p, null_prob), null_prob)
    got = unit_keep_probability(tuple(units), tuple(bounds), p, null_prob)
    assert got.tolist() == pytest.approx(want.tolist(), abs=1e-12)
    # called again on the same tuples (the memoised arrays) the answer does not change
    assert unit_keep_probability(tuple(units), tuple(bounds), p, null_prob).tolist() == got.tolist()


def test_strings_take_the_per_unit_loop():
    units = (ReadUnit(10, "a", "c"), ReadUnit(10, "d", "f"), ReadUnit(10, always=True))
    # fragments (-inf, "b") ["b", "e") ["e", inf): a sketch of fragment 0 keeps ["a", "c"] only
    got = unit_keep_probability(units, ("b", "e"), [1.0, 0.0, 0.0])
    assert got.tolist() == [1.0, 0.0, 1.0]


def test_inserted_rows_unit_keeps_the_fast_path_exact():
    from advisor.layout.skip_prediction import _keep_scalar, _with_inserts

    files = tuple(ReadUnit(100, 100 * k, 100 * k + 99) for k in range(4)) + (ReadUnit(30, None, None, nulls=30),)
    for added in (0, 250):
        units = _with_inserts(files, added, "test").units
        p = [0.0, 0.0, 1.0, 0.0, 0.0]
        want = _keep_scalar(list(units), BOUNDS, *_prob_tables(p, 0.0), 0.0)
        assert unit_keep_probability(units, tuple(BOUNDS), p).tolist() == want.tolist()
        assert read_fraction_of(units, tuple(BOUNDS), {2}, null_id=5) == pytest.approx((100 + added) / (430 + added))
