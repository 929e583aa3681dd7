"""Prior means cut at the jumps of the group means (``group_smoothers.split_bins``) and prior variances
that grow as groups get smaller (``shrinkage.size_prior_variance``).  Pure numpy/pandas."""

import numpy as np
import pandas as pd
import pytest

import estimators.covariate_prior as cp
import estimators.shrinkage as sh
from advisor.estimation.size_estimates import U
from estimators.aggregates import estimate_groups
from estimators.having import Cmp, pass_probability
from estimators.covariate_prior import covariate_prior
from estimators.group_smoothers import split_bins
from estimators.shrinkage import size_prior_variance


def test_split_bins_cut_at_the_jumps_of_a_step_function():
    rng = np.random.default_rng(1)
    x = rng.permutation(np.arange(900.0))
    level = np.where(x < 130, 5.0, np.where(x < 610, 1.0, 9.0))   # jumps at 130 and 610
    m = level + rng.normal(0, 1.0, x.size)
    b = split_bins(x, m, 30, 64, 1e-3)
    # every bin holds one level only, and the levels are not split further than the noise allows
    for k in np.unique(b):
        assert len(np.unique(level[b == k])) == 1
    assert len(np.unique(b)) <= 5
    assert len(np.unique(b[level == 1.0])) <= 2
    # bins are contiguous runs of x
    order = np.argsort(x)
    assert np.all(np.diff(b[order]) >= 0)


def test_split_bins_leave_pure_noise_in_one_bin():
    rng = np.random.default_rng(2)
    for seed in range(5):
        x = rng.uniform(0, 1, 2000)
        m = rng.normal(0, 3, 2000)
        assert split_bins(x, m, 30, 64, 1e-3).max() == 0


def test_split_bins_never_cut_between_equal_values():
    x = np.repeat(np.arange(4.0), 50)                    # four tied blocks of 50
    m = np.where(np.arange(200) % 50 < 25, 0.0, 10.0)    # a jump inside every block
    b = split_bins(x, m, 10, 64, 1e-3)
    for v in range(4):
        assert len(np.unique(b[x == v])) == 1


def test_a_jump_between_quantile_edges_is_followed_by_the_split_prior(monkeypatch):
    """Group means jump at x = 5 of 0..19 (a quarter of the way between two quantile edges): the
    split prior gives both sides their own mean, the quantile bins cannot."""
    rng = np.random.default_rng(3)
    G = 1200
    x = (np.arange(G) % 20).astype(float)
    theta = np.where(x < 5, 20.0, 10.0)
    m = theta + rng.normal(0, 2.0, G)
    stats = {"hour": (x, 1.0, 0.0)}
    monkeypatch.setattr(cp, "COV_MAX_BINS", 3)    # coarse quantile bins: edges at x = 6.67, 13.33
    monkeypatch.setattr(cp, "COV_LOCAL_K", ())
    monkeypatch.setattr(cp, "COV_SPLITS", 0)
    name, mu_q, kind = covariate_prior(m, np.ones(G, bool), stats)
    monkeypatch.setattr(cp, "COV_SPLITS", 64)
    name2, mu_s, kind2 = covariate_prior(m, np.ones(G, bool), stats)
    assert (name, kind, name2, kind2) == ("hour", "bins", "hour", "bins")
    err_q, err_s = np.abs(mu_q - theta), np.abs(mu_s - theta)
    assert err_q[x < 5].mean() > 1.0          # the first quantile bin mixes 20s with 10s
    assert err_s.max() < 0.5


def test_size_prior_variance_finds_a_spread_that_shrinks_with_group_size():
    rng = np.random.default_rng(4)
    G = 4000
    N = rng.choice([5, 20, 100, 1000], G).astype(float)
    a, b = 1.0, 40.0                                  # true spread a + b / N
    theta = rng.normal(0, np.sqrt(a + b / N))
    v = np.full(G, 2.0)                               # noise variance of each estimate
    r = theta + rng.normal(0, np.sqrt(v))
    ok = np.ones(G, bool)
    flat = float(np.var(r) - v.mean())
    got = size_prior_variance(r, v, N, ok, 0.01, flat)
    assert isinstance(got, np.ndarray)
    for n_ in (5, 20, 100, 1000):
        want = a + b / n_
        assert abs(float(got[N == n_][0]) - want) < 0.35 * want + 0.3
    # no size effect: the flat variance comes back
    theta2 = rng.normal(0, 2.0, G)
    r2 = theta2 + rng.normal(0, np.sqrt(v))
    flat2 = float(np.var(r2) - v.mean())
    got2 = size_prior_variance(r2, v, N, ok, 0.01, flat2)
    assert np.allclose(got2, flat2, rtol=0.3)


def _route_rows(seed: int):
    """Routes of 6 to 3,000 rows whose true mean delay spreads as 60 / sqrt(N): small routes are the
    extreme ones.  5 % of each route is sampled (at least one row), rows are the mean plus noise
    of sd 20."""
    rng = np.random.default_rng(seed)
    G = 600
    N = np.round(np.exp(rng.uniform(np.log(6), np.log(3000), G))).astype(int)
    theta = 10.0 + rng.normal(0, 60.0 / np.sqrt(N))
    n = np.maximum(1, np.ceil(0.05 * N)).astype(int)
    g = np.repeat(np.arange(G), n)
    rows = pd.DataFrame({"g": g, "x": theta[g] + rng.normal(0, 20.0, g.size), "_n_g": N[g], U: True})
    return rows, theta


@pytest.mark.parametrize("seed", [11, 12])
def test_a_prior_variance_by_size_keeps_the_small_extreme_groups(monkeypatch, seed):
    rows, theta = _route_rows(seed)
    c = float(np.quantile(theta, 0.9))
    pred = Cmp("avg(x)", ">", c)
    truth = float(np.sum(theta > c))

    def passing(by_size: bool) -> float:
        monkeypatch.setattr(sh, "PRIOR_BY_SIZE", by_size)
        est = estimate_groups(rows, ["g", U], [("avg", "x")], seed=1)
        sh.shrink_groups(est, rows, ["g", U])
        return float(pass_probability(est, pred).sum())

    flat, by_size = passing(False), passing(True)
    # one spread for all pulls the small extreme routes back under the threshold
    assert abs(by_size - truth) < abs(flat - truth)
    assert by_size > 0.6 * truth


def test_a_second_covariate_explains_what_the_first_leaves(monkeypatch):
    """Means that add a month effect and a small-group effect: the prior follows both, and is closer
    to the true means than either covariate alone."""
    rng = np.random.default_rng(21)
    G = 2400
    month = (np.arange(G) % 12).astype(float)
    N = np.round(np.exp(rng.uniform(np.log(5), np.log(3000), G)))
    theta = 3.0 * np.sin(month) + np.where(N < 60, 6.0, 0.0)
    m = theta + rng.normal(0, 2.0, G)
    stats = {"month": (month, 1.0, 0.0), sh.SIZE: (np.log(N), 1.0, np.inf)}
    ok = np.ones(G, bool)
    monkeypatch.setattr(cp, "COV_LOCAL_K", ())   # bins only: a local prior in month order would order
    monkeypatch.setattr(cp, "COV_SECOND", False)  # ties by size and follow both on its own
    name1, mu1, _ = covariate_prior(m, ok, stats)
    monkeypatch.setattr(cp, "COV_SECOND", True)
    name2, mu2, kind = covariate_prior(m, ok, stats)
    assert name1 in ("month", sh.SIZE)
    assert set(name2.split(" + ")) == {"month", sh.SIZE} and kind == "bins"
    assert np.sqrt(np.mean((mu2 - theta) ** 2)) < 0.5 * np.sqrt(np.mean((mu1 - theta) ** 2))


def test_no_second_covariate_without_a_significant_effect(monkeypatch):
    rng = np.random.default_rng(22)
    G = 2400
    month = (np.arange(G) % 12).astype(float)
    other = rng.permutation(np.arange(G) % 40).astype(float)   # group-level, unrelated
    m = 3.0 * np.sin(month) + rng.normal(0, 2.0, G)
    name, _, _ = covariate_prior(m, np.ones(G, bool), {"month": (month, 1.0, 0.0), "other": (other, 1.0, 0.0)})
    assert name == "month"


def test_variance_floor_is_one_standard_error_of_the_moment_estimate():
    """The floor on ``tau^2`` (a share of ``var(m)``) equals the spread of the moment estimate
    ``var(m) - noise`` over repeated samples when the groups are identical: measured here by
    simulation, not taken from the formula."""
    rng = np.random.default_rng(11)
    for K in (200, 5000):
        shares = []
        for _ in range(300):
            m = rng.normal(0.0, 1.0, K)            # identical groups, unit noise variance
            vm = float(np.var(m))
            shares.append((vm - 1.0) / vm)
        measured = float(np.std(shares))
        assert abs(sh.variance_floor(K) - measured) < 0.15 * measured
    # few groups pin tau^2 down loosely (a high floor), many tightly (a low one)
    assert sh.variance_floor(224) > 0.05 > 0.02 > sh.variance_floor(10_000)
    assert sh.variance_floor(1) == sh.variance_floor(2) == 1.0
