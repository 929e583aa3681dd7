r"""How far a group's unseen rows may reach among a candidate's ordered fragments: the interval's
upper end for candidates mapped by the unseen-row model.

The point windows (``estimators.windows``) widen a group's observed span by the German-tank
argument, which expects the rows spread evenly over their window.  Rows spread any other way reach
further than their sample shows: a crimes block's latitudes cluster around its centre, so 42
sampled of ~600 rows spanned 34 of the 44 fragments the block's rows reach, and an interval whose
upper end was "an unseen row in every window fragment" stayed below the real size.  The bound needs
where *all* ``N_g`` rows may lie, not the expected spread.

Model: a group's positions are ``mean_g + sd_g Z``, one shape ``Z`` for all groups, its
distribution the pooled standardised positions of the groups with at least ``MIN_ROWS`` sampled
rows over at least ``MIN_FRAGMENTS`` fragments.  The largest of ``N`` draws stays below ``Q_Z(u)``
with probability ``u^N``, so at level ``a`` per side a group reaches up to
``mean_g + sd_g Q_Z((1 - a)^{1/N})`` and down to ``mean_g + sd_g Q_Z(1 - (1 - a)^{1/N})``, past
the pooled values by their generalized Pareto tails (``extremes.quantile_at``).  Evenly spread
rows give about the point window back (a uniform ``Z`` ends near +-sqrt(3)); clustered rows get the
reach their tails give.  The reach never falls inside the point window, and groups with fewer
sampled rows or fragments keep theirs.  [INFERRED]

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> g = np.repeat(np.arange(200), 40)                       # 200 groups, 40 sampled rows each
>>> pos = np.round(500 + 10 * rng.standard_normal(g.size))  # clustered around position 500
>>> lo, hi = reach(g, pos, np.ones(g.size), np.full(200, 40.0), np.full(200, 800.0), 200)
>>> span = np.array([np.ptp(pos[g == k]) for k in range(200)])
>>> bool(np.median(hi - lo) > 1.5 * np.median(span))  # normal ranges grow like sqrt(log N)
True
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from estimators.extremes import quantile_at

MIN_ROWS = 5  # sampled rows a group needs to lend its standardised positions (and to get a reach)
# distinct fragments a group's sampled rows must touch: over one or two the spread is the fragments'
# grid, not the rows' distribution, and a two-point standardised shape has no tail to extrapolate
# (groups of 400 rows within two fragments got reaches of five)
MIN_FRAGMENTS = 3
MIN_POOLED = 100  # fewer pooled standardised positions: no reach model, the point windows stay


def reach(cell_group: np.ndarray, cell_pos: np.ndarray, cell_m: np.ndarray, n_g: np.ndarray, N_g: np.ndarray,
          G: int, level: float = 0.025) -> tuple[np.ndarray, np.ndarray]:
    """Per group ``[lo, hi]`` fragment positions all ``N_g`` rows lie within at ``level`` per side
    (module docstring); ``(+inf, -inf)`` for groups without a reach (fewer than ``MIN_ROWS``
    sampled rows, no spread, or too little pooled evidence)."""
    lo, hi = np.full(G, np.inf), np.full(G, -np.inf)
    g = np.asarray(cell_group, dtype=np.int64)
    x = np.asarray(cell_pos, dtype=float)
    m = np.asarray(cell_m, dtype=float)
    n = np.bincount(g, weights=m, minlength=G)
    mean = np.bincount(g, weights=m * x, minlength=G) / np.maximum(n, 1.0)
    var = np.bincount(g, weights=m * (x - mean[g]) ** 2, minlength=G) / np.maximum(n - 1.0, 1.0)
    sd = np.sqrt(var)
    spread = np.bincount(g, minlength=G)  # cells are distinct (group, fragment) pairs
    own = (n >= MIN_ROWS) & (sd > 0) & (spread >= MIN_FRAGMENTS)
    use = own[g]
    if not use.any():
        return lo, hi
    z = np.repeat((x[use] - mean[g[use]]) / sd[g[use]], m[use].astype(np.int64))
    if z.size < MIN_POOLED:
        return lo, hi
    z.sort()
    N = np.maximum(np.asarray(N_g, dtype=float)[own], np.asarray(n_g, dtype=float)[own])
    u = np.exp(np.log1p(-level) / np.maximum(N, 1.0))  # (1 - level)^(1/N)
    with np.errstate(over="ignore", invalid="ignore"):
        top, bottom = quantile_at(z, u), quantile_at(z, 1.0 - u)
    lo[own] = mean[own] + sd[own] * np.nan_to_num(bottom, nan=-np.inf)
    hi[own] = mean[own] + sd[own] * np.nan_to_num(top, nan=np.inf)
    return lo, hi


def reach_windows(i0: np.ndarray, i1: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                  F: int) -> tuple[np.ndarray, np.ndarray]:
    """Position windows ``[i0, i1)`` widened to the reach ``[lo, hi]`` where it is wider."""
    with np.errstate(invalid="ignore"):
        a = np.where(np.isfinite(lo), np.clip(np.ceil(lo), 0, F), F).astype(np.int64)
        b = np.where(np.isfinite(hi), np.clip(np.floor(hi) + 1, 0, F), 0).astype(np.int64)
    return np.minimum(i0, a), np.maximum(i1, b)


def upper_end(reps: np.ndarray, groups: np.ndarray, K_g: np.ndarray, i0: np.ndarray, i1: np.ndarray,
              pos: np.ndarray, certain: np.ndarray, sizes: np.ndarray, confidence: float) -> float:
    """Upper replicate quantile of the rows in the fragments each replicate's passing groups reach:
    their ``certain`` cells (``(B, F)`` booleans) and, for a group with unseen rows, every fragment
    of its reach window ``[i0, i1)`` (positions)."""
    F = sizes.shape[0]
    g = groups[(K_g[groups] > 0) & (i1[groups] > i0[groups])]
    covered = np.asarray(certain, dtype=bool).copy()
    if g.size:
        rows = np.arange(g.size)
        ends = (np.r_[rows, rows], np.r_[i0[g], i1[g]])  # +1 where a reach opens, -1 past its end
        S = sparse.csr_matrix((np.r_[np.ones(g.size), -np.ones(g.size)], ends), shape=(g.size, F + 1))
        open_ = np.cumsum((sparse.csr_matrix(reps[:, g], dtype=float) @ S).toarray(), axis=1)[:, :F] > 0.5
        covered |= open_[:, pos]  # column r: fragment r at its position
    a_ = (1.0 - confidence) / 2.0
    return float(np.quantile(covered.astype(float) @ sizes, 1.0 - a_, method="higher"))
