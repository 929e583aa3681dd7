"""Smoothers of group means along one covariate for ``estimators.shrinkage``: bins cut where the
means jump (``split_bins``) and leave-one-out means of neighbours in the covariate's order
(``local_mean``)."""

from __future__ import annotations

from typing import Optional

import numpy as np
from scipy.special import fdtrc

from estimators.prior_noise import window_means


def split_bins(x: np.ndarray, m: np.ndarray, min_bin: int, max_bins: int, level: float) -> np.ndarray:
    """Bin of each value when ``x``-sorted values ``m`` are cut into contiguous runs by greedy binary
    splits (a one-dimensional regression tree): each step makes the cut, between two distinct ``x``,
    that most reduces the squared residuals of ``m`` around its run's mean, while both sides keep
    ``min_bin`` values and the cut's F statistic is significant at ``level`` divided by the number
    of cuts it was chosen from (Bonferroni).  Returns bin ids in ``x``'s order, 0-based.

    Why: quantile bins straddle jumps of the group means -- flights' hours at 5 a.m. fly 1,232 miles
    on average and at 6 a.m. 953, and a bin holding both gives each the other's mean; the
    tree puts its cuts at the jumps."""

    order = np.argsort(x, kind="stable")
    xs, ms = x[order], m[order]
    n = len(ms)
    c1 = np.concatenate([[0.0], np.cumsum(ms)])
    c2 = np.concatenate([[0.0], np.cumsum(ms * ms)])
    cut_ok = np.concatenate([[False], xs[1:] != xs[:-1]])

    def sse(lo, hi):
        return c2[hi] - c2[lo] - (c1[hi] - c1[lo]) ** 2 / (hi - lo)

    def best_cut(lo, hi):
        j = np.arange(lo + min_bin, hi - min_bin + 1)
        j = j[cut_ok[j]] if len(j) else j
        if not len(j):
            return None
        left = c2[j] - c2[lo] - (c1[j] - c1[lo]) ** 2 / (j - lo)
        right = c2[hi] - c2[j] - (c1[hi] - c1[j]) ** 2 / (hi - j)
        i = int(np.argmin(left + right))
        return sse(lo, hi) - left[i] - right[i], int(j[i]), len(j)

    runs = [(0, n)]
    cands = {(0, n): best_cut(0, n)}
    total = sse(0, n)
    while len(runs) < max_bins:
        live = [(r, c) for r, c in cands.items() if c is not None and c[0] > 0]
        if not live:
            break
        (lo, hi), (gain, j, tried) = max(live, key=lambda rc: rc[1][0])
        df = n - len(runs) - 1
        if df <= 0 or total - gain <= 0:
            break
        if fdtrc(1, df, gain / ((total - gain) / df)) * tried >= level:
            break
        total -= gain
        runs.remove((lo, hi))
        del cands[(lo, hi)]
        for r in ((lo, j), (j, hi)):
            runs.append(r)
            cands[r] = best_cut(*r)
    bins = np.empty(n, dtype=np.int64)
    for b, (lo, hi) in enumerate(sorted(runs)):
        bins[order[lo:hi]] = b
    return bins


def covariate_order(x: np.ndarray, has: np.ndarray, ties: tuple = ()) -> np.ndarray:
    """Indices of the groups in ``has`` in the order of ``x``; ties in ``x`` are ordered by the
    arrays of ``ties`` in turn (NaN last), then keep their order: the days of one month follow each
    other when ``x`` is the month and ``ties`` holds the day."""
    idx = np.flatnonzero(has)
    keys = [np.nan_to_num(t[idx], nan=np.inf) for t in reversed(ties)] + [x[idx]]
    return idx[np.lexsort(keys)]


def local_mean(x: np.ndarray, m: np.ndarray, has: np.ndarray, k: int, ties: tuple = (),
               order: Optional[np.ndarray] = None) -> np.ndarray:
    """Leave-one-out mean of ``m`` over the ``k`` groups on each side in the order of ``x``
    (``covariate_order``, or ``order`` when given), for the groups in ``has``; NaN elsewhere."""

    order = covariate_order(x, has, ties) if order is None else order
    return window_means(np.asarray(m, dtype=float)[None, :], k, order)[0]
