"""Which fragments the passing groups cover, per replicate, and the size intervals over them.

``estimators.sketch_size`` maps each group to the fragments its rows touch (certain cells, and the
window cells the unseen-row model spreads its unseen rows over); this module accumulates, block of
groups by block, the log-probability that no passing group touches a fragment (expected and per
replicate), stops once the sketch covers the table, and turns the per-replicate coverage into
percentile intervals (replicates), the unseen-row model's bounds, or a normal interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from estimators.clt import z_value
from estimators.fragment_cells import CellModel, block_bounds, block_cells


SATURATED = -40.0  # -expm1(x) rounds to exactly 1.0 in float64 for x below about -37
SETTLE_EPS = 1e-3  # stop adding groups once the sketch covers >= 1 - this share in expectation and every replicate


def covers_all(log_miss, L, C, sizes, total: float) -> bool:
    """Whether the groups read so far already cover at least ``1 - SETTLE_EPS`` of the rows in
    expectation and in every replicate.  Later groups only add coverage, so the final size lies in
    ``[current, total]``: within 0.1 %, and such a sketch can never pay for itself.  Stopping there
    spares the candidates that cover everything but not to the last float bit (flights: ``flight``
    for hourly groups took 0.9 s of a 1.2 s estimation to end at 0.9999993)."""
    need = (1.0 - SETTLE_EPS) * total
    P = -np.expm1(log_miss)
    if float(np.where(np.isneginf(log_miss), 1.0, P) @ sizes) < need:
        return False
    if L is None:
        return True
    Pb = np.where(C > 0, 1.0, -np.expm1(L))
    return bool((Pb @ sizes >= need).all())


DENSE_SHARE = 0.1  # window cells above this share of a block's (group, fragment) cells: BLAS beats sparse


@dataclass
class Coverage:
    """Per fragment the log-probability that no passing group touches it (``log_miss``) and, with
    replicates, per (replicate, fragment) the log miss over the uncertain cells (``L``) and the number
    of certain cells of passing groups (``C``); ``settled`` if the blocks stopped at ``SETTLE_EPS``."""

    log_miss: np.ndarray
    L: np.ndarray | None
    C: np.ndarray | None
    settled: bool = False


def coverage(p, pass_replicates, gl, cells: CellModel, reach, sizes, total, chunk_cells) -> Coverage:
    """Accumulate the coverage of the groups ``gl`` block by block (a small first block makes the
    stopping checks pay off for candidates whose sketch covers every fragment anyway).

    Once every reachable fragment's miss log-probability (and every replicate's) is below
    ``SATURATED``, P and Pb are exactly 1.0 in float64 and later groups cannot change them (they only
    add <= 0 to ``log_miss`` / ``L`` and >= 0 to ``C``), so the blocks stop; they also stop once the
    coverage is within ``SETTLE_EPS`` of the table (``covers_all``).
    """
    F = cells.F
    reps = pass_replicates is not None
    cov = Coverage(np.zeros(F), np.zeros((pass_replicates.shape[0], F)) if reps else None,
                    np.zeros((pass_replicates.shape[0], F)) if reps else None)
    bounds = block_bounds(gl.shape[0], chunk_cells, F)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        if lo and (cov.log_miss[reach] < SATURATED).all() and (
                not reps or ((cov.L[:, reach] < SATURATED) | (cov.C[:, reach] > 0)).all()):
            break
        if lo and covers_all(cov.log_miss, cov.L, cov.C, sizes, total):
            cov.settled = True
            break
        add_block(cov, gl[lo:hi], p, pass_replicates, cells)
    return cov


def add_block(cov: Coverage, chunk: np.ndarray, p: np.ndarray, pass_replicates, cells: CellModel) -> None:
    """Add one block of groups to the coverage: their certain and window cells weighted by the pass
    probabilities, and per replicate by whether the group passes there."""
    F, nc = cells.F, chunk.shape[0]
    crow, cfrag, wrow, wfrag, wt = block_cells(chunk, cells)
    pc = p[chunk]
    with np.errstate(divide="ignore"):
        cov.log_miss += np.bincount(cfrag, np.log1p(-np.minimum(pc[crow], 1.0)), minlength=F)
        lw = np.log1p(-wt)
        cov.log_miss += np.bincount(wfrag, np.log1p(-np.minimum(pc[wrow] * wt, 1.0)), minlength=F)
    if pass_replicates is None:
        return
    Rt = np.ascontiguousarray(pass_replicates[:, chunk].T, dtype=float)  # (groups, B)
    cov.C += (sparse.csr_matrix((np.ones(crow.shape[0]), (crow, cfrag)), shape=(nc, F)).T @ Rt).T
    if wrow.shape[0] > DENSE_SHARE * nc * F:
        Lt = np.zeros((nc, F))
        Lt[wrow, wfrag] = lw
        cov.L += Rt.T @ Lt
    elif wrow.shape[0]:
        cov.L += (sparse.csr_matrix((lw, (wrow, wfrag)), shape=(nc, F)).T @ Rt).T


def miss_to_probability(log_miss: np.ndarray) -> np.ndarray:
    """Per fragment the probability that some passing group touches it."""
    P = -np.expm1(log_miss)
    return np.clip(np.where(np.isneginf(log_miss), 1.0, P), 0.0, 1.0)


def replicate_interval(Pb: np.ndarray, sizes: np.ndarray, confidence: float, seed: int) -> tuple[float, float]:
    """Percentile interval of the covered rows when each replicate's fragments are drawn as
    independent Bernoullis of their probabilities ``Pb``."""
    rng = np.random.default_rng(seed)
    covered = (rng.random(Pb.shape) < Pb).astype(float) @ sizes
    a_ = (1.0 - confidence) / 2.0
    # the replicates' own values, not an interpolation between two of them: 50 replicates of which a
    # few leave one fragment out put the upper end a row below a sketch that covers every row
    return float(np.quantile(covered, a_, method="lower")), float(np.quantile(covered, 1.0 - a_, method="higher"))


def normal_interval(P: np.ndarray, rows_exp: float, sizes: np.ndarray, total: float,
                     confidence: float) -> tuple[float, float]:
    """Poisson-binomial normal interval of the covered rows, fragments taken as independent."""
    z = z_value(confidence)
    sd = float(np.sqrt(np.sum(sizes ** 2 * P * (1.0 - P))))
    return max(0.0, rows_exp - z * sd), min(total, rows_exp + z * sd)


def model_bounds(C: np.ndarray, L: np.ndarray, sizes: np.ndarray, confidence: float) -> tuple[float, float]:
    """Bounds of the unseen-row model over the replicates' passing sets (``MODEL_BOUNDS``): the rows
    of the fragments the passing groups' sampled rows touch (no unseen row anywhere else: alpha =
    0), and of those their windows reach too (an unseen row in every window fragment); the lower
    and upper replicate quantiles at ``confidence``.  A window cell of a passing group is a fragment
    whose log miss probability ``L`` is below 0, so both come from the coverage already summed."""
    a_ = (1.0 - confidence) / 2.0
    lo = (C > 0).astype(float) @ sizes
    hi = ((C > 0) | (L < 0)).astype(float) @ sizes
    return float(np.quantile(lo, a_, method="lower")), float(np.quantile(hi, 1.0 - a_, method="higher"))
