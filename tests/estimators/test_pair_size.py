"""Two-attribute sizing (``estimators.pair_size``) on hand-computed cases, without Spark."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from estimators.pair_size import joint_counts, pair_estimate, pair_read_fraction
from estimators.sketch_size import SizeEstimate


def _est(prob, reps, point=()):
    return SizeEstimate(fragments_point=len(point), fragments_expected=float(np.sum(prob)), rows_expected=0.0,
                        selectivity_expected=0.0, ci_lo=0.0, ci_hi=0.0, method="replicates",
                        point_fragments=tuple(point), fragment_probability=pd.Series(prob, dtype=float),
                        replicate_probability=np.asarray(reps, dtype=float))


def test_joint_counts_scale_each_row_to_the_partition_and_fill_unsampled_rows_by_b():
    # a-fragment 0: two sampled rows in b-cells 0 and 1, weights 1 and 3; a-fragment 1: no sampled row
    J = joint_counts(np.array([0, 0]), np.array([0, 1]), np.array([1.0, 3.0]),
                     sizes_a=np.array([40.0, 10.0]), sizes_b=np.array([20.0, 30.0]))
    assert J.tolist() == [[10.0, 30.0], [4.0, 6.0]]


def test_pair_size_is_taken_per_replicate_not_from_the_marginals():
    J = np.array([[10.0, 20.0], [30.0, 40.0]])
    # replicate 1: a keeps fragment 0 only, b fragment 1 only -> cell (0, 1) = 20 rows;
    # replicate 2: both keep everything -> 100 rows
    a = _est([1.0, 0.5], [[1, 0], [1, 1]], point=[0])
    b = _est([0.5, 1.0], [[0, 1], [1, 1]], point=[1])
    se = pair_estimate(a, b, J, confidence=0.5)
    assert se.rows_expected == pytest.approx(60.0)
    assert se.selectivity_expected == pytest.approx(0.6)
    assert se.rows_point == pytest.approx(20.0)  # point sets {0} x {1}
    assert 20.0 <= se.ci_lo <= 60.0 <= se.ci_hi <= 100.0
    # the product of the marginal expectations would say 10*.5 + 20*1 + 30*.25 + 40*.5 = 52.5
    assert abs(se.rows_expected - 52.5) > 5
    assert se.touch == "pair" and se.n_fragments == 4


def test_pair_without_replicates_uses_the_marginals():
    J = np.array([[10.0, 20.0], [30.0, 40.0]])
    a = _est([1.0, 0.5], [[1, 0]])
    b = _est([0.5, 1.0], [[0, 1], [1, 1]])  # replicate counts differ: no per-replicate pairing
    se = pair_estimate(a, b, J)
    assert se.method == "independent" and se.rows_expected == pytest.approx(52.5)


def test_pair_read_fraction_keeps_a_unit_only_if_both_filters_keep_it():
    rows = np.array([100, 100, 200])
    assert pair_read_fraction(rows, np.array([1.0, 1.0, 0.0]), np.array([1.0, 0.0, 1.0])) == pytest.approx(0.25)
    assert pair_read_fraction(rows, np.array([1.0, 0.5, 1.0]), np.array([1.0, 1.0, 0.5])) == pytest.approx(0.625)
    # two uncertain filters on one unit: kept with at most the smaller probability, not the product
    assert pair_read_fraction(rows, np.array([0.5, 0.5, 0.0]), np.array([0.5, 0.5, 1.0])) == pytest.approx(0.25)
