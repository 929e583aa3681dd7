"""Empirical-Bayes shrinkage of noisy per-group estimates (an [INFERRED] repair of seed 002's
estimator), with an optional covariate prior.

The paper classifies each group by its own bootstrap interval.  With a few sampled rows per group
the noise exceeds the true spread between groups, so upper-tail thresholds pass far too many groups
and sketches look larger than they are.  ``shrink_groups`` pulls every group towards a prior mean
(Fay-Herriot style: ``m_g ~ N(mu_g, tau^2)``, estimate ``~ N(m_g, v_g)``).

The prior mean may come from a covariate (``estimators.covariate_prior``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Optional

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from estimators.covariate_prior import covariate_prior, covariate_stats
from estimators.deconvolve import MIN_RESIDUALS, non_normal, posterior_draws, residuals
from estimators.prior_noise import prior_error_draws
from estimators.quantiles import nan_quantiles

SIZE_COVARIATE = True  # the group size (log N_g) as one more covariate of the prior mean
SIZE = "group size"
SIZE_FIT_STEPS = 3  # reweighted fits of size_prior_variance
PRIOR_BY_SIZE = True  # prior variance a + b / N_g (size_prior_variance)
DECONVOLVE = True    # around a local prior, a nonparametric spread and noise (estimators.deconvolve)
FLOOR_SE = 1.0       # default tau^2 floor: this many standard errors of its estimate (variance_floor)
PRIOR_NOISE = True   # replicates carry the prior mean's shared sampling error (estimators.prior_noise)
SHRINK_COUNTS = True  # COUNTs of groups finer than the strata are shrunk like totals
STRATUM, STRATUM_SIZE = "_stratum", "_n_g"  # a sample's stratum and its population (``estimate_groups``)
WITHIN_MIN_DOF = 30  # fewer within-group degrees of freedom: s_w^2 from the spread of all rows (an upper bound)


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
                  nu: float = 4.0, covariates: Optional[dict] = None, where: Optional[str] = None,
                  stratum_rows: Optional[pd.DataFrame] = None) -> dict:
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

    ``where`` (the WHERE indicator, one of ``gcols``) with ``stratum_rows`` (every sampled row of the
    strata, passing or not): a SUM of aligned groups is shrunk as the stratum's row mean of
    ``x * [WHERE]`` (``_stratum_target``), because the passing rows' count is estimated too: with
    ~2 of 4 sampled rows passing, the total's noise is mostly that count's, which shrinking the mean
    per passing row left in (TPC-H partsupp, ``WHERE ps_availqty > 5000 ... HAVING sum(ps_availqty *
    ps_supplycost) > c``: estimated 0.23 of the table against a real 0.002-0.007).
    """

    fr = est.frame
    rng = np.random.default_rng(est.seed + 7919)
    used: dict = {}
    cov_stats = None
    for (f, col), name in zip(est.aggs, est.names):
        t = _stratum_target(est, stratum_rows, gcols, where, f, col, name) if aligned and where else None
        t = t or _shrink_target(est, rows, gcols, f, col, name, aligned)
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
    zeros: int = 0  # groups observed with a mean of 0 and nothing to shrink (``_stratum_target``)


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


def _stratum_target(est, rows, gcols: list, where: str, f: str, col, name: str) -> Optional[_Target]:
    """A SUM of groups that are strata under a WHERE (groups ``keys + [where]``) as the row mean of
    ``x * [WHERE]`` over each stratum's sampled rows (``rows``: all of them, with the stratum and
    its size in ``STRATUM`` / ``STRATUM_SIZE``), scaled by the stratum's exact size; None when there
    is no such target (another aggregate, no stratum rows, no failing row, a key in two strata, too
    few groups).  Strata none of whose sampled rows pass are observations of a mean of 0 with no
    group to shrink: the prior is fitted to them too (``zeros``; partsupp: 1 in 16 strata, whose
    omission put the prior mean 7 % high and doubled the groups above a top-1 % threshold)."""
    if (f != "sum" or col is None or rows is None or where not in gcols or name not in est.replicates
            or STRATUM not in rows or STRATUM_SIZE not in rows):
        return None
    keys = [c for c in gcols if c != where]
    u = rows[where].fillna(False).to_numpy(bool)
    if u.all() or not u.any() or not keys:
        return None
    x = rows[col].to_numpy(dtype=float)
    per = pd.DataFrame({"h": rows[STRATUM].to_numpy(), "N": rows[STRATUM_SIZE].to_numpy(dtype=float),
                        "u": u, "y": np.where(u & np.isfinite(x), x, 0.0)})
    strata = per.groupby("h").agg(n=("y", "size"), N=("N", "first"), any_u=("u", "any"))
    home = rows.loc[u, keys].assign(h=per["h"].to_numpy()[u]).drop_duplicates()
    if home.duplicated(keys).any():  # a group spans strata: not aligned
        return None
    fr = est.frame
    passing = fr[where].fillna(False).to_numpy(bool)
    at = fr[keys].merge(home, on=keys, how="left")["h"].to_numpy()
    known = passing & pd.notna(at)
    n_s = np.where(known, strata["n"].reindex(at).to_numpy(dtype=float), 0.0)
    N_s = np.where(known, strata["N"].reindex(at).to_numpy(dtype=float), 0.0)
    scale = np.where(N_s > 0, N_s, 1.0)
    m = est.point(name) / scale
    ok = known & fr["exists"].to_numpy(bool) & ~fr["exact"].to_numpy(bool) & (n_s > 0) & np.isfinite(m)
    g, dof, sw2 = _within_variance(per, ["h"], "y", False)
    if ok.sum() < 3 or dof <= 0:
        return None
    v, v_an, v_noise = _noise_variance(est.stderr(name) / scale, sw2, n_s, N_s, ok, True)
    empty = strata[~strata["any_u"] & (strata["n"] < strata["N"])]
    z_v = sw2 * (1.0 - empty["n"] / empty["N"]) / empty["n"]
    zeros = len(empty)
    v_noise = (v_noise * ok.sum() + float(z_v.sum())) / (ok.sum() + zeros)
    return _Target(scale=scale, m=m, ok=ok, n=n_s, N=N_s, g=g, v=v, v_an=v_an, v_noise=v_noise, row_mean=True,
                   zeros=zeros)


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
    mu = np.full(len(t.m), float(np.sum(t.m[t.ok])) / (t.ok.sum() + t.zeros))
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
    r = t.m[t.ok] - mu[t.ok]
    mu0 = float(np.mean(mu[t.ok]))  # the zeros' residual is -mu (a covariate prior leaves them out: 0)
    vm = float((np.sum(r ** 2) + t.zeros * mu0 ** 2) / (r.size + t.zeros)) if t.zeros and np.ptp(mu[t.ok]) == 0 \
        else float(np.var(r))
    share = variance_floor(int(t.ok.sum()) + t.zeros) if floor is None else floor
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


