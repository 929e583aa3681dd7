"""Haas (1997) CLT confidence intervals for SUM/COUNT/AVG and normal pass probabilities (digest §2.10).

Haas's sample moments (digest formulas (2)-(4)), for a uniform sample ``t_1..t_n``:

* ``T_n(f)          = 1/n     * sum_i f(t_i)``
* ``T_{n,q}(f)      = 1/(n-1) * sum_i (f(t_i) - T_n(f))^q``
* ``T_{n,q,r}(f,h)  = 1/(n-1) * sum_i (f(t_i) - T_n(f))^q (h(t_i) - T_n(h))^r``

and, with ``u`` the predicate indicator and ``v`` the aggregated value (formulas (5)-(7)):

* SUM:   ``Y = T_n(u v)``,            ``s^2 = T_{n,2}(u v)``
* COUNT: ``Y = T_n(u)``,              ``s^2 = T_{n,2}(u)``
* AVG:   ``Y = T_n(u v) / T_n(u)``,   ``s^2 = (T_{n,2}(uv) - 2 R T_{n,1,1}(uv,u) + R^2 T_{n,2}(u)) / T_n(u)^2``,
  ``R = Y``

Interval: ``Y +- z * s / sqrt(n)`` with ``z`` the ``(1+confidence)/2`` normal quantile.

Corrections and choices [EXTERNAL/INFERRED]:

* SUM and COUNT are scaled by the population size ``N`` (point ``N*Y``, half-width ``N*z*s/sqrt(n)``);
  the paper omits the factor (digest §2.10).
* Finite-population correction ``(1 - n/N)`` on the variance, on by default (``fpc=True``): rows are
  drawn without replacement, and with it a fully sampled group has variance exactly 0.
* ``n = 1``: ``T_{n,2}`` is undefined (``n-1 = 0``).  We set the variance to 0, i.e. the group is
  treated as known at its point estimate (digest C6 edge case); pass probabilities are then 0/1.
  This understates the uncertainty of tiny samples -- the paper's example (one row per group) relies
  on exactly this behaviour.
* Stratified / domain form (``stratified_clt``): a group may span several strata (e.g. a uniform
  sample is one stratum holding all groups).  Its estimate is ``sum_h N_h/n_h * sum_{t in s_h} y_g(t)``
  with ``y_g = u v [t in g]``; the variance is ``sum_h N_h^2 (1-f_h) Var_h(y_g) / n_h``, and for AVG
  the linearised variable ``z = y_g - R u_g``.  With one stratum per group this is exactly Haas's
  formulas above (tested).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri

from estimators.bootstrap import normalize_agg, stratum_sizes

OPS = (">", ">=", "<", "<=", "=", "!=", "between")
_OP_ALIASES = {"==": "=", "<>": "!=", "gt": ">", "ge": ">=", "lt": "<", "le": "<=", "eq": "=", "ne": "!="}


def normalize_op(op: str) -> str:
    """Canonical comparison operator (``==`` -> ``=``, ``<>`` -> ``!=``); ``ValueError`` if unknown."""
    o = str(op).strip().lower()
    o = _OP_ALIASES.get(o, o)
    if o not in OPS:
        raise ValueError(f"unsupported comparison {op!r}; expected one of {OPS}")
    return o


def compare(x: np.ndarray, op: str, value: float, high: float | None = None) -> np.ndarray:
    """Exact SQL comparison ``x op value`` element-wise; NaN (SQL NULL) never satisfies it.

    ``between`` is SQL's inclusive ``value <= x <= high``.
    """
    op = normalize_op(op)
    x = np.asarray(x, dtype=float)
    with np.errstate(invalid="ignore"):
        if op == ">":
            r = x > value
        elif op == ">=":
            r = x >= value
        elif op == "<":
            r = x < value
        elif op == "<=":
            r = x <= value
        elif op == "=":
            r = x == value
        elif op == "!=":
            r = x != value
        else:
            if high is None:
                raise ValueError("'between' needs a high bound")
            r = (x >= value) & (x <= high)
    return r & ~np.isnan(x)


def z_value(confidence: float) -> float:
    """Two-sided normal quantile ``z`` with ``P(|Z| <= z) = confidence``.

    >>> round(z_value(0.95), 3), round(z_value(0.99), 3)
    (1.96, 2.576)
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return float(ndtri((1.0 + confidence) / 2.0))


# --- Haas moments (formulas (2)-(4)) -------------------------------------------------------------

def T_n(f: np.ndarray) -> float:
    """Sample mean ``T_n(f)`` (Haas (2))."""
    return float(np.mean(np.asarray(f, dtype=float)))


def T_nq(f: np.ndarray, q: int = 2) -> float:
    """Sample central moment ``T_{n,q}(f)`` with the ``n-1`` divisor (Haas (3)); 0 when n = 1."""
    f = np.asarray(f, dtype=float)
    if f.shape[0] < 2:
        return 0.0
    return float(np.sum((f - f.mean()) ** q) / (f.shape[0] - 1))


def T_nqr(f: np.ndarray, h: np.ndarray, q: int = 1, r: int = 1) -> float:
    """Sample mixed central moment ``T_{n,q,r}(f,h)`` (Haas (4)); q=r=1 is the covariance."""
    f = np.asarray(f, dtype=float)
    h = np.asarray(h, dtype=float)
    if f.shape[0] < 2:
        return 0.0
    return float(np.sum((f - f.mean()) ** q * (h - h.mean()) ** r) / (f.shape[0] - 1))


@dataclass(frozen=True)
class CLTEstimate:
    """Point estimate, variance, standard error and two-sided interval of one aggregate."""

    point: float
    variance: float
    stderr: float
    lo: float
    hi: float
    n: int
    N: float
    confidence: float


def clt_estimate(values: np.ndarray, N: float, agg: str, mask: np.ndarray | None = None,
                 confidence: float = 0.95, fpc: bool = True) -> CLTEstimate:
    """Haas CLT estimate of SUM/COUNT/AVG for one group from its uniform sample ``values``.

    ``N`` is the group's population size; ``mask`` an optional WHERE indicator; NaN values are
    NULL (excluded, as in SQL).  Implements formulas (5)-(7) literally, scaled by ``N`` for
    SUM/COUNT, with the optional finite-population correction.  Used as the reference for the
    vectorised ``stratified_clt``.
    """
    func = normalize_agg(agg)
    if func not in ("sum", "count", "avg"):
        raise ValueError("the CLT estimator covers sum, count and avg (min/max use the bootstrap)")
    v = np.asarray(values, dtype=float)
    n = v.shape[0]
    if n == 0:
        raise ValueError("clt_estimate needs at least one sampled value")
    if N < n:
        raise ValueError(f"population size N={N} is smaller than the sample size {n}")
    u = ~np.isnan(v)
    if mask is not None:
        u &= np.asarray(mask, dtype=bool)
    u = u.astype(float)
    uv = np.where(u > 0, v, 0.0)
    corr = (1.0 - n / N) if fpc else (0.0 if n >= N else 1.0)
    if func == "sum":
        point = N * T_n(uv) if u.sum() > 0 else float("nan")
        var = N * N * T_nq(uv, 2) / n * corr
    elif func == "count":
        point = N * T_n(u)
        var = N * N * T_nq(u, 2) / n * corr
    else:
        tu = T_n(u)
        if tu == 0:
            point, var = float("nan"), float("nan")
        else:
            R = T_n(uv) / tu
            s2 = (T_nq(uv, 2) - 2 * R * T_nqr(uv, u, 1, 1) + R * R * T_nq(u, 2)) / (tu * tu)
            point, var = R, s2 / n * corr
    var = max(var, 0.0) if not np.isnan(var) else var
    se = float(np.sqrt(var)) if not np.isnan(var) else float("nan")
    z = z_value(confidence)
    lo, hi = point - z * se, point + z * se
    if func == "count":
        lo = max(lo, 0.0)
    return CLTEstimate(point=float(point), variance=float(var), stderr=se, lo=float(lo), hi=float(hi),
                       n=n, N=float(N), confidence=confidence)


def stratified_clt(agg: str, stratum_idx: np.ndarray, group_idx: np.ndarray, n_groups: int,
                   N_h: np.ndarray, y: np.ndarray, m: np.ndarray, fpc: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised stratified Haas estimator: per-group ``(point, variance)`` arrays, shape ``(G,)``.

    ``stratum_idx``/``group_idx`` are row codes, ``N_h`` the population size per stratum code, ``y``
    the row values with non-contributing rows set to 0 and ``m`` the contributing-row mask (WHERE and
    non-NULL).  Works on (stratum, group) cells, so cost is linear in the sample size; a stratum
    with one sampled row contributes zero variance (see module docstring), a fully sampled stratum
    contributes none either.
    """
    func = normalize_agg(agg)
    if func not in ("sum", "count", "avg"):
        raise ValueError("the CLT estimator covers sum, count and avg (min/max use the bootstrap)")
    s = np.asarray(stratum_idx, dtype=np.int64)
    g = np.asarray(group_idx, dtype=np.int64)
    G = int(n_groups)
    n_h, N_h = stratum_sizes(s, N_h)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(N_h > 0, n_h / N_h, 1.0)
        factor = N_h ** 2 * (np.clip(1.0 - f, 0.0, 1.0) if fpc else 1.0) / np.maximum(n_h, 1.0)
        w_h = N_h / np.maximum(n_h, 1.0)
    factor = np.where(f >= 1.0, 0.0, factor)
    uniq, inv = np.unique(s * G + g, return_inverse=True)
    ch, cg = uniq // G, uniq % G
    mm = np.asarray(m, dtype=float)
    ym = np.asarray(y, dtype=float) * mm
    Sm = np.bincount(inv, weights=mm, minlength=uniq.shape[0])
    Sy = np.bincount(inv, weights=ym, minlength=uniq.shape[0])
    Sy2 = np.bincount(inv, weights=ym * ym, minlength=uniq.shape[0])
    nh = n_h[ch]

    def cell_var(S1: np.ndarray, S2: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(nh >= 2, (S2 - S1 * S1 / nh) / np.maximum(nh - 1, 1.0), 0.0)
        return np.clip(v, 0.0, None)

    X = np.bincount(cg, weights=w_h[ch] * Sm, minlength=G)
    Y = np.bincount(cg, weights=w_h[ch] * Sy, minlength=G)
    if func == "count":
        return X, np.bincount(cg, weights=factor[ch] * cell_var(Sm, Sm), minlength=G)
    if func == "sum":
        var = np.bincount(cg, weights=factor[ch] * cell_var(Sy, Sy2), minlength=G)
        return np.where(X > 0, Y, np.nan), np.where(X > 0, var, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        R = np.where(X > 0, Y / np.where(X > 0, X, 1.0), np.nan)
        Rc = np.nan_to_num(R[cg])
        Sz = Sy - Rc * Sm
        Sz2 = Sy2 - 2 * Rc * Sy + Rc * Rc * Sm
        var = np.bincount(cg, weights=factor[ch] * cell_var(Sz, Sz2), minlength=G)
        var = np.where(X > 0, var / np.where(X > 0, X, 1.0) ** 2, np.nan)
    return R, var


def normal_pass_probability(mean: np.ndarray, stderr: np.ndarray, op: str, value: float,
                            high: float | None = None) -> np.ndarray:
    """``P(Y op value)`` for ``Y ~ Normal(mean, stderr^2)``, element-wise.

    Continuous approximation: ``>`` and ``>=`` (``<``/``<=``) coincide, ``=`` has probability 0 and
    ``!=`` probability 1.  Where ``stderr`` is 0 or NaN the estimate is taken as exact and the
    comparison is evaluated on ``mean`` with SQL semantics, so exact groups give 0/1.  A NaN mean
    (group absent / aggregate NULL) gives 0.  ``between`` is inclusive on ``[value, high]``.
    """
    op = normalize_op(op)
    mean = np.asarray(mean, dtype=float)
    se = np.broadcast_to(np.asarray(stderr, dtype=float), mean.shape)
    det = ~(se > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        sd = np.where(det, 1.0, se)
        if op in (">", ">="):
            p = ndtr((mean - value) / sd)
        elif op in ("<", "<="):
            p = ndtr((value - mean) / sd)
        elif op == "=":
            p = np.zeros_like(mean)
        elif op == "!=":
            p = np.ones_like(mean)
        else:
            if high is None:
                raise ValueError("'between' needs a high bound")
            p = np.clip(ndtr((high - mean) / sd) - ndtr((value - mean) / sd), 0.0, 1.0)
    p = np.where(det, compare(mean, op, value, high).astype(float), p)
    return np.where(np.isnan(mean), 0.0, p)


def normal_interval_probability(mean: np.ndarray, stderr: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``P(lo < Y < hi)`` for ``Y ~ Normal(mean, stderr^2)`` (bounds may be infinite); 0 if NaN mean.

    Callers handle ``stderr == 0`` cells themselves (strictness of the bounds matters there).
    """
    mean = np.asarray(mean, dtype=float)
    se = np.broadcast_to(np.asarray(stderr, dtype=float), mean.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        sd = np.where(se > 0, se, 1.0)
        p = np.clip(ndtr((hi - mean) / sd) - ndtr((lo - mean) / sd), 0.0, 1.0)
    return np.where(np.isnan(mean), 0.0, p)
