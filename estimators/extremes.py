r"""MIN/MAX of a group from its sampled rows plus a model of its unseen rows [INFERRED].

Why: the sample holds ``n_g`` of a group's ``N_g`` rows, and the sample max is only a lower bound
of the group's max.  Bootstrap resamples of the sampled rows never exceed it, so a group whose
sampled rows all lie below ``c`` got ``P(max > c) = 0`` however many rows it did not show: on
``HAVING max(x) > c`` over keys with a few rows per group (one sampled row of an order's 1-7 lines
at theta = 5 %) nearly every passing group was missed, and the replicates agreed, so the interval
had no width either.

Model: the group's ``K_g`` unseen contributing rows (``K_g = (N_g - n_g) c_g / n_g``: its unsampled
rows times its sampled share passing WHERE) are a mixture, by the empirical-Bayes weight of the
group's own rows ``w_g = c_g tau^2 / (c_g tau^2 + s_w^2)`` (``tau^2`` the spread of the group means
beyond their noise, ``s_w^2`` the pooled within-group variance):

* ``(1 - w_g) K_g`` rows like the rows of *all* groups (the pooled sampled values): where the key
  does not explain the value (an order's line prices, a part's supply costs, a flight's delays)
  ``w_g ~ 0`` and the unseen rows are simply more draws from the table's distribution;
* ``w_g K_g`` rows near the group's own: its location (posterior mean, shrunk towards the mean of
  all) plus a pooled within-group residual -- where the key fixes the value up to noise (a block's
  latitude) ``w_g ~ 1`` and the unseen rows scatter around the group's sampled ones.

The max of K iid draws from a distribution F is ``F^{-1}(U^{1/K})``, the min ``F^{-1}(1 -
U^{1/K})``, read off sorted values that each replicate resamples, the quantile function continued
past the outermost values by exponential tails (``quantile_at``): a threshold beyond every sampled
value is still passed with the probability that unseen rows exceed them all, ``K / (n + 1)``-ish.
The own rows' draws are kept inside the pool's range at a millionth from either end (no value far beyond what the table was seen to take: an additive residual model without
the bound put a uniform cost in [1, 1000] at 1,150 and passed 14 % of partsupp's parts for a
``max > 999.9``) (the bootstrap of the pool: the estimated tail's own error, shared by all
groups).  The replicate is the sample's extreme combined with the unseen ones (``max(sample max,
unseen max)``), so it never undercuts what the sample proves, and a fully sampled group (``K_g =
0``) keeps its sample extreme in every replicate.  Known limits: the tails beyond the pooled
sampled values are exponential (a bounded or heavier tail is mis-sized there), and a spread that
differs between groups (heteroscedastic values) is pooled.
"""

from __future__ import annotations

import numpy as np

MIN_RESIDUALS = 30  # fewer within-group residuals than this: groups taken as exchangeable (w_g = 0)


def own_weight(v: np.ndarray, g: np.ndarray, G: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(weight of the group's own rows ``w_g``, its location, location sd, sorted pooled residuals)
    of the contributing values ``v`` of groups ``g`` (module docstring)."""
    c = np.bincount(g, minlength=G).astype(float)
    s = np.bincount(g, weights=v, minlength=G)
    have = c > 0
    ybar = np.where(have, s / np.where(have, c, 1.0), 0.0)
    grand = float(np.mean(v)) if v.size else 0.0
    multi = c[g] >= 2
    res = (v - ybar[g])[multi]
    dof = float(np.sum(np.maximum(c - 1.0, 0.0)))
    if res.size < MIN_RESIDUALS or dof <= 0:
        return np.zeros(G), np.full(G, grand), np.zeros(G), np.zeros(0)
    sw2 = float(np.sum(res ** 2)) / dof
    means = ybar[have]
    tau2 = max(float(np.var(means, ddof=1)) - float(np.mean(sw2 / c[have])), 0.0) if means.size > 1 else 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(have & (tau2 > 0), c * tau2 / (c * tau2 + sw2), 0.0)
    loc = w * ybar + (1.0 - w) * grand
    sd = np.sqrt(np.where(have, w * sw2 / np.where(have, c, 1.0), 0.0))
    return w, loc, sd, np.sort(res)


TAIL_K = 20  # outermost sorted values whose mean excess sets the scale of the exponential tails


def quantile_at(sorted_vals: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The empirical quantile function with plotting positions ``i / (n + 1)`` (a new draw passes
    all n sampled values with probability ``1 / (n + 1)``), continued past the outermost values by
    exponential tails whose scale is the mean excess of the ``TAIL_K`` outermost values over the
    ``TAIL_K``-th: unseen rows may exceed every sampled one, by about as much as the sampled tail
    spreads (a delay of 960 minutes beyond a sample whose longest is 800)."""
    n = sorted_vals.size
    if n == 1:
        return np.full(np.shape(q), float(sorted_vals[0]))
    k = min(TAIL_K, n - 1)
    s_hi = max(float(np.mean(sorted_vals[-k:]) - sorted_vals[-1 - k]), 0.0)
    s_lo = max(float(sorted_vals[k] - np.mean(sorted_vals[:k])), 0.0)
    pos = np.arange(1, n + 1) / (n + 1.0)
    out = np.interp(q, pos, sorted_vals)
    with np.errstate(divide="ignore", invalid="ignore"):
        up = sorted_vals[-1] - s_hi * np.log(np.maximum(1.0 - q, 1e-300) / (1.0 - pos[-1]))
        down = sorted_vals[0] + s_lo * np.log(np.maximum(q, 1e-300) / pos[0])
    out = np.where(q > pos[-1], up, out)
    return np.where(q < pos[0], down, out)


def _draw(sorted_vals: np.ndarray, q: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per replicate row of ``q`` (B, m): quantiles of its own bootstrap resample of ``sorted_vals``."""
    n = sorted_vals.size
    out = np.empty_like(q)
    for b in range(q.shape[0]):
        out[b] = quantile_at(np.sort(sorted_vals[rng.integers(0, n, n)]), q[b])
    return out


def _extreme_quantile(func: str, K: np.ndarray, shape: tuple, rng: np.random.Generator) -> np.ndarray:
    """The quantile level of the max (min) of ``K`` iid draws, one per replicate and group."""
    q = rng.random(shape) ** (1.0 / K)[None, :]
    return 1.0 - q if func == "min" else q


def extreme_replicates(func: str, y: np.ndarray, m: np.ndarray, gi: np.ndarray, G: int, n_g: np.ndarray,
                       N_g: np.ndarray, sample_ext: np.ndarray, exact: np.ndarray, B: int,
                       rng: np.random.Generator) -> np.ndarray:
    """(B, G) MIN/MAX replicates of a stratified sample (module docstring): ``y``/``m`` the row values
    and contributing mask, ``gi`` the group per row, ``n_g``/``N_g`` sampled and population rows per
    group, ``sample_ext`` the sample extreme per group, ``exact`` the fully sampled groups."""
    mb = np.asarray(m, dtype=bool)
    v, g = np.asarray(y, dtype=float)[mb], gi[mb]
    sample_ext = np.asarray(sample_ext, dtype=float)
    out = np.broadcast_to(sample_ext, (B, G)).copy()
    c = np.bincount(g, minlength=G).astype(float)
    K = np.where(exact, 0.0, np.maximum(np.asarray(N_g, dtype=float) - n_g, 0.0) * c / np.maximum(n_g, 1.0))
    live = np.flatnonzero((K > 0) & np.isfinite(sample_ext))
    if live.size == 0 or v.size == 0:
        return out
    w, loc, sd, res = own_weight(v, g, G)
    pick = np.maximum if func == "max" else np.minimum
    pooled = np.sort(v)
    lo, hi = (float(x) for x in quantile_at(pooled, np.array([1e-6, 1.0 - 1e-6])))
    K_pool, K_own = K[live] * (1.0 - w[live]), K[live] * w[live]
    ext = out[:, live]
    has = K_pool > 0
    if has.any():
        e = _draw(pooled, _extreme_quantile(func, K_pool[has], (B, int(has.sum())), rng), rng)
        ext[:, has] = pick(ext[:, has], e)
    has = (K_own > 0) & (res.size > 0)
    if has.any():
        idx = live[has]
        e = _draw(res, _extreme_quantile(func, K_own[has], (B, idx.size), rng), rng)
        e = np.clip(loc[idx][None, :] + sd[idx][None, :] * rng.standard_normal(e.shape) + e, lo, hi)
        ext[:, has] = pick(ext[:, has], e)
    out[:, live] = ext
    return out
