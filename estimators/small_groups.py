r"""A variance floor for SUM/AVG/COUNT replicates of groups with few sampled rows [INFERRED].

Why: the bootstrap resamples a group's own sampled rows.  One sampled row (a partsupp part's 4
rows at theta = 5 %) has no spread to resample, so its replicates all equal the point and its pass
probability is 0 or 1: an estimate ``N_g * x`` that may be off by the whole spread of the rows was
taken as certain, and the interval on its sketch had width zero although the size was not exact.
Two or three rows resample to ``(n-1)/n`` of the variance at best.  The digest (C6) names the
repair: a pooled variance.

Per group g nested in one stratum h (a sample stratified on the group keys; a WHERE splits a
stratum into the group of its passing rows and that of its failing ones), the analytic variance of
the Horvitz-Thompson estimate with a *pooled* within-stratum variance ``s_w^2`` is

* SUM / COUNT: ``N_h^2 s_w^2 (1 - n_h/N_h) / n_h`` of the domain values ``z = y * [row in g]`` over
  the stratum's rows (``y = u*v``, resp. the WHERE indicator ``u``);
* AVG: ``s_w^2 (1 - n_h/N_h) / c_g`` of the values over the ``c_g`` contributing rows.

``s_w^2`` pools the strata with two or more rows; with fewer than ``MIN_DOF`` degrees of freedom the
variance of all rows' values stands in (an upper bound: it includes the spread between groups).
Where a group's replicate variance is below its analytic variance, normal noise of the difference
is added to its replicates around the point (counts stay >= 0), so a non-exact group always carries
sampling uncertainty.  Exact (fully sampled) groups and groups spread over several strata (a
uniform fallback sample: the bootstrap's domain counts vary there) are left alone.
"""

from __future__ import annotations

import warnings

import numpy as np

MIN_DOF = 30


def pooled_within_variance(S: np.ndarray, Q: np.ndarray, n: np.ndarray, fallback: float) -> float:
    """Pooled variance from per-unit sums ``S``, sums of squares ``Q`` and row counts ``n`` (units
    with one row add no degree of freedom); ``fallback`` below ``MIN_DOF`` degrees of freedom."""
    dof = float(np.sum(np.maximum(n - 1.0, 0.0)))
    if dof < MIN_DOF:
        return fallback
    return float(np.sum(np.where(n > 1, Q - S * S / np.maximum(n, 1.0), 0.0))) / dof


def group_strata(si: np.ndarray, gi: np.ndarray, G: int, needed: np.ndarray | None = None) -> np.ndarray | None:
    """The one stratum of every group (-1 for a group spread over several), or None when a group
    that is ``needed`` (default: every group) spans several strata.  The estimation pipeline keeps
    the rows failing a WHERE in one group of their own across all strata; it is not needed."""
    H = int(si.max()) + 1
    pairs = np.unique(gi * H + si)
    g_of, h_of = pairs // H, pairs % H
    spans = np.bincount(g_of, minlength=G) > 1
    if (spans & (np.ones(G, dtype=bool) if needed is None else needed)).any():
        return None
    out = np.full(G, -1, dtype=np.int64)
    out[g_of] = h_of
    out[spans] = -1
    return out


def analytic_variance(f: str, y: np.ndarray, m: np.ndarray, gi: np.ndarray, si: np.ndarray, G: int,
                      N_h: np.ndarray) -> np.ndarray | None:
    """Per group the analytic variance of aggregate ``f`` with a pooled ``s_w^2`` (module docstring),
    or None when groups are not nested in strata."""
    if si.size == 0:
        return None
    h = group_strata(si, gi, G)
    if h is None:
        return None
    m = np.asarray(m, dtype=bool)
    H = int(si.max()) + 1
    n_h = np.bincount(si, minlength=H).astype(float)
    Nh = np.maximum(np.asarray(N_h, dtype=float)[h], 1.0)
    nh = n_h[h]
    fpc = np.clip(1.0 - nh / Nh, 0.0, 1.0)
    z = m.astype(float) if f == "count" else np.where(m, y, 0.0)
    if f == "avg":
        v = np.asarray(y, dtype=float)[m]
        c = np.bincount(gi[m], minlength=G).astype(float)
        S, Q = np.bincount(gi[m], v, G), np.bincount(gi[m], v * v, G)
        sw2 = pooled_within_variance(S, Q, c, float(np.var(v, ddof=1)) if v.size > 1 else 0.0)
        return np.where(c > 0, sw2 * fpc / np.maximum(c, 1.0), 0.0)
    S, Q = np.bincount(gi, z, G), np.bincount(gi, z * z, G)
    sw2 = pooled_within_variance(S, Q, nh, float(np.var(z, ddof=1)) if z.size > 1 else 0.0)
    return Nh * Nh * sw2 * fpc / np.maximum(nh, 1.0)


def floor_replicates(f: str, reps: np.ndarray, point: np.ndarray, y: np.ndarray, m: np.ndarray,
                     gi: np.ndarray, si: np.ndarray, G: int, N_h: np.ndarray, exact: np.ndarray,
                     rng: np.random.Generator) -> np.ndarray:
    """``reps`` (B, G) with normal noise added where their variance is below the analytic one."""
    if f not in ("sum", "avg", "count") or reps is None:
        return reps
    v_an = analytic_variance(f, y, m, gi, si, G, N_h)
    if v_an is None:
        return reps
    with warnings.catch_warnings():  # a group NULL in every replicate has no variance: 0 below
        warnings.simplefilter("ignore", RuntimeWarning)
        v_rep = np.nanvar(reps, axis=0) if reps.shape[0] > 1 else np.zeros(G)
    gap = np.where(np.isfinite(point) & ~exact, np.maximum(v_an - np.nan_to_num(v_rep), 0.0), 0.0)
    if not (gap > 0).any():
        return reps
    live = np.flatnonzero(gap > 0)
    # the noise of the live groups scattered into a full array, then whole-array operations: a
    # gather of most columns of a (B, G) array cost 4x the rest at 280,000 groups
    full = np.zeros(reps.shape)
    full[:, live] = rng.standard_normal((reps.shape[0], live.size)) * np.sqrt(gap[live])[None, :]
    is_live = gap > 0
    out = np.where(np.isfinite(reps) | ~is_live[None, :], reps, point[None, :]) + full
    if f == "count":
        out = np.where(is_live[None, :], np.maximum(out, 0.0), out)
    return out
