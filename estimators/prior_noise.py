"""The prior mean's own sampling error, shared by neighbouring groups, for the posterior replicates.

``shrinkage.shrink_groups`` pulls each group towards a prior mean ``mu_g`` fitted from the other
groups' noisy estimates (the mean of all, a covariate's bins, or the local mean of a few neighbours).
The posterior ``mu_g + (1 - B_g)(m_g - mu_g)`` treated ``mu_g`` as known.  A local mean of 2 x 5
neighbours carries a third of one group's noise, and that error is *common* to the neighbours whose
windows overlap: when it is high, all of them are high together.  Ignoring it made pass
probabilities look independent where they are not, and a fragment holding ten groups, each with a
small independent chance, looked likely to be in the sketch.  TPC-H SF1's suppliers pass
``avg(l_extendedprice) > c`` in runs along ``l_suppkey`` (a supplier's parts follow its key), and
sketches on ``l_suppkey`` were sized +12.5 % too large at the median (+9.1 % with this and
``size.JOINT_EXPECTATION``; nested counts by ship date: +33.6 % to +20.2 %; BENCHMARKS.md).

The fix draws the error per bootstrap replicate: the same smoother (bins or windows, as fitted)
applied to the replicate's deviations ``reps_b - m`` gives a draw of the prior mean's error with
the right spread and the right correlation between neighbours, and each group's posterior moves by
``B_g`` times it.  A smoother is a tuple: ``("bins", labels)`` (group means within labels >= 0),
``("local", k, order)`` (``group_smoothers.local_mean``'s leave-one-out windows), ``("second", first,
labels)`` (an additive second covariate's bins fitted to what the first leaves), or ``None`` (the
mean of all groups).  Pure numpy.
"""

from __future__ import annotations

from typing import Optional

import numpy as np


def _fill(out: np.ndarray, D: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Groups the smoother leaves out (NaN) take the mean of all groups, as the prior mean does."""
    overall = D[:, ok].mean(axis=1, keepdims=True) if ok.any() else np.zeros((D.shape[0], 1))
    return np.where(np.isnan(out), overall, out)


def _bins(D: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Mean of each row of ``D`` within every label >= 0; NaN for label -1."""
    sel = labels >= 0
    out = np.full(D.shape, np.nan)
    if not sel.any():
        return out
    lab = labels[sel]
    k = int(lab.max()) + 1
    cnt = np.maximum(np.bincount(lab, minlength=k), 1)
    Ds = D[:, sel]
    for r in range(D.shape[0]):  # one bincount per replicate: no (groups x bins) matrix
        out[r, sel] = (np.bincount(lab, weights=Ds[r], minlength=k) / cnt)[lab]
    return out


def window_means(D: np.ndarray, k: int, order: np.ndarray) -> np.ndarray:
    """Per row of ``D``, the leave-one-out mean of the ``k`` groups on each side in ``order``
    (``group_smoothers.local_mean`` is its one-row case); NaN for groups not in ``order``."""
    v = D[:, order]
    R, n = v.shape
    # prefix sums padded so that window [i-k, i+k] is a slice: cp[j] = c[clip(j - k, 0, n)]
    cp = np.zeros((R, n + 2 * k + 1))
    np.cumsum(v, axis=1, out=cp[:, k + 1:n + k + 1])
    cp[:, n + k + 1:] = cp[:, n + k:n + k + 1]
    i = np.arange(n)
    cnt = np.minimum(i + k + 1, n) - np.maximum(i - k, 0) - 1
    sums = cp[:, 2 * k + 1:2 * k + 1 + n] - cp[:, :n] - v
    out = np.full(D.shape, np.nan)
    out[:, order] = sums / np.maximum(cnt, 1)
    return out


def apply(smoother, D: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """The prior means the fitted ``smoother`` gives to each row of values ``D`` (replicates x
    groups); linear in ``D``, so applied to deviations it gives the prior mean's error."""
    if smoother is None:
        return _fill(np.full(D.shape, np.nan), D, ok)
    kind = smoother[0]
    if kind == "bins":
        return _fill(_bins(D, smoother[1]), D, ok)
    if kind == "local":
        return _fill(window_means(D, smoother[1], smoother[2]), D, ok)
    if kind == "second":
        first = apply(smoother[1], D, ok)
        return first + np.nan_to_num(_bins(D - first, smoother[2]), nan=0.0)
    raise ValueError(f"unknown smoother {kind!r}")


def prior_error_draws(smoother, reps: np.ndarray, m: np.ndarray, ok: np.ndarray,
                      B: Optional[np.ndarray] = None) -> np.ndarray:
    """Per replicate and group, ``B_g`` times the smoother applied to the replicate's deviations
    from the point estimates (groups outside ``ok`` count as zero deviation and get no shift)."""
    w = ok.astype(float) if B is None else np.where(ok, B, 0.0)
    D = np.nan_to_num(reps - m[None, :], copy=False)
    D[:, ~ok] = 0.0
    if smoother is None:  # the mean of all groups: one shared error per replicate
        overall = D[:, ok].mean(axis=1) if ok.any() else np.zeros(D.shape[0])
        return overall[:, None] * w[None, :]
    e = apply(smoother, D, ok)
    e *= w[None, :]
    return e
