"""Top-k queries: probability that a group is among the top k, and the resulting sketch size.

No paper covers top-k (digest §2.1: motivated only).  Query shape::

    SELECT G, f(x) AS o FROM R [WHERE ...] GROUP BY G [HAVING ...] ORDER BY o DESC LIMIT k

Its provenance is every row of the k result groups, so the sketch-size machinery of ``size`` applies
once each group has a probability ``p_g`` of being in the result.

Method [INFERRED]: take the per-group replicates of the ordering aggregate (bootstrap, or the
parametric ones of the CLT method).  In each replicate rank the groups that exist (and pass the
optional HAVING) and mark the top k; ``p_g`` is the share of replicates in which g is marked.
Replicates are drawn independently per stratum, so the joint ranking keeps the competition between
groups (a group's chance drops when many close competitors exist) that a per-group normal
approximation would lose.

Ties: a group tied with the k-th value is marked too.  SQL's ``LIMIT k`` picks an arbitrary subset
of tied groups, so marking all of them makes the estimated provenance a superset -- the safe side
for a sketch.

Unsampled groups: with the stratified design (one stratum per group, every stratum keeps at least one
row, ``sampling.stratified_sample``) every group of the table is in the sample, so no large group
can be missing from the ranking.  This guarantee is lost in the *uniform fallback* (more groups than
the sample budget): a group absent from the sample gets no estimate and effectively ``p_g = 0``,
even if it would be in the top k -- the size estimate can then be too small.  Check
``Sample.uniform_fallback`` before trusting top-k estimates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np
import pandas as pd

from estimators.aggregates import GroupEstimates
from estimators.having import Predicate, pass_matrix, point_pass
from estimators.sketch_size import SizeEstimate, estimate_size


@dataclass
class TopKEstimate:
    """``frame``: group columns, ``N``, the ordering value's point estimate, ``p`` (probability of
    being in the top k) and ``point_in`` (in the top k by point estimates); ``in_topk``: the
    ``(B, G)`` boolean replicate matrix behind ``p``; ``exact``: every group is fully sampled, so
    the membership is known (else no group's is: it depends on the others' sampled values)."""

    frame: pd.DataFrame
    in_topk: np.ndarray
    k: int
    order_by: str
    descending: bool
    exact: bool = False


def topk_membership(values: np.ndarray, eligible: np.ndarray, k: int, descending: bool = True) -> np.ndarray:
    """Boolean mask of the top-k eligible entries along the last axis (ties with the k-th included).

    Works on ``(G,)`` or ``(B, G)``; fewer than k eligible entries means all of them are in.
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    v = np.asarray(values, dtype=float)
    elig = np.asarray(eligible, dtype=bool) & ~np.isnan(v)
    x = np.where(elig, v if descending else -v, -np.inf)
    G = x.shape[-1]
    if k >= G:
        return elig.copy()
    kth = np.partition(x, G - k, axis=-1)[..., G - k]
    return elig & (x >= kth[..., None])


def topk_probability(est: GroupEstimates, order_by: Union[int, str], k: int, descending: bool = True,
                     predicate: Predicate | None = None) -> TopKEstimate:
    """Probability per group of being in the top k by ``order_by`` (module docstring).

    ``predicate`` is an optional HAVING applied before ranking.  Exact groups keep a fractional
    ``p`` if their competitors are uncertain; if every group is exact, ``p`` is 0/1.
    """
    name = est.resolve(order_by)
    elig = pass_matrix(est, predicate)
    in_topk = topk_membership(est.replicates[name], elig, k, descending)
    point_in = topk_membership(est.point(name), point_pass(est, predicate), k, descending)
    frame = est.frame[est.group_cols + ["N", name]].copy()
    frame["p"] = in_topk.mean(axis=0)
    frame["point_in"] = point_in
    return TopKEstimate(frame=frame, in_topk=in_topk, k=k, order_by=name, descending=descending,
                        exact=bool(est.frame["exact"].all()))


def size_for_topk(sample: pd.DataFrame, topk: TopKEstimate, fragment_sizes, *, group_cols,
                  frag_col: str = "frag", point_rule: str = "p>=0.5", **kwargs) -> SizeEstimate:
    """Sketch size of a top-k query for one candidate: ``size.estimate_size`` on the top-k ``p``.

    ``point_rule``: ``'p>=0.5'`` (default) or ``'estimate'`` (top k by point estimates).
    """
    if point_rule not in ("p>=0.5", "estimate"):
        raise ValueError("point_rule must be 'p>=0.5' or 'estimate'")
    pp = topk.frame["point_in"].to_numpy(dtype=bool) if point_rule == "estimate" else None
    return estimate_size(sample, topk.frame, fragment_sizes, group_cols=list(group_cols),
                         frag_col=frag_col, pass_replicates=topk.in_topk, point_pass=pp,
                         passing_total=topk.k, decided_groups=np.full(len(topk.frame), topk.exact), **kwargs)
