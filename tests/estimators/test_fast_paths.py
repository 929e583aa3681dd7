"""The vectorised fast paths of the estimators give the same numbers as the straightforward code."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from estimators.quantiles import nan_quantiles
from estimators.sketch_size import estimate_size, unseen_touch_probability
from estimators.unseen_rows import window_cells


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
def test_window_cells_equal_dense_formula(alpha):
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
    g, r, t = window_cells(n_g, K_g, i0, i1, mass, pos, pi, alpha)
    got = np.zeros((G, F))
    got[g, r] = t
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
def test_early_stop_when_saturated_changes_nothing(seed, monkeypatch):
    """Small blocks let ``estimate_size`` stop once every fragment is certainly covered; the result
    must equal one pass over all groups in a single block (which never stops early)."""
    import estimators.fragment_coverage as S

    monkeypatch.setattr(S, "SETTLE_EPS", 0.0)  # only the exact saturation stop
    sample, groups, sizes, reps = _instance(seed)
    one = estimate_size(sample, groups, sizes, group_cols=["g"], pass_replicates=reps, chunk_cells=10 ** 9)
    blocks = estimate_size(sample, groups, sizes, group_cols=["g"], pass_replicates=reps, chunk_cells=400)
    np.testing.assert_allclose(blocks.fragment_probability.to_numpy(), one.fragment_probability.to_numpy(),
                               rtol=1e-12, atol=1e-12)
    assert (blocks.ci_lo, blocks.ci_hi) == (one.ci_lo, one.ci_hi)
    assert blocks.rows_expected == pytest.approx(one.rows_expected, rel=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_sparse_and_dense_window_blocks_agree(seed, monkeypatch):
    """The replicate sums over the locality windows are taken as a sparse product when windows are
    narrow and as a dense BLAS product when wide; both must give the same sizes and interval."""
    import estimators.fragment_coverage as S

    sample, groups, sizes, reps = _instance(seed)
    got = {}
    for share in (0.0, 2.0):  # 0: every block dense, 2: every block sparse
        monkeypatch.setattr(S, "DENSE_SHARE", share)
        got[share] = estimate_size(sample, groups, sizes, group_cols=["g"], pass_replicates=reps, chunk_cells=400)
    a, b = got[0.0], got[2.0]
    assert a.touch == "model"
    np.testing.assert_allclose(a.fragment_probability.to_numpy(), b.fragment_probability.to_numpy(),
                               rtol=1e-12, atol=1e-12)
    assert (a.ci_lo, a.ci_hi) == (b.ci_lo, b.ci_hi) and a.rows_point == b.rows_point
    if seed % 2 == 0:  # clustered instance: narrow windows, a selective sketch
        assert 0 < a.rows_expected < float(sizes.sum())


@pytest.mark.parametrize("seed", [1, 3])
def test_settled_sizes_are_lower_bounds_within_the_tolerance(seed):
    """Uniform fragments: every candidate covers ~everything.  Blocks stop once the expectation and
    every replicate cover >= 1 - SETTLE_EPS of the rows; the sizes are then lower bounds of the full
    pass, within that share of the table."""
    import estimators.fragment_coverage as S

    sample, groups, sizes, reps = _instance(seed)
    full = estimate_size(sample, groups, sizes, group_cols=["g"], pass_replicates=reps, chunk_cells=10 ** 9)
    part = estimate_size(sample, groups, sizes, group_cols=["g"], pass_replicates=reps, chunk_cells=400)
    total = float(sizes.sum())
    assert part.settled and not full.settled
    assert full.rows_expected - S.SETTLE_EPS * total <= part.rows_expected <= full.rows_expected + 1e-9
    assert part.rows_expected >= (1 - S.SETTLE_EPS) * total
    # one draw may miss a fragment; a whole-table interval the sample does not prove keeps the
    # rule-of-three share (3 / B) below the table (``interval_ends.point_margin``)
    assert part.ci_lo >= (1 - S.SETTLE_EPS - 3.0 / reps.shape[0]) * total - float(sizes.max())
    assert part.ci_lo < part.ci_hi and not part.exact
