"""The covariate prior of the group shrinkage (``estimators.shrinkage``): a candidate attribute that
is a property of the group and explains the group means becomes the prior; a row-level or an
uninformative one does not.  Pure numpy/pandas."""

import numpy as np
import pandas as pd

from advisor.estimation.size_estimates import U
from estimators.aggregates import estimate_groups
from estimators.having import Cmp, pass_probability
from estimators.shrinkage import shrink_groups

G, N, n = 2000, 50, 3          # 2,000 groups of 50 rows, 3 sampled rows each
HOURS = 20                      # a group-level attribute: each group lies in one "hour"


def _rows(seed: int):
    """Groups whose true mean is 10, or 13 in the last five hours; rows are that mean plus noise of
    sd 8, so 3 sampled rows say little about their own group (sd of the mean 4.6 against a spread of
    1.3)."""
    rng = np.random.default_rng(seed)
    hour = np.arange(G) % HOURS
    theta = 10.0 + 3.0 * (hour >= HOURS - 5) + rng.normal(0, 0.5, G)
    g = np.repeat(np.arange(G), n)
    x = theta[g] + rng.normal(0, 8, G * n)
    rows = pd.DataFrame({"g": g, "x": x, "_n_g": N, U: True,
                         "hour": hour[g],                          # the group's own hour
                         "xbin": np.floor(x / 2.0).astype(int),    # a row-level attribute tied to x
                         "noise": rng.permutation(np.arange(G) % HOURS)[g]})  # group-level, unrelated
    return rows, theta, hour


def _shrunk(rows, covariates):
    est = estimate_groups(rows, ["g", U], [("avg", "x")], seed=1)
    used = shrink_groups(est, rows, ["g", U], covariates=covariates)
    return est, used


def test_a_group_level_covariate_that_explains_the_means_becomes_the_prior():
    rows, theta, hour = _rows(4)
    c = float(np.quantile(theta, 0.9))
    pred = Cmp("avg(x)", ">", c)
    plain, used0 = _shrunk(rows, None)
    cov, used = _shrunk(rows, {"hour": "hour"})
    assert list(used.values()) == ["hour"] and list(used0.values()) == [None]
    late = plain.frame["g"].to_numpy() % HOURS >= HOURS - 5
    assert np.all(theta[~late] < c)            # no early group truly passes
    p0, p1 = pass_probability(plain, pred).to_numpy(), pass_probability(cov, pred).to_numpy()
    # the common prior spreads the passing mass over every hour; the covariate keeps it late
    assert p1[~late].sum() < p0[~late].sum() / 3
    assert p1[late].mean() > p0[late].mean()
    truth = float(np.sum(theta > c))           # 200: the mass moved, it did not grow
    assert 0.5 * truth < p1.sum() < 2.0 * truth


def test_a_row_level_covariate_is_refused_however_well_it_tracks_the_values():
    rows, _, _ = _rows(5)
    _, used = _shrunk(rows, {"xbin": "xbin"})
    assert list(used.values()) == [None]       # its bins would sort groups by their own sampled rows


def test_an_unrelated_group_level_covariate_is_refused_and_changes_nothing():
    rows, _, _ = _rows(6)
    plain, _ = _shrunk(rows, None)
    cov, used = _shrunk(rows, {"noise": "noise"})
    assert list(used.values()) == [None]
    name = plain.names[0]
    np.testing.assert_array_equal(plain.frame[name].to_numpy(), cov.frame[name].to_numpy())
    np.testing.assert_array_equal(plain.replicates[name], cov.replicates[name])


def test_counts_of_groups_finer_than_the_strata_are_shrunk(monkeypatch):
    """A join's group key holds a dimension attribute the sample was not stratified on (l_suppkey,
    o_orderpriority): each group's COUNT is then a noisy total, 20 x its sampled rows here.  Its
    noise (sd ~40) is four times the true spread (sd ~9), so a threshold the true counts almost never
    reach was passed by a fifth of the groups.  Shrunk like a total, the passing mass follows the
    truth; with the strata as groups the COUNT is exact and is left alone."""
    import estimators.shrinkage as shrinkage

    rng = np.random.default_rng(3)
    A, NA, k = 400, 500, 25
    b = rng.integers(0, 5, A * NA)                               # the dimension attribute, per row
    a = np.repeat(np.arange(A), NA)
    true = pd.Series(1, index=pd.MultiIndex.from_arrays([a, b])).groupby(level=[0, 1]).sum()
    pick = np.concatenate([rng.choice(NA, k, replace=False) + i * NA for i in range(A)])
    rows = pd.DataFrame({"a": a[pick], "b": b[pick], "_n_g": NA, "_stratum": a[pick], U: True})
    c = 125.0
    truth = float((true > c).sum())
    pred = Cmp("count(*)", ">", c)
    got = {}
    for on in (False, True):
        monkeypatch.setattr(shrinkage, "SHRINK_COUNTS", on)
        est = estimate_groups(rows, ["a", "b", U], [("count", None)], seed=1)
        shrink_groups(est, rows, ["a", "b", U], aligned=False)
        got[on] = float(pass_probability(est, pred).sum())
    assert truth < 20                                            # the true counts almost never pass
    assert got[False] > 10 * max(truth, 10.0)                    # the raw noise passes hundreds
    assert got[True] < got[False] / 5 and got[True] < 3 * max(truth, 10.0)
    est = estimate_groups(rows, ["a", U], [("count", None)], seed=1)
    before = est.replicates["count(*)"].copy()
    shrink_groups(est, rows, ["a", U], aligned=True)
    np.testing.assert_array_equal(est.replicates["count(*)"], before)
