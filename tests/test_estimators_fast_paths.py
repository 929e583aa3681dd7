"""The vectorised fast paths of the estimators give the same numbers as the straightforward code."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from estimators.quantiles import nan_quantiles
from estimators.size import _window_touch, estimate_size, unseen_touch_probability


@pytest.mark.parametrize("seed", range(6))
def test_nan_quantiles_equals_numpy(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(int(rng.integers(1, 60)), int(rng.integers(1, 200))))
    x[rng.random(x.shape) < 0.3] = np.nan
    x[:, 0] = np.nan  # an all-NULL group
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.nanquantile(x, [0.025, 0.5, 0.975], axis=0)
    got = nan_quantiles(x, [0.025, 0.5, 0.975])
    assert np.array_equal(np.isnan(want), np.isnan(got))
    assert np.array_equal(np.nan_to_num(want), np.nan_to_num(got))


@pytest.mark.parametrize("alpha", [0.5, 30.0, np.inf])
def test_window_touch_equals_dense_formula(alpha):
    rng = np.random.default_rng(3)
    G, F = 40, 25
    n_g = rng.integers(1, 5, G).astype(float)
    K_g = rng.integers(0, 50, G).astype(float)
    pi = rng.random(F)
    pi[3] = 0.0
    pi /= pi.sum()
    pos = rng.permutation(F)
    i0 = rng.integers(0, F, G)
    i1 = np.minimum(F, i0 + rng.integers(0, F, G))
    i0[:5], i1[:5] = 0, F  # five groups share the whole partition
    by_pos = np.zeros(F)
    by_pos[pos] = pi
    mass = np.array([by_pos[a:b].sum() for a, b in zip(i0, i1)])
    inside = (pos[None, :] >= i0[:, None]) & (pos[None, :] < i1[:, None])
    with np.errstate(divide="ignore", invalid="ignore"):
        pi_g = np.nan_to_num(np.where(inside, pi[None, :] / mass[:, None], 0.0))
    want = unseen_touch_probability(n_g, K_g, pi_g, alpha)
    got = _window_touch(n_g, K_g, i0, i1, mass, pos, pi, alpha)
    assert got.shape == (G, F)
    assert np.array_equal(got, want)


def _instance(seed: int, G: int = 600, F: int = 40):
    rng = np.random.default_rng(seed)
    g = rng.integers(0, G, 6000)
    frag = rng.integers(0, F, g.shape[0]) if seed % 2 else (g * F // G + rng.integers(-1, 2, g.shape[0])).clip(0, F - 1)
    sample = pd.DataFrame({"g": g, "frag": frag})
    groups = pd.DataFrame({"g": np.arange(G), "p": rng.random(G) * (rng.random(G) < 0.8),
                           "N": np.bincount(g, minlength=G) * 20})
    sizes = rng.integers(1, 100, F).astype(float)
    return sample, groups, sizes, rng.random((30, G)) < 0.6


@pytest.mark.parametrize("seed", range(4))
def test_early_stop_when_saturated_changes_nothing(seed):
    """Small blocks let ``estimate_size`` stop once every fragment is certainly covered; the result
    must equal one pass over all groups in a single block (which never stops early)."""
    sample, groups, sizes, reps = _instance(seed)
    one = estimate_size(sample, groups, sizes, group_cols=["g"], pass_replicates=reps, chunk_cells=10 ** 9)
    blocks = estimate_size(sample, groups, sizes, group_cols=["g"], pass_replicates=reps, chunk_cells=400)
    np.testing.assert_allclose(blocks.fragment_probability.to_numpy(), one.fragment_probability.to_numpy(),
                               rtol=1e-12, atol=1e-12)
    assert (blocks.ci_lo, blocks.ci_hi) == (one.ci_lo, one.ci_hi)
    assert blocks.rows_expected == pytest.approx(one.rows_expected, rel=1e-12)
