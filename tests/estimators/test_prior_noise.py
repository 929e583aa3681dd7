"""The prior mean's shared error in the posterior replicates (``estimators.prior_noise``) and the
expected size taken over the replicates jointly (``estimators.sketch_size.JOINT_EXPECTATION``).  Pure
numpy/pandas; truths are simulated or built by hand."""

import numpy as np
import pandas as pd
import pytest

import estimators.shrinkage as shrinkage
import estimators.sketch_size as size
from estimators.prior_noise import apply, prior_error_draws
from estimators.group_smoothers import covariate_order, local_mean
from estimators.sketch_size import estimate_size


def test_smoothers_match_the_prior_means_they_stand_for():
    rng = np.random.default_rng(0)
    G, R = 300, 4
    x = rng.permutation(G).astype(float)
    ok = rng.random(G) > 0.1
    D = rng.normal(size=(R, G))
    order = covariate_order(x, ok)
    got = apply(("local", 3, order), D, ok)
    for r in range(R):
        want = local_mean(x, D[r], ok, 3)
        want = np.where(np.isnan(want), D[r, ok].mean(), want)
        np.testing.assert_allclose(got[r], want)
    labels = np.where(ok, (x // 50).astype(int), -1)
    got = apply(("bins", labels), D, ok)
    for r in range(R):
        means = pd.Series(D[r, ok]).groupby(labels[ok]).mean()
        want = np.where(labels >= 0, means.reindex(labels).to_numpy(), D[r, ok].mean())
        np.testing.assert_allclose(got[r], want)
    labels2 = np.where(ok, (x % 3).astype(int), -1)
    got = apply(("second", ("local", 3, order), labels2), D, ok)
    first = apply(("local", 3, order), D, ok)
    for r in range(R):
        res = D[r] - first[r]
        means = pd.Series(res[ok]).groupby(labels2[ok]).mean()
        want = first[r] + np.where(labels2 >= 0, means.reindex(labels2).to_numpy(), 0.0)
        np.testing.assert_allclose(got[r], want)
    np.testing.assert_allclose(apply(None, D, ok), np.repeat(D[:, ok].mean(axis=1, keepdims=True), G, axis=1))


def test_draws_have_the_spread_and_neighbour_correlation_of_the_prior_means_real_error():
    """Groups with equal true means and unit noise: a local mean of 2k neighbours errs with variance
    1/(2k), and neighbours share 2k-2 of their 2k terms (correlation (k-1)/k).  Draws from bootstrap-
    like replicates must show both, as the real errors over many simulated tables do."""
    rng = np.random.default_rng(1)
    G, k, B = 4000, 5, 300
    ok = np.ones(G, bool)
    x = np.arange(G, dtype=float)
    order = covariate_order(x, ok)
    m = rng.normal(size=G)
    reps = m[None, :] + rng.normal(size=(B, G))
    e = prior_error_draws(("local", k, order), reps, m, ok)
    inner = slice(k, G - k)
    real = np.stack([local_mean(x, rng.normal(size=G), ok, k) for _ in range(200)])  # truths are 0
    for errs in (e, real):
        assert errs[:, inner].var() == pytest.approx(1.0 / (2 * k), rel=0.1)
        a, b = errs[:, k:G - k - 1].ravel(), errs[:, k + 1:G - k].ravel()
        assert np.corrcoef(a, b)[0, 1] == pytest.approx((k - 1) / k, abs=0.05)
    # B_g scales the shift, and groups outside ``ok`` get none
    Bg = np.full(G, 0.5)
    ok2 = ok.copy()
    ok2[:10] = False
    half = prior_error_draws(("local", k, covariate_order(x, ok2)), reps, m, ok2, Bg)
    assert (half[:, :10] == 0).all()
    full = prior_error_draws(("local", k, covariate_order(x, ok2)), reps, m, ok2)
    np.testing.assert_allclose(half[:, 10:], 0.5 * full[:, 10:])


def test_neighbouring_groups_posteriors_move_together_with_the_prior_noise(monkeypatch):
    """Around a local prior the posterior replicates of neighbouring groups are correlated only when
    the prior mean's error is drawn; the posterior means do not change."""
    from test_local_prior import _rows, _shrunk

    rows, _ = _rows(5)
    runs = {}
    for on in (False, True):
        monkeypatch.setattr(shrinkage, "PRIOR_NOISE", on)
        est, used = _shrunk(rows, {"hour": "hour"})
        assert list(used.values()) == ["hour"]
        name = est.names[0]
        runs[on] = (est.point(name).copy(), est.replicates[name].copy())
    np.testing.assert_array_equal(runs[False][0], runs[True][0])
    corr = {}
    for on, (post, reps) in runs.items():
        dev = reps - reps.mean(axis=0, keepdims=True)
        corr[on] = np.corrcoef(dev[:, :-1].ravel(), dev[:, 1:].ravel())[0, 1]
    assert abs(corr[False]) < 0.05
    assert corr[True] > corr[False] + 0.05


def _block_case():
    """Fragment 0 holds groups 0-4, fragment 1 group 5; groups 0-4 pass together in half of the
    replicates, group 5 never."""
    sizes = {0: 100, 1: 50}
    sample = pd.DataFrame({"g": range(6), "frag": [0, 0, 0, 0, 0, 1]})
    reps = np.zeros((40, 6), dtype=bool)
    reps[:20, :5] = True
    return sizes, sample, reps


def test_groups_that_pass_together_count_once_in_the_expected_size(monkeypatch):
    sizes, sample, reps = _block_case()
    groups = pd.DataFrame({"g": range(6), "p": reps.mean(axis=0)})
    monkeypatch.setattr(size, "JOINT_EXPECTATION", True)
    r = estimate_size(sample, groups, sizes, group_cols=["g"], determined=True, pass_replicates=reps)
    assert r.rows_expected == pytest.approx(50.0)          # fragment 0 in half of the replicates
    assert r.fragments_expected == pytest.approx(0.5)
    monkeypatch.setattr(size, "JOINT_EXPECTATION", False)
    r = estimate_size(sample, groups, sizes, group_cols=["g"], determined=True, pass_replicates=reps)
    assert r.rows_expected == pytest.approx(100.0 * (1 - 0.5 ** 5))  # independence: 96.9


def test_probabilities_not_drawn_from_the_replicates_keep_the_independent_expectation(monkeypatch):
    """CLT-style analytic ``p`` next to replicates: the replicates only give the interval."""
    sizes, sample, reps = _block_case()
    groups = pd.DataFrame({"g": range(6), "p": [0.2] * 5 + [0.0]})
    monkeypatch.setattr(size, "JOINT_EXPECTATION", True)
    r = estimate_size(sample, groups, sizes, group_cols=["g"], determined=True, pass_replicates=reps)
    assert r.rows_expected == pytest.approx(100.0 * (1 - 0.8 ** 5))
