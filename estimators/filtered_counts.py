r"""COUNT of a group under a WHERE that is not on its keys: a beta-binomial per stratum [INFERRED].

Why: with the sample stratified on the group keys, a WHERE on another column splits each stratum
into the rows that pass and those that do not; ``COUNT(*)`` of a group is then ``N_h c_h / n_h``
(``c_h`` of the ``n_h`` sampled rows pass).  With one or two sampled rows the share ``c/n`` is 0,
1/2 or 1, so every group the sample shows at all is estimated at half or all of its rows, and a
``HAVING count(*) > c`` that 2 % of the customers pass was given to 60 % of them (TPC-H,
``o_orderpriority = '1-URGENT'``, 1 of ~15 orders sampled).  Shrinking the shares of the groups
the sample shows is biased too: those are the strata with a passing sampled row, whose shares are
high by selection.

Model: the share ``s_h`` of stratum h's rows passing the WHERE is ``Beta(a, b)`` across strata,
fitted by the method of moments over *all* strata (those without a passing sampled row included):
mean ``mu = sum c / sum n``, intra-class correlation ``rho`` from the spread of ``c_h / n_h`` beyond
its binomial part.  Given the sample a stratum's share is ``Beta(a + c_h, b + n_h - c_h)`` and its
``K_h = N_h - n_h`` unsampled rows pass as a beta-binomial, so the group's count is ``c_h`` plus that:
point ``c_h + K_h (a + c_h) / (a + b + n_h)``, replicates ``c_h + Binomial(K_h, s)`` with ``s`` drawn
from the posterior, the prior refitted per replicate on a bootstrap resample of the strata
(``replicate_priors``).  A stratum sampled in full (``K_h = 0``) keeps its exact count; strata whose
rows all pass or all fail (a WHERE on the keys) make ``rho`` near 1, and the posterior then keeps
each stratum's own share.
"""

from __future__ import annotations

import numpy as np


def _moments(c: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) by the method of moments per row of ``c``/``n`` (shape (R, H)); NaN where undefined."""
    mu = c.sum(axis=1) / np.maximum(n.sum(axis=1), 1.0)
    x = c / np.maximum(n, 1.0)
    inv = np.mean(1.0 / np.maximum(n, 1.0), axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        spread = np.mean((x - mu[:, None]) ** 2, axis=1) / (mu * (1.0 - mu))
        rho = np.where(inv < 1.0, (spread - inv) / (1.0 - inv), 1.0)
    rho = np.clip(np.nan_to_num(rho, nan=1.0), 1e-6, 1.0 - 1e-6)
    ab = 1.0 / rho - 1.0
    ok = (mu > 0.0) & (mu < 1.0)
    return np.where(ok, mu * ab, np.nan), np.where(ok, (1.0 - mu) * ab, np.nan)


def beta_prior(c: np.ndarray, n: np.ndarray) -> tuple[float, float] | None:
    """(a, b) of the share's Beta prior from passing ``c`` of ``n`` sampled rows per stratum by the
    method of moments, or None when the shares say nothing (no passing or no failing row)."""
    c, n = np.asarray(c, dtype=float), np.asarray(n, dtype=float)
    if n.size < 2:
        return None
    a, b = _moments(c[None, :], n[None, :])
    return None if np.isnan(a[0]) else (float(a[0]), float(b[0]))


def replicate_priors(c: np.ndarray, n: np.ndarray, prior: tuple[float, float], B: int,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) per replicate, refitted on a bootstrap resample of the strata: the prior's own
    sampling error, shared by every group (without it 20 samples' intervals held the true size 14
    times; the refit moves every posterior together)."""
    H = c.size
    idx = rng.integers(0, H, (B, H))
    a, b = _moments(np.asarray(c, dtype=float)[idx], np.asarray(n, dtype=float)[idx])
    return np.where(np.isnan(a), prior[0], a), np.where(np.isnan(b), prior[1], b)


def filtered_count(c_g: np.ndarray, n_h: np.ndarray, N_h: np.ndarray, prior: tuple[float, float], B: int,
                   rng: np.random.Generator, priors: tuple[np.ndarray, np.ndarray] | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(point, (B, G) replicates) of the counts of groups with ``c_g`` passing sampled rows in
    strata of ``n_h`` sampled and ``N_h`` population rows (aligned per group), under ``prior`` (the
    point) and ``priors`` (per replicate, ``replicate_priors``; default: ``prior`` in every one)."""
    a, b = prior
    K = np.maximum(np.asarray(N_h, dtype=float) - n_h, 0.0)
    fail = np.maximum(n_h - c_g, 0.0)
    point = c_g + K * (a + c_g) / (a + b + n_h)
    ra, rb = priors if priors is not None else (np.full(B, a), np.full(B, b))
    s = rng.beta(ra[:, None] + c_g[None, :], rb[:, None] + fail[None, :])
    reps = c_g[None, :] + rng.binomial(np.broadcast_to(K.astype(np.int64), s.shape), s)
    return point, reps.astype(float)
