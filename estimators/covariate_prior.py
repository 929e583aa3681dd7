"""The prior mean of empirical-Bayes shrinkage (``estimators.shrinkage``) from a covariate.

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
for flights' hours).  And the prior variance may grow as groups shrink (``shrinkage.size_prior_variance``): a
small group's true mean is an average of few rows, so it lies further from any prior mean; one
``tau^2`` for all had shrunk flights' rare late routes below every threshold (34 routes truly above
``avg(dep_delay) > 20.8``, 1.7 expected; 16.8 with it).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import fdtrc

from estimators.group_smoothers import covariate_order, local_mean, split_bins

COV_MIN_BIN = 30     # groups per covariate bin
COV_MAX_BINS = 20    # bins per covariate
COV_ICC = 0.9        # least intra-class correlation of a covariate (a property of the group)
COV_P = 1e-3         # F-test level for "the bins differ"
COV_SPLITS = 64     # most bins cut at the jumps of the group means (split_bins; 0: quantile bins only)
COV_SECOND = True    # a second covariate's split bins on what the first leaves (an additive prior)
COV_LOCAL_K = (2, 5, 15)  # neighbours on each side for a local prior (empty: bins only)
COV_LOCAL_SE = 2.0   # standard errors of a variance ratio a local prior must gain
COV_LOCAL_SPREAD = 0.5  # a local prior's covariate: within-group sd of the rows' fragment ids


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
