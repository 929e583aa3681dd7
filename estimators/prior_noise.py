"""The prior mean's own sampling error, shared by neighbouring groups, for the posterior replicates.

``shrinkage.shrink_groups`` pulls each group towards a prior mean ``mu_g`` fitted from the other
groups' noisy estimates (the mean of all, a covariate's bins, or the local mean of a few neighbours).
The posterior ``mu_g + (1 - B_g)(m_g - mu_g)`` treated ``mu_g`` as known.  A local mean of 2 x 5
neighbours carries a third of one group's noise, and that error is *common* to the neighbours whose
windows overlap: when it is high, all of them are high together.  Ignoring it made pass
probabilities look independent where they are not, and a fragment holding ten groups, each with a
small independent chance, looked likely to be in the sketch.  TPC-H SF1's suppliers pass
``avg(l_extendedprice) > c`` in runs along ``l_suppkey`` (a supplier's parts follow its key), and
sketches on ``l_suppkey`` were sized ~15 % too large (BENCHMARKS.md, session 34).

The fix draws the error per bootstrap replicate: the same smoother (bins or windows, as fitted)
applied to the replicate's deviations ``reps_b - m`` gives a draw of the prior mean's error with
the right spread and the right correlation between neighbours, and each group's posterior moves by
``B_g`` times it.  A smoother is a tuple: ``("bins", labels)`` (group means within labels >= 0),
``("local", k, order)`` (``shrinkage.local_mean``'s leave-one-out windows), ``("second", first,
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
    onehot = np.zeros((len(lab), k))
    onehot[np.arange(len(lab)), lab] = 1.0
    means = (D[:, sel] @ onehot) / np.maximum(onehot.sum(axis=0), 1.0)
    out[:, sel] = means[:, lab]
    return out


def _local(D: np.ndarray, k: int, order: np.ndarray) -> np.ndarray:
    """``shrinkage.local_mean`` row by row: leave-one-out means of ``k`` neighbours each side."""
    v = D[:, order]
    c = np.concatenate([np.zeros((D.shape[0], 1)), np.cumsum(v, axis=1)], axis=1)
    i = np.arange(v.shape[1])
    lo, hi = np.maximum(i - k, 0), np.minimum(i + k + 1, v.shape[1])
    out = np.full(D.shape, np.nan)
    out[:, order] = (c[:, hi] - c[:, lo] - v) / np.maximum(hi - lo - 1, 1)
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
        return _fill(_local(D, smoother[1], smoother[2]), D, ok)
    if kind == "second":
        first = apply(smoother[1], D, ok)
        return first + np.nan_to_num(_bins(D - first, smoother[2]), nan=0.0)
    raise ValueError(f"unknown smoother {kind!r}")


def prior_error_draws(smoother, reps: np.ndarray, m: np.ndarray, ok: np.ndarray,
                      B: Optional[np.ndarray] = None) -> np.ndarray:
    """Per replicate and group, ``B_g`` times the smoother applied to the replicate's deviations
    from the point estimates (groups outside ``ok`` count as zero deviation and get no shift)."""
    D = np.where(ok[None, :], np.nan_to_num(reps - m[None, :]), 0.0)
    e = apply(smoother, D, ok)
    shift = e if B is None else e * B[None, :]
    return np.where(ok[None, :], shift, 0.0)
