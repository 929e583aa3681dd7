"""Column-wise quantiles of replicate matrices that may hold NaN, without numpy's per-column loop.

``np.nanquantile(x, qs, axis=0)`` falls back to ``apply_along_axis`` (one Python call per column) as
soon as any NaN is present; with 50 replicates x 10,000 groups that is ~0.45 s per call, the largest
single cost of a cached estimation at TPC-H SF1.  ``nan_quantiles`` sorts once (NaN sorts last) and
interpolates like numpy's default ``linear`` method, so results are identical.
"""

from __future__ import annotations

import numpy as np


def nan_quantiles(x: np.ndarray, qs, axis: int = 0) -> np.ndarray:
    """``np.nanquantile(x, qs, axis)`` for 2-D ``x``: shape ``(len(qs), other axis)``; all-NaN -> NaN.

    >>> import numpy as np
    >>> nan_quantiles(np.array([[1.0, np.nan], [2.0, np.nan], [3.0, 5.0]]), [0.5])
    array([[2., 5.]])"""
    x = np.asarray(x, dtype=float)
    if x.ndim != 2:
        raise ValueError("nan_quantiles expects a 2-D array")
    if axis == 1:
        x = x.T
    qs = np.atleast_1d(np.asarray(qs, dtype=float))
    s = np.sort(x, axis=0)
    k = np.sum(~np.isnan(x), axis=0)
    out = np.full((qs.shape[0], x.shape[1]), np.nan)
    ok = k > 0
    if not ok.any():
        return out
    cols = np.flatnonzero(ok)
    kk = k[ok].astype(float)
    for i, q in enumerate(qs):
        h = (kk - 1.0) * q
        lo = np.floor(h).astype(np.int64)
        hi = np.minimum(lo + 1, k[ok] - 1)
        a, b = s[lo, cols], s[hi, cols]
        frac = h - lo
        # numpy's linear method: a + (b - a) * frac, evaluated as in numpy's _lerp for equal results
        v = a + (b - a) * frac
        v = np.where(frac >= 0.5, b - (b - a) * (1.0 - frac), v)
        out[i, cols] = v
    return out
