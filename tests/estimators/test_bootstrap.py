"""Bootstrap module: exactness on fully sampled strata, scaling, determinism, variance sanity."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from estimators.bootstrap import (
    bootstrap_group, bootstrap_groups_pandas, group_seed, normalize_agg, replicate_counts, replicate_weights)
from estimators.clt import clt_estimate

EXACT = {"sum": np.sum, "count": len, "avg": np.mean, "min": np.min, "max": np.max}


@pytest.mark.parametrize("agg", ["sum", "count", "avg", "min", "max"])
def test_fully_sampled_group_is_exact_with_zero_stderr(agg):
    v = np.random.default_rng(3).gamma(2.0, 10.0, size=37)
    point, se, reps = bootstrap_group(v, 37, agg, B=50, rng=1)
    assert point == pytest.approx(EXACT[agg](v), rel=1e-12)
    assert se == 0.0
    assert reps.shape == (50,)
    assert np.all(reps == point)


@pytest.mark.parametrize("fpc", [True, False])
def test_fully_sampled_exact_without_fpc_too(fpc):
    v = np.arange(10.0)
    point, se, reps = bootstrap_group(v, 10, "sum", rng=0, fpc=fpc)
    assert (point, se) == (45.0, 0.0) and np.all(reps == 45.0)


def test_single_sampled_row_is_deterministic():
    point, se, reps = bootstrap_group(np.array([7.0]), 20, "sum", B=30, rng=0)
    assert point == 140.0 and se == 0.0 and np.all(reps == 140.0)


def test_sum_and_count_scale_by_population_over_sample():
    v = np.array([1.0, 2.0, 3.0, 4.0])
    assert bootstrap_group(v, 100, "sum", rng=0)[0] == pytest.approx(250.0)
    assert bootstrap_group(v, 100, "count", rng=0)[0] == pytest.approx(100.0)
    assert bootstrap_group(v, 100, "avg", rng=0)[0] == pytest.approx(2.5)
    # COUNT of rows passing a WHERE predicate: 0/1 values with 'sum'
    flags = np.array([1.0, 0.0, 1.0, 1.0])
    assert bootstrap_group(flags, 100, "sum", rng=0)[0] == pytest.approx(75.0)
    # NULLs are ignored by count(col) and sum
    w = np.array([1.0, np.nan, 3.0, np.nan])
    assert bootstrap_group(w, 100, "count", rng=0)[0] == pytest.approx(50.0)
    assert bootstrap_group(w, 100, "sum", rng=0)[0] == pytest.approx(100.0)


def test_mask_acts_as_where_predicate():
    v = np.array([10.0, 20.0, 30.0, 40.0])
    mask = np.array([True, False, True, False])
    assert bootstrap_group(v, 8, "avg", rng=0, mask=mask)[0] == pytest.approx(20.0)
    assert bootstrap_group(v, 8, "sum", rng=0, mask=mask)[0] == pytest.approx(80.0)
    assert bootstrap_group(v, 8, "count", rng=0, mask=mask)[0] == pytest.approx(4.0)


def test_min_max_replicates_stay_within_sample_range():
    v = np.random.default_rng(0).normal(size=15)
    _, _, rmax = bootstrap_group(v, 300, "max", B=200, rng=2)
    _, _, rmin = bootstrap_group(v, 300, "min", B=200, rng=2)
    assert rmax.max() <= v.max() and rmin.min() >= v.min()


def test_population_smaller_than_sample_is_rejected():
    with pytest.raises(ValueError):
        bootstrap_group(np.ones(5), 3, "sum")
    with pytest.raises(ValueError):
        normalize_agg("median")


def test_replicate_counts_sum_to_stratum_sizes():
    strata = np.array([2, 0, 0, 1, 2, 2, 0, 2])
    c = replicate_counts(strata, 40, np.random.default_rng(0))
    assert c.shape == (40, 8)
    for h in range(3):
        assert np.all(c[:, strata == h].sum(axis=1) == (strata == h).sum())


def test_replicate_weights_leave_exact_strata_alone():
    strata = np.array([0, 0, 1, 1, 1])
    w, c = replicate_weights(strata, np.array([2.0, 10.0]), 25, np.random.default_rng(0))
    assert np.all(w[:, :2] == 1.0) and np.all(c[:, :2] == 1)
    assert np.all(c[:, 2:].sum(axis=1) == 3)


def test_bootstrap_stderr_matches_clt_with_fpc():
    rng = np.random.default_rng(11)
    v = rng.gamma(2.0, 5.0, size=200)
    for fpc in (True, False):
        _, se, _ = bootstrap_group(v, 1000, "sum", B=4000, rng=5, fpc=fpc)
        ref = clt_estimate(v, 1000, "sum", fpc=fpc).stderr
        assert se == pytest.approx(ref, rel=0.08)


def test_group_seed_is_stable_across_numeric_representations():
    assert group_seed(7, (1, "a")) == group_seed(7, (np.int64(1), "a")) == group_seed(7, (1.0, "a"))
    assert group_seed(7, (1, "a")) != group_seed(8, (1, "a"))
    assert group_seed(7, ("1",)) != group_seed(7, (1,))


def test_groups_pandas_is_per_group_deterministic_and_order_free():
    rng = np.random.default_rng(4)
    pdf = pd.DataFrame({"g": np.repeat([1, 2, 3], [5, 1, 4]), "x": rng.normal(size=10)})
    pdf["_n_g"] = pdf["g"].map({1: 50, 2: 7, 3: 4})
    a = bootstrap_groups_pandas(pdf, ["g"], "x", "sum", B=20, seed=9)
    b = bootstrap_groups_pandas(pdf.sample(frac=1.0, random_state=1), ["g"], "x", "sum", B=20, seed=9)
    one = bootstrap_groups_pandas(pdf[pdf.g == 1], ["g"], "x", "sum", B=20, seed=9)
    assert list(a.columns) == ["g", "n", "N", "point", "stderr", "replicates"]
    assert a["n"].tolist() == [5, 1, 4] and a["N"].tolist() == [50, 7, 4]
    # seeds are per group key, so splitting the groups (as Spark does) changes nothing
    np.testing.assert_array_equal(a["replicates"][0], one["replicates"][0])
    # group 3 is fully sampled: exact
    assert a["stderr"][2] == 0.0
    assert a["point"][2] == pytest.approx(pdf.loc[pdf.g == 3, "x"].sum())
    # rows are put in canonical order first: a shuffled input gives identical replicates
    for i in range(3):
        np.testing.assert_array_equal(a["replicates"][i], b["replicates"][i])
    c = bootstrap_groups_pandas(pdf, ["g"], None, "count", B=20, seed=9)
    assert c["point"].tolist() == [50.0, 7.0, 4.0]


def test_replicate_blocks_cache_hit_equals_a_fresh_draw():
    """A cache hit returns the same weights and leaves the generator exactly where drawing again
    would, so a later draw (the CLT path's normal replicates) is unchanged too."""
    from estimators import bootstrap as bs

    bs._BLOCKS.clear()
    si = np.repeat(np.arange(40), np.random.default_rng(3).integers(1, 30, 40))
    N_h = np.bincount(si) * 7.0
    N_h[:3] = np.bincount(si)[:3]  # fully sampled strata: counts forced to 1 on both paths
    r1 = np.random.default_rng(9)
    first = bs.replicate_blocks(si, N_h, 50, 20, r1)
    after_first = r1.standard_normal(5)
    r2 = np.random.default_rng(9)
    again = bs.replicate_blocks(si, N_h, 50, 20, r2)
    assert len(bs._BLOCKS) == 1 and [d.shape[0] for _, d in again] == [20, 20, 10]
    for (w1, c1), (w2, c2) in zip(first, again):
        assert w1 is w2 and c2.dtype == bool and np.array_equal(c1, c2)
        assert not w2.flags.writeable
    np.testing.assert_array_equal(r2.standard_normal(5), after_first)
    r3 = np.random.default_rng(9)  # no cache: the very same stream
    fresh = [bs.replicate_weights(si, N_h, n, r3) for n in (20, 20, 10)]
    for (w1, d1), (w3, c3) in zip(first, fresh):
        np.testing.assert_array_equal(w1, w3.T)  # the cache keeps the (n, B) transpose
        np.testing.assert_array_equal(d1, c3 > 0)
    np.testing.assert_array_equal(r3.standard_normal(5), after_first)
    other = bs.replicate_blocks(si, N_h * 2, 50, 20, np.random.default_rng(9))  # another layout: a miss
    assert len(bs._BLOCKS) == 2 and not np.array_equal(other[0][0], first[0][0])


def test_group_sums_equal_the_gathered_reduction():
    """``group_sums`` (a sparse product over the transposed weights) against the direct
    ``GroupIndex.reduce`` of weights * values, groups in any row order."""
    from estimators.bootstrap import GroupIndex, group_sums

    rng = np.random.default_rng(4)
    n, B, G = 5000, 13, 97
    gi = rng.permutation(np.arange(n) % G)
    w = rng.gamma(2.0, 3.0, (B, n))
    v = np.where(rng.random(n) < 0.3, 0.0, rng.normal(5, 2, n))
    got = group_sums(v, gi, G, np.ascontiguousarray(w.T))
    want = GroupIndex(gi, G).reduce(np.add, w * v)
    assert got.shape == (B, G)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)
    assert np.abs(want).max() > 1.0
