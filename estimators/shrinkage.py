"""Empirical-Bayes shrinkage of noisy per-group estimates (an [INFERRED] repair of seed 002's
estimator), with an optional covariate prior.

The paper classifies each group by its own bootstrap interval.  With a few sampled rows per group
the noise exceeds the true spread between groups, so upper-tail thresholds pass far too many groups
and sketches look larger than they are.  ``shrink_groups`` pulls every group towards a prior mean
(Fay-Herriot style: ``m_g ~ N(mu_g, tau^2)``, estimate ``~ N(m_g, v_g)``).

**Covariate prior** (``covariate_prior``).  The prior mean ``mu_g`` is the mean of all groups,
unless a candidate attribute explains the group means: flights' top hours by total distance are the
evening hours (long flights west), which a common mean cannot know from 2-3 sampled rows per hour;
it spread their probability over every busy hour and over-estimated ``sched_dep_time``'s sketch
(0.75-0.88 against 0.43-0.68; BENCHMARKS.md).  Groups are binned by the median fragment
id of their sampled rows on the candidate (quantile bins of ``COV_MIN_BIN`` groups or more; a bin
that ties in the medians leave smaller keeps the mean of all), and the bin
mean becomes the prior mean when a one-way ANOVA finds the bins different (F-test at ``COV_P``);
of several such covariates the one leaving the least residual variance is used.  A covariate
qualifies only when it is a property of the group, not of the sampled rows: its intra-class
correlation over the sampled rows (1 - pooled within-group variance / total variance) must be at
least ``COV_ICC`` (sched_dep_time within an hour of time_hour: ~0.99).  Otherwise (e.g. flight number,
which fixes a row's distance) binning would sort groups by the luck of their own sampled rows and the
bin means would confirm that luck instead of correcting it.

**Local prior** (``local_mean``).  Bins of 30+ groups average away a cause shared by a
few neighbours: flights' hours of one stormy day.  The prior mean of a group may instead be the mean
of its ``COV_LOCAL_K`` neighbours on either side in the covariate's order (leave-one-out; ties are
ordered by the other covariates; a group's sampled rows must agree on the covariate's fragment).
It is used when its leave-one-out residuals beat the spread
around the mean of all by ``COV_LOCAL_SE`` standard errors, and beat the best bins.  Around a local
prior the spread is fitted nonparametrically with simulated noise (``estimators.deconvolve``).
On the harness (300 queries each) the median error over sketches below 90 % went from 11.8 % to
9.5 % on flights and from 2.0 % to 1.1 % on crimes (BENCHMARKS.md).

**Split bins.**  Bins may be cut where the group means jump (``split_bins``, a one-dimensional
regression tree) instead of at quantiles: flights' hours by sched_dep_time jump from 1,232 to 953
miles between 5 and 6 a.m., and a quantile bin holding both misled each.  The group size ``log N_g``
is a covariate too (``SIZE``): small routes and quiet hours are the late ones.  A second covariate's
split bins may be fitted to what the first leaves (``_second_covariate``: time order and hour of day
for flights' hours).  And the prior variance may grow as groups shrink (``size_prior_variance``): a
small group's true mean is an average of few rows, so it lies further from any prior mean; one
``tau^2`` for all had shrunk flights' rare late routes below every threshold (34 routes truly above
``avg(dep_delay) > 20.8``, 1.7 expected; 16.8 with it).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Optional

import numpy as np
import pandas as pd
from scipy.optimize import nnls
from scipy.special import fdtrc

from estimators.deconvolve import MIN_RESIDUALS, non_normal, posterior_draws, residuals
from estimators.group_smoothers import covariate_order, local_mean, split_bins
from estimators.prior_noise import prior_error_draws
from estimators.quantiles import nan_quantiles

COV_MIN_BIN = 30     # groups per covariate bin
COV_MAX_BINS = 20    # bins per covariate
COV_ICC = 0.9        # least intra-class correlation of a covariate (a property of the group)
COV_P = 1e-3         # F-test level for "the bins differ"
COV_SPLITS = 64     # most bins cut at the jumps of the group means (split_bins; 0: quantile bins only)
COV_SECOND = True    # a second covariate's split bins on what the first leaves (an additive prior)
COV_LOCAL_K = (2, 5, 15)  # neighbours on each side for a local prior (empty: bins only)
COV_LOCAL_SE = 2.0   # standard errors of a variance ratio a local prior must gain
COV_LOCAL_SPREAD = 0.5  # a local prior's covariate: within-group sd of the rows' fragment ids
SIZE_COVARIATE = True  # the group size (log N_g) as one more covariate of the prior mean
SIZE = "group size"
SIZE_FIT_STEPS = 3  # reweighted fits of size_prior_variance
PRIOR_BY_SIZE = True  # prior variance a + b / N_g (size_prior_variance)
DECONVOLVE = True    # around a local prior, a nonparametric spread and noise (estimators.deconvolve)
FLOOR_SE = 1.0       # default tau^2 floor: this many standard errors of its estimate (variance_floor)
PRIOR_NOISE = True   # replicates carry the prior mean's shared sampling error (estimators.prior_noise)
SHRINK_COUNTS = True  # COUNTs of groups finer than the strata are shrunk like totals
WITHIN_MIN_DOF = 30  # fewer within-group degrees of freedom: s_w^2 from the spread of all rows (an upper bound)


def covariate_stats(rows: pd.DataFrame, frame: pd.DataFrame, gcols: list, covariates: dict) -> dict:
    """Per covariate: (median fragment id of each group's sampled rows, aligned with ``frame``'s
    groups, NaN where none; the covariate's intra-class correlation over the sampled rows; the pooled
    within-group sd of the rows' fragment ids).  One
    grouping for all covariates (seven at SF1's 300k sampled rows: 0.07 s, against 0.35 s apart)."""
    key = pd.MultiIndex.from_frame(frame[gcols]) if len(gcols) > 1 else pd.Index(frame[gcols[0]])
    grp = rows.groupby(gcols, dropna=False, sort=False)
    codes = grp.ngroup().to_numpy()
    med = grp[list(dict.fromkeys(covariates.values()))].median()
    pos = med.index.get_indexer(key)
    ng = int(codes.max()) + 1 if len(codes) else 0
    cnt = np.bincount(codes, minlength=ng).astype(float)
    dof = float(np.sum(np.maximum(cnt - 1.0, 0.0)))
    out = {}
    for name, col in covariates.items():
        v = rows[col].to_numpy(float)
        s1, s2 = np.bincount(codes, v, ng), np.bincount(codes, v * v, ng)
        within = float(np.sum(s2 - s1 * s1 / np.maximum(cnt, 1.0))) / dof if dof > 0 else np.nan
        total = float(np.var(v, ddof=1)) if len(v) > 1 else 0.0
        icc = 1.0 - within / total if total > 0 and np.isfinite(within) else 0.0
        spread = float(np.sqrt(within)) if np.isfinite(within) else np.inf
        out[name] = (np.where(pos >= 0, med[col].to_numpy(float)[pos], np.nan), icc, spread)
    return out


def covariate_prior(m: np.ndarray, ok: np.ndarray, stats: dict, with_smoother: bool = False):
    """(covariate, prior mean per group, ``'bins'`` or ``'local'``) when a qualifying covariate
    explains the group means ``m`` (module docstring), else None.  Groups outside a bin of
    ``COV_MIN_BIN`` keep the mean of all.  Candidates are compared by leave-one-out residuals.
    ``with_smoother`` appends the fitted smoother (``prior_noise``: the same bins or windows
    applied to other values, for the prior mean's own sampling error)."""

    n_ok = int(ok.sum())
    nb = min(COV_MAX_BINS, n_ok // COV_MIN_BIN)
    if nb < 2:
        return None
    mu0 = float(np.mean(m[ok]))
    best = None
    for name, (x, icc, _) in stats.items():
        has = ok & np.isfinite(x)
        if icc < COV_ICC:
            continue
        if has.sum() < nb * COV_MIN_BIN:
            continue
        if COV_SPLITS:
            got = _split_prior(m, has, x)
            if got is not None and (best is None or got[0] < best[0]):
                best = (got[0], name, np.where(np.isnan(got[1]), mu0, got[1]), "bins", ("bins", got[2]))
        edges = np.unique(np.quantile(x[has], np.linspace(0.0, 1.0, nb + 1))[1:-1])
        if len(edges) == 0:
            continue
        b = np.searchsorted(edges, np.nan_to_num(x), side="right")
        k = len(edges) + 1
        n_b = np.bincount(b[has], minlength=k).astype(float)
        big = n_b >= COV_MIN_BIN
        use = has & big[b]
        if big.sum() < 2 or use.sum() <= big.sum():
            continue
        s_b = np.bincount(b[use], weights=m[use], minlength=k)
        mean_b = np.divide(s_b, n_b, out=np.zeros(k), where=big)
        grand = float(np.mean(m[use]))
        ss_b = float(np.sum(n_b[big] * (mean_b[big] - grand) ** 2))
        ss_w = float(np.sum((m[use] - mean_b[b[use]]) ** 2))
        df_b, df_w = int(big.sum()) - 1, int(use.sum()) - int(big.sum())
        if ss_w <= 0:
            continue
        if fdtrc(df_b, df_w, (ss_b / df_b) / (ss_w / df_w)) >= COV_P:
            continue
        # compared by leave-one-out residuals, as the local means below are
        loo = (m[use] - mean_b[b[use]]) * (n_b[b[use]] / (n_b[b[use]] - 1.0))
        score = float(np.mean(loo ** 2))
        if best is None or score < best[0]:
            mu = np.where(has & big[b], mean_b[b], mu0)
            best = (score, name, mu, "bins", ("bins", np.where(has & big[b], b, -1)))
    for name, (x, _, spread) in stats.items():
        ties = tuple(st[0] for other, st in stats.items() if other != name)
        got = _local_prior(m, ok & np.isfinite(x), x, spread, ties)
        if got is not None and (best is None or got[0] < best[0]):
            best = (got[0], name, np.where(np.isnan(got[1]), mu0, got[1]), "local", ("local",) + got[2:])
    if best is not None and COV_SECOND:
        best = _second_covariate(m, ok, stats, best)
    if best is None:
        return None
    return best[1:] if with_smoother else best[1:4]


def _second_covariate(m: np.ndarray, ok: np.ndarray, stats: dict, best: tuple) -> tuple:
    """``best`` (score, name, prior means, kind) plus the split bins of a second covariate fitted to
    what the first leaves (one backfitting pass of an additive prior), when they explain more of it
    than chance (``split_bins``' test) and their leave-one-out residuals are smaller.  Why: a prior
    mean by month alone gives small airports the delays of large ones (flights by dest and month:
    small groups' true means sat half a posterior sd above their estimates, large ones half below),
    and neither month nor group size alone explains both."""
    _, name1, mu1, kind, smoother = best
    r = m - mu1
    pick = None
    for name, (x, icc, _) in stats.items():
        has = ok & np.isfinite(x)
        if name == name1 or icc < COV_ICC or has.sum() < 2 * COV_MIN_BIN:
            continue
        got = _split_prior(r, has, x)
        if got is None or got[0] >= float(np.mean(r[has] ** 2)):
            continue
        if pick is None or got[0] < pick[0]:
            pick = (got[0], name, np.where(np.isnan(got[1]), 0.0, got[1]), got[2])
    if pick is None:
        return best
    return best[0], f"{name1} + {pick[1]}", mu1 + pick[2], kind, ("second", smoother, pick[3])


def _split_prior(m: np.ndarray, has: np.ndarray, x: np.ndarray):
    """(leave-one-out mean square residual, prior means, bin of each group or -1) of ``split_bins``
    on covariate ``x``, or None when no cut is significant."""
    idx = np.flatnonzero(has)
    if len(idx) < 2 * COV_MIN_BIN:
        return None
    b = split_bins(x[idx], m[idx], COV_MIN_BIN, COV_SPLITS, COV_P)
    if b.max() < 1:
        return None
    n_b = np.bincount(b).astype(float)
    mean_b = np.bincount(b, weights=m[idx]) / n_b
    loo = (m[idx] - mean_b[b]) * (n_b[b] / (n_b[b] - 1.0))
    mu = np.full(len(m), np.nan)
    mu[idx] = mean_b[b]
    labels = np.full(len(m), -1, dtype=np.int64)
    labels[idx] = b
    return float(np.mean(loo ** 2)), mu, labels


def _local_prior(m: np.ndarray, has: np.ndarray, x: np.ndarray, spread: float, ties: tuple = ()):
    """(leave-one-out mean square residual, prior means, neighbours k, group order) of the best
    local prior on covariate ``x``
    (``COV_LOCAL_K`` neighbours on each side), when it explains the group means: its residuals are
    smaller than their spread around the mean of all by more than ``COV_LOCAL_SE`` standard errors
    of a variance ratio (``sqrt(2/n)``).  Bins average a covariate's range coarsely; where neighbouring
    groups share a cause (the hours of one stormy day) only a local mean follows it.  The sampled
    rows of a group must agree on the covariate's fragment (pooled within-group sd of the fragment
    ids at most ``COV_LOCAL_SPREAD``).  Ordered by the median fragment of their sampled rows
    (sched_dep_time for hours: ICC 0.996, but a within-group sd of many fragments), neighbours share
    the luck of their samples and their means confirm it: flights' top hours by total distance were
    sized at 0.77-0.87 against 0.62 real with such a prior (0.74 with the bins)."""
    n = int(has.sum())
    if spread > COV_LOCAL_SPREAD or n < 2 * COV_MIN_BIN:
        return None
    total = float(np.var(m[has]))
    if total <= 0:
        return None
    best = None
    order = covariate_order(x, has, ties)
    for k in COV_LOCAL_K:
        mu = local_mean(x, m, has, int(k), order=order)
        score = float(np.mean((m[has] - mu[has]) ** 2))
        if score < total * (1.0 - COV_LOCAL_SE * np.sqrt(2.0 / n)) and (best is None or score < best[0]):
            best = (score, mu, int(k), order)
    return best


def size_prior_variance(r: np.ndarray, v: np.ndarray, N: np.ndarray, ok: np.ndarray, least: float,
                        flat: float) -> np.ndarray | float:
    """Prior variance per group that grows as its population shrinks: ``tau^2_g = a + b / N_g``.

    Why: a group's true mean is itself an average of its ``N_g`` rows, so small groups (rare routes,
    quiet hours) spread further from the prior mean than large ones, and one ``tau^2`` for all
    over-shrinks the small groups and under-shrinks the large.  ``a, b >= 0`` by non-negative
    weighted least squares of ``r_g^2 - v_g`` on ``[1, 1/N_g]`` (method of moments; ``r`` the
    residual from the prior mean, ``v`` the unbiased noise variance), weights ``1/(flat + v_g)``.
    Returns ``flat`` when the fit finds no size effect; never below ``least``."""

    Nk = np.maximum(N[ok], 1.0)
    if ok.sum() < 10 or np.ptp(1.0 / Nk) <= 0:
        return flat
    y = r[ok] ** 2 - v[ok]
    X = np.stack([np.ones_like(Nk), 1.0 / Nk], axis=1)
    fitted = np.full(len(Nk), flat)
    for _ in range(SIZE_FIT_STEPS):  # weights 1 / var(r^2) = 1 / (2 (tau^2_g + v_g)^2), refitted
        w = 1.0 / (np.maximum(fitted, least) + v[ok])
        (a, b), _ = nnls(X * w[:, None], y * w)
        fitted = a + b / Nk
    if b <= 0:
        return flat
    return np.maximum(a + b / np.maximum(N, 1.0), least)


def variance_floor(groups: int) -> float:
    """Least prior variance ``tau^2``, as a share of the residual variance ``var(m)``, for ``groups``
    groups: ``FLOOR_SE`` standard errors of the moment estimate ``var(m) - noise``, whose relative
    standard error is ``sqrt(2 / K)`` (the variance of a sample variance of K normals).

    Why: the moment estimate often lands at or below zero; a floor stops it from shrinking every
    group onto the prior mean.  A fixed 5 % was too high where thousands of groups pin ``tau^2``
    down (TPC-H's 10,000 suppliers: sketches over-estimated by +10.9 %) and too low where a few
    hundred do not (a fixed 1 % sized flights' 224 routes by a delay average as worth a sketch that
    was not: 2 false "go").  So the floor follows the estimate's precision (BENCHMARKS.md)."""
    return float(min(1.0, FLOOR_SE * np.sqrt(2.0 / max(groups, 2))))


def shrink_groups(est, rows, gcols: list, aligned: bool = True, floor: Optional[float] = None, prior: str = "normal",
                  nu: float = 4.0, covariates: Optional[dict] = None) -> dict:
    """Empirical-Bayes shrinkage of SUM/AVG group estimates, in place (an [INFERRED] repair).

    Why: when the sampling noise of a group's estimate is larger than the true spread between groups
    (TPC-H: uniform data, small groups), the noisy estimates are spread wider than the truth, so a
    threshold in the upper part of the distribution is passed by too many groups and sketches look
    larger than they are.  Model: ``m_g ~ N(mu, tau^2)`` across groups, estimate ``~ N(m_g, v_g)``,
    ``tau^2 = max(var(m) - mean(noise variance), floor * var(m))`` (``floor`` None: ``variance_floor``).  ``m_g`` is the row mean ``SUM_g / N_g`` when
    groups are strata (``aligned``: ``N_g`` is exact) and ``AVG_g``; else the total ``SUM_g`` (its
    ``N_g`` is estimated too).  ``v_g`` is the larger of the replicate variance and, for row means,
    ``s_w^2 (1 - n_g/N_g) / n_g`` with the pooled within-group variance ``s_w^2`` (one sampled row
    has no replicate spread).  ``tau^2`` subtracts the mean analytic variance alone: it is unbiased,
    while the larger-of-two is biased upwards, and when the spread is a tenth of the noise (TPC-H
    avg(l_discount) per supplier and ship mode, 15 sampled rows) that bias alone drove ``tau^2`` to
    its floor and cut the pass rate of a high threshold four-fold.  For row means ``tau^2`` becomes
``a + b / N_g`` where the groups' residuals say so (``size_prior_variance``).  Each group's point becomes the
    posterior mean ``mu + (1-B)(m - mu)``, ``B = v/(v + tau^2)``; its replicates are rescaled (and
    topped up with normal noise where narrower than the posterior) so pass probabilities become
    posterior probabilities.  Exact groups and groups without a passing sampled row are left alone.  Known
    limit: a heavy upper tail (flight delays) is under-counted by the normal prior; a nonparametric
    prior (NPMLE) fixed those queries but over-shrank others (noise of 2-row means of delays is far
    from normal) and was worse overall in the harness, so it was dropped.  ``prior='t'`` replaces the
    normal prior by a Student-t with ``nu`` degrees of freedom (a scale mixture of normals): one EM
    step gives each group the prior variance ``tau^2 / lam_g``, ``lam_g = (nu + 1) / (nu + (m_g - mu)^2
    / (tau^2 + v_g))``, so a group far out in the tail keeps most of its own estimate while groups
    inside the bulk shrink as before.  Around a *local* covariate prior (below) the NPMLE is used
    after all, with noise simulated from the sampled rows (``estimators.deconvolve``).

    ``covariates`` (name -> column of ``rows`` holding each row's fragment id on a candidate
    attribute): the prior mean may come from a covariate instead of the mean of all groups
    (``covariate_prior``).  Returns {aggregate name: the covariate used, or None}.
    """

    fr = est.frame
    rng = np.random.default_rng(est.seed + 7919)
    used: dict = {}
    cov_stats = None
    for (f, col), name in zip(est.aggs, est.names):
        t = _shrink_target(est, rows, gcols, f, col, name, aligned)
        if t is None:
            continue
        if covariates:
            cov_stats = cov_stats if cov_stats is not None else covariate_stats(rows, fr, gcols, covariates)
        used[name], mu, kind, smoother = _prior_mean(t, cov_stats)
        tau2_g = _prior_variance(t, mu, floor, prior, nu)
        if tau2_g is None:
            continue
        reps = est.replicates[name] / t.scale[None, :]
        B, post, new = _posterior(t, mu, tau2_g, reps, rng)
        if kind == "local" and DECONVOLVE and t.row_mean:
            post, new = _deconvolved(t, mu, post, new, reps, rng)
        if PRIOR_NOISE:  # the prior mean's error, common to the groups that share it (prior_noise)
            new = new + prior_error_draws(smoother, reps, t.m, t.ok, B)
        new = np.where(t.ok[None, :], new, reps) * t.scale[None, :]
        _store(est, name, t.ok, post * t.scale, new)
    return used


@dataclass
class _Target:
    """One aggregate to shrink: group means ``m`` (estimates divided by ``scale``), the groups to
    shrink (``ok``), sample and population rows, the row grouping ``g`` (None for a COUNT), the noise
    variance ``v`` per group, its analytic part ``v_an`` (row means only) and the noise level
    ``v_noise`` that ``tau^2`` subtracts; ``row_mean``: ``m`` is a mean of rows (AVG, or a SUM of
    groups that are strata)."""

    scale: np.ndarray
    m: np.ndarray
    ok: np.ndarray
    n: np.ndarray
    N: np.ndarray
    g: object
    v: np.ndarray
    v_an: Optional[np.ndarray]
    v_noise: float
    row_mean: bool


def _shrink_target(est, rows, gcols: list, f: str, col, name: str, aligned: bool) -> Optional[_Target]:
    """The aggregate ``name`` as a shrinkage target, or None when it is not shrunk: not a SUM/AVG
    (nor a COUNT of groups finer than the strata), no replicates, fewer than three groups to
    shrink, or no within-group degrees of freedom."""
    # a COUNT is exact for groups that are strata; groups finer than the strata (a join's
    # dimension attribute in the key) estimate it as a total, and it is shrunk like one (a COUNT
    # under a WHERE of groups that are strata has its own prior: ``estimators.filtered_counts``)
    counted = f == "count" and not aligned and SHRINK_COUNTS
    if not ((f in ("sum", "avg") and col is not None) or counted) or name not in est.replicates:
        return None
    fr = est.frame
    N, n = fr["N"].to_numpy(float), fr["n"].to_numpy(float)
    scale = np.where(N > 0, N, 1.0) if f == "sum" and aligned else np.ones(len(fr))
    m = est.point(name) / scale
    ok = fr["exists"].to_numpy(bool) & ~fr["exact"].to_numpy(bool) & np.isfinite(m) & (n > 0)
    g, dof, sw2 = _within_variance(rows, gcols, col, counted)
    if ok.sum() < 3 or dof <= 0:
        return None
    row_mean = f == "avg" or aligned
    v, v_an, v_noise = _noise_variance(est.stderr(name) / scale, sw2, n, N, ok, row_mean)
    return _Target(scale=scale, m=m, ok=ok, n=n, N=N, g=g, v=v, v_an=v_an, v_noise=v_noise, row_mean=row_mean)


def _within_variance(rows, gcols: list, col, counted: bool) -> tuple:
    """(grouping of the value column by group, degrees of freedom, pooled within-group variance
    ``s_w^2``) of the sampled rows; a COUNT has no per-row values, so its noise is the replicates'
    alone (as for totals)."""
    if counted:
        return None, 1.0, 0.0
    g = rows.groupby(gcols, dropna=False)[col]
    cnt, var = g.count(), g.var(ddof=1)
    dof = float((cnt - 1).clip(lower=0).sum())
    if dof < WITHIN_MIN_DOF:  # (nearly) every group one sampled row: the spread of all rows bounds s_w^2
        v = rows[col].to_numpy(dtype=float)
        v = v[np.isfinite(v)]
        return g, float(max(v.size - 1, 0)), float(np.var(v, ddof=1)) if v.size > 1 else 0.0
    sw2 = float(((cnt - 1).clip(lower=0) * var.fillna(0)).sum()) / dof
    return g, dof, sw2


def _noise_variance(se: np.ndarray, sw2: float, n: np.ndarray, N: np.ndarray, ok: np.ndarray,
                    row_mean: bool) -> tuple:
    """(noise variance per group, its analytic part or None, the mean noise level ``tau^2``
    subtracts).  For row means the noise is the larger of the replicate variance ``se^2`` and
    ``s_w^2 (1 - n_g/N_g) / n_g``, and the level is the analytic part's mean alone (unbiased)."""
    v = se ** 2
    v_an, v_noise = None, None
    if row_mean:
        v_an = sw2 * np.clip(1.0 - n / np.where(N > 0, N, 1.0), 0.0, 1.0) / np.maximum(n, 1.0)
        v = np.maximum(v, v_an)
        v_noise = float(np.mean(v_an[ok]))
    v = np.nan_to_num(v)
    if v_noise is None:
        v_noise = float(np.mean(v[ok]))
    return v, v_an, v_noise


def _prior_mean(t: _Target, cov_stats: Optional[dict]) -> tuple:
    """(covariate used or None, prior mean per group, ``'bins'``/``'local'`` or None, smoother or
    None): the mean of all groups unless a covariate, or for row means the group size, explains the
    group means (``covariate_prior``)."""
    mu = np.full(len(t.m), float(np.mean(t.m[t.ok])))
    stats = dict(cov_stats or {})
    if SIZE_COVARIATE and t.row_mean and np.ptp(t.N[t.ok]) > 0:
        # a group's size is a property of the group: small routes and quiet hours run late more often
        stats[SIZE] = (np.where(t.N > 0, np.log(np.maximum(t.N, 1.0)), np.nan), 1.0, np.inf)
    if stats:
        got = covariate_prior(t.m, t.ok, stats, with_smoother=True)
        if got is not None:
            return got
    return None, mu, None, None


def _prior_variance(t: _Target, mu: np.ndarray, floor: Optional[float], prior: str, nu: float):
    """Prior variance ``tau^2`` (per group for ``size_prior_variance`` or the Student-t prior), or
    None when the residual spread leaves none."""
    vm = float(np.var(t.m[t.ok] - mu[t.ok]))
    share = variance_floor(int(t.ok.sum())) if floor is None else floor
    tau2 = max(vm - t.v_noise, share * vm)
    if tau2 <= 0:
        return None
    if PRIOR_BY_SIZE and t.row_mean:
        tau2 = size_prior_variance(t.m - mu, t.v_an, t.N, t.ok, share * vm, tau2)
    if prior == "t":
        lam = (nu + 1.0) / (nu + (t.m - mu) ** 2 / (tau2 + t.v))
        return tau2 / np.where(t.ok & np.isfinite(lam) & (lam > 0), lam, 1.0)
    if prior == "normal":
        return tau2
    raise ValueError(f"prior must be 'normal' or 't', got {prior!r}")


def _posterior(t: _Target, mu: np.ndarray, tau2_g, reps: np.ndarray, rng: np.random.Generator) -> tuple:
    """(shrinkage factor ``B``, posterior means, replicates): the replicates' deviations are scaled
    by ``sqrt(1 - B)`` and topped up with normal noise where narrower than the posterior."""
    B = np.where(t.ok, t.v / (t.v + tau2_g), 0.0)
    post = np.where(t.ok, mu + (1.0 - B) * (t.m - mu), t.m)
    dev = (reps - t.m[None, :]) * np.sqrt(1.0 - B)[None, :]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        rep_var = np.nan_to_num(np.nanvar(dev, axis=0))
    extra = np.sqrt(np.clip((1.0 - B) * t.v - rep_var, 0.0, None)) * t.ok
    new = post[None, :] + dev + extra[None, :] * rng.standard_normal(reps.shape)
    return B, post, new


def _deconvolved(t: _Target, mu: np.ndarray, post: np.ndarray, new: np.ndarray, reps: np.ndarray,
                 rng: np.random.Generator) -> tuple:
    """Posterior means and replicates around a local prior, nonparametric (``estimators.deconvolve``)
    for the groups whose noise the grid resolves, when the residuals are numerous and not normal."""
    res = residuals(t.g)  # the grouping of _within_variance, not a second one
    if len(res) >= MIN_RESIDUALS and non_normal(res):
        np_post, draws, fine = posterior_draws(t.m, mu, t.n, t.N, t.ok, res, reps.shape[0], rng)
        post, new = np.where(fine, np_post, post), np.where(fine[None, :], draws, new)
    return post, new


def _store(est, name: str, ok: np.ndarray, point: np.ndarray, new: np.ndarray) -> None:
    """Write the shrunk point estimates and replicates of the ``ok`` groups, with their standard
    errors and interval, into ``est``."""


    fr = est.frame
    est.replicates[name] = new
    fr[name] = np.where(ok, point, fr[name].to_numpy(float))
    a = (1.0 - est.confidence) / 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sd, (lo, hi) = np.nanstd(new, axis=0), nan_quantiles(new, [a, 1.0 - a])
    fr[name + "_se"] = np.where(ok, sd, fr[name + "_se"].to_numpy(float))
    fr[name + "_lo"] = np.where(ok, lo, fr[name + "_lo"].to_numpy(float))
    fr[name + "_hi"] = np.where(ok, hi, fr[name + "_hi"].to_numpy(float))


