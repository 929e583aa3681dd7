"""The ends of a sketch-size interval beyond the replicates' percentiles: what the sample cannot
prove (``point_margin``, ``undecided_margin``) and what a biased pass set hides (``confident_rows``).

``prep`` is ``sketch_size._prepare``'s threshold-free part: the certain (group, fragment) cells
``cert_g`` / ``cert_r`` the sample shows.
"""

from __future__ import annotations

import numpy as np


def _certain_fragments(passing: np.ndarray, cert_g: np.ndarray, cert_r: np.ndarray) -> np.ndarray:
    """The fragments the sampled rows of the ``passing`` groups touch."""
    return np.unique(cert_r[passing[cert_g]]) if cert_g.size else np.zeros(0, dtype=np.int64)


def confident_rows(p: np.ndarray, prep: dict, sizes: np.ndarray, confidence: float) -> float:
    """Rows of the fragments the sampled rows of groups passing with probability at least
    ``1 - (1 - confidence) / 2`` touch: what the sketch holds unless a confident group fails.  The
    replicates' lower end alone sat above the real size where noise lifts many groups over an upper
    tail threshold in every replicate (5 of 1,000 suppliers pass a product sum; each replicate's
    pass set held 1.6 % of partsupp against a real 0.5 %)."""
    sure = p >= 1.0 - (1.0 - confidence) / 2.0
    return float(sizes[_certain_fragments(sure, prep["cert_g"], prep["cert_r"])].sum())


def point_margin(est, p: np.ndarray, dec: np.ndarray, prep: dict, sizes: np.ndarray, total: float,
                 B: int) -> None:
    """An interval of width zero is a point only when the size is exact.  At the whole table it is
    exact when the sample proves it: each fragment holds a sampled row of a group whose pass is
    decided (``having.decided``; none is for a top-k); otherwise the replicates only agree, and the
    lower end drops the rule-of-three share (``3 / B``) of the rows no decided group proves (33 of
    42 intervals of width zero on the advice harness's shape families were such whole-table
    sketches).  Below the whole table the model placed every unseen row inside fragments already
    covered (an hourly group's rows in its hour of departure times), which the sample cannot prove
    either: the upper end adds that share of the rows outside the sketch."""
    if est.ci_hi - est.ci_lo > 0:
        return
    share = min(1.0, 3.0 / B if B > 0 else 0.05)
    if est.ci_lo < total:
        est.ci_hi = min(total, float(np.ceil(est.ci_hi + share * (total - est.ci_hi))))
        return
    proven = np.zeros(sizes.shape[0], dtype=bool)
    cg, cr = prep["cert_g"], prep["cert_r"]
    proven[cr[(dec & (p >= 1.0))[cg]]] = True
    open_rows = float(sizes[~proven].sum())
    if open_rows <= 0:
        est.exact = True
        return
    est.ci_lo = max(0.0, float(np.floor(total - share * open_rows)))


def undecided_margin(est, p: np.ndarray, dec: np.ndarray, prep: dict, sizes: np.ndarray,
                     total: float, B: int) -> None:
    """Widen the interval for groups whose pass the replicates agree on although sampling decides
    it (``having.decided``): B replicates that all fail a group bound its pass probability by
    ``3 / B`` (the rule of three at 95 %), not by 0, and mirrored for those that all pass.  The
    upper end adds that share of the rows only such never-passing groups' sampled rows reach beyond
    the fragments certainly covered; the lower end drops that share of the rows that only
    always-passing undecided groups hold.  Without it an interval of width zero was reported for a
    ``max(dep_delay) > 818`` no replicate passed, against a real 1.7 %."""
    if B <= 0 or prep["cert_g"].size == 0:
        return
    share = min(1.0, 3.0 / B)
    cg, cr = prep["cert_g"], prep["cert_r"]
    F = sizes.shape[0]
    never, always = ~dec & (p <= 0.0), ~dec & (p >= 1.0)
    P = np.clip(est.fragment_probability.to_numpy(dtype=float), 0.0, 1.0)
    reach = np.zeros(F, dtype=bool)
    reach[cr[never[cg]]] = True
    extra_hi = share * float(sizes[reach & (P < 1.0)].sum())
    others = np.zeros(F, dtype=bool)
    others[cr[(p > 0.0)[cg] & ~always[cg]]] = True
    held = np.zeros(F, dtype=bool)
    held[cr[always[cg]]] = True
    extra_lo = share * float(sizes[held & ~others].sum())
    est.ci_hi = min(total, float(np.ceil(est.ci_hi + extra_hi)))
    est.ci_lo = max(0.0, float(np.floor(est.ci_lo - extra_lo)))
