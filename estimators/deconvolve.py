"""Nonparametric empirical Bayes for group means around a local prior (an [INFERRED] repair of seed
002's per-group intervals; used by ``shrinkage.shrink_groups``).

The normal prior of ``shrink_groups`` assumes normal noise and a normal spread of the true group
means.  Means of a few flight delays have neither: one late flight makes a 3-row mean look like a
stormy hour (within-group residuals with kurtosis 13-26), and the true means are skewed.  The normal
model then gives many ordinary groups a fair chance to pass a high threshold, so the expected union
over a fragment's groups saturates.  Flights by time_hour, avg(dep_delay) > 25: 0.68 of the table
expected, against 0.32 real.  It also pulls real outliers back below the threshold: carrier and
month, avg(arr_delay) > 26.7: 0.16 expected, against 0.67 real.

Here, around the prior means ``mu_g`` (a covariate's local means, ``group_smoothers.local_mean``):

* **Noise.** The error of an ``n``-row mean is simulated from the pooled within-group residuals of
  the sampled rows: ``n`` draws with replacement, ``SIMS`` times.  From ``NORMAL_FROM`` rows on it is
  normal with the pooled variance.  It is scaled by the finite-population factor ``sqrt(1 - n/N)``.
* **Spread.** ``delta_g = theta_g - mu_g`` has an unknown distribution on a grid of ``GRID`` points.
  It is fitted by EM from uniform weights: the NPMLE of Kiefer and Wolfowitz, stopped after
  ``EM_ITERS`` steps.
* **Replicates.** Each group's posterior over the grid gives its replicates.

Only used with a local prior, and only when the residuals are far from normal (``non_normal``):
with light tails an n-row mean is close to normal and the normal posterior costs nothing.  Around
the mean of all groups, deconvolving heavy noise collapsed the spread: flights by tailnum, 87
expected passing planes against 737 real, where the normal prior is the safer choice.
"""

from __future__ import annotations

import numpy as np

GRID = 200          # support points of the spread's distribution
EM_ITERS = 150      # EM steps (NPMLE); fewer keep the fitted distribution smoother
SIMS = 20000        # simulated n-row means per distinct n
NORMAL_FROM = 30    # rows from which an n-row mean's error is taken as normal
MIN_RESIDUALS = 100  # fewer pooled residuals: no noise model, keep the normal prior
RESOLVE = 2.0       # least noise sd, in grid steps, of a group given the nonparametric posterior
EM_GROUPS = 4000    # groups the spread is fitted on (a random subset beyond)
MAX_KURTOSIS = 1.0  # residuals' excess kurtosis up to which the noise is taken as normal
MAX_SKEW = 0.5      # ... and absolute skewness


def residuals(g) -> np.ndarray:
    """Pooled within-group residuals of a grouped column (a pandas ``SeriesGroupBy``, the caller's
    grouping of the sampled rows) over groups with two or more values, each scaled by
    ``sqrt(c/(c-1))`` so that their variance estimates the within-group variance.  Sorted: the noise
    is simulated by drawing from them by position, and the draws must not depend on the order the
    sample's rows were stored in (a Spark draw, a driver draw and a maintained sample differ)."""
    x = g.obj
    mean, cnt = g.transform("mean"), g.transform("count")
    keep = (cnt >= 2) & x.notna()
    r = (x - mean) * np.sqrt(cnt / (cnt - 1).clip(lower=1))
    return np.sort(r[keep].to_numpy(float))


def _noise_density(res: np.ndarray, n: int, x: np.ndarray, rng, res_sd: float) -> np.ndarray:
    """Density of the error of an ``n``-row mean at the offsets ``x`` (``res_sd``: ``np.std(res)``,
    computed once by the caller rather than once per group size)."""
    sd = res_sd / np.sqrt(n)
    if n >= NORMAL_FROM or sd <= 0:
        sd = max(sd, 1e-12)
        return np.exp(-0.5 * (x / sd) ** 2) / (sd * np.sqrt(2 * np.pi))
    e = rng.choice(res, size=(SIMS, n)).mean(axis=1)
    h = 0.5 * 1.06 * float(np.std(e)) * SIMS ** -0.2     # half Silverman's bandwidth
    lo, hi = float(e.min()) - 6 * h, float(e.max()) + 6 * h
    edges = np.linspace(lo, hi, 2001)
    hist, _ = np.histogram(e, bins=edges, density=True)
    step = edges[1] - edges[0]
    half = int(np.ceil(4 * h / step))
    ker = np.exp(-0.5 * (np.arange(-half, half + 1) * step / h) ** 2)
    dens = np.convolve(hist, ker / ker.sum(), mode="same")
    centers = (edges[:-1] + edges[1:]) / 2
    floor = 1e-9 * float(dens.max())
    return np.interp(x, centers, dens, left=floor, right=floor) + floor


def posterior_draws(m: np.ndarray, mu: np.ndarray, n: np.ndarray, N: np.ndarray, ok: np.ndarray,
                    res: np.ndarray, draws: int, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(posterior means, ``draws`` x groups posterior draws, ``fine``) of the true group means,
    given the sample means ``m``, prior means ``mu``, sampled rows ``n`` of ``N``, and the pooled
    residuals ``res``.  Only the groups in ``fine`` get values (NaN elsewhere): those in ``ok`` whose
    noise is at least ``RESOLVE`` grid steps wide.  A grid of ``GRID`` points over the residuals'
    range cannot represent a sharper posterior (route distances per destination and month: a step of
    ~10 miles against a noise of ~4), so those groups keep the caller's estimate and stay out of the fit."""
    r_all = m - mu
    lo, hi = (float(np.min(r_all[ok])), float(np.max(r_all[ok]))) if ok.any() else (0.0, 0.0)
    grid = np.linspace(lo, hi, GRID)
    step = grid[1] - grid[0]
    fpc_all = np.sqrt(np.clip(1.0 - n / np.where(N > 0, N, 1.0), 1e-6, 1.0))
    res_sd = float(np.std(res))
    noise_sd = res_sd / np.sqrt(np.maximum(n, 1.0)) * fpc_all
    fine = ok & (noise_sd >= RESOLVE * step) & (step > 0)
    idx = np.flatnonzero(fine)
    mean = np.full(len(m), np.nan)
    out = np.full((draws, len(m)), np.nan)
    if len(idx) == 0:
        return mean, out, fine
    r, fpc = r_all[idx], fpc_all[idx]
    like = np.empty((len(idx), len(grid)))
    nn = np.maximum(n[idx], 1).astype(int)
    for k in np.unique(nn):
        sel = nn == k
        off = (r[sel, None] - grid[None, :]) / fpc[sel, None]
        like[sel] = _noise_density(res, int(k), off.ravel(), rng, res_sd).reshape(off.shape) / fpc[sel, None]
    # the spread is a property of the population: fitted on at most EM_GROUPS groups
    fit = like if len(idx) <= EM_GROUPS else like[rng.choice(len(idx), EM_GROUPS, replace=False)]
    fit = fit.astype(np.float32)
    w = np.full(len(grid), 1.0 / len(grid), dtype=np.float32)
    for _ in range(EM_ITERS):  # w_k <- w_k * mean_g L_gk / sum_j L_gj w_j: two matrix-vector products
        w = w * (fit.T @ (1.0 / (fit @ w))) / len(fit)
    # a floor keeps every support point alive for groups outside the fitted subset, whose
    # likelihood may sit where the fit left no weight
    # in place from here on: at 250k groups each (groups, GRID) array is 400 MB; fresh copies took
    # 4.2-6.5 s and a 2.1 GB peak, in place 1.5-1.9 s and 1.0 GB, with the same draws
    post = like
    post *= np.maximum(w.astype(float), 1e-12)
    post /= post.sum(axis=1, keepdims=True)
    mean[idx] = mu[idx] + post @ grid
    # inverse-CDF draws for all groups at once: row g's cumulative weights shifted by g are one
    # increasing array (each row ends at 1); sorted needles make the search one sequential pass,
    # and shuffling each group's draws afterwards keeps replicates independent across groups
    rows = np.arange(len(idx))
    cum = np.cumsum(post, axis=1, out=post)
    cum[:, -1] = 1.0
    cum += rows[:, None]
    flat = cum.ravel()
    u = np.sort(rng.random((len(idx), draws)) * (1.0 - 1e-12), axis=1) + rows[:, None]
    pick = np.searchsorted(flat, u.ravel(), side="right").reshape(u.shape) - rows[:, None] * len(grid)
    pick = rng.permuted(np.clip(pick, 0, len(grid) - 1), axis=1).T
    out[:, idx] = mu[idx][None, :] + grid[pick] + rng.uniform(-step / 2, step / 2, pick.shape)
    return mean, out, fine


def non_normal(res: np.ndarray) -> bool:
    """Whether the residuals are far enough from normal for the simulated noise to matter: excess
    kurtosis above ``MAX_KURTOSIS`` or skewness beyond ``MAX_SKEW``.  TPC-H's uniform columns
    (kurtosis -1.2) keep the normal model, flight delays (kurtosis 13-26) do not."""
    z = res - float(np.mean(res))
    z2 = z * z
    m2 = float(np.mean(z2))
    if m2 <= 0:
        return False
    # products, not ``z ** 3`` / ``z ** 4``: numpy's float power took ~5 ms a call for 50k residuals
    skew = float(np.mean(z2 * z)) / m2 ** 1.5        # moment estimators (scipy.stats costs ~0.5 s to import)
    kurt = float(np.mean(z2 * z2)) / m2 ** 2 - 3.0
    return abs(skew) > MAX_SKEW or kurt > MAX_KURTOSIS
