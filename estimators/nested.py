"""Nested aggregation (templates Q-AAGH / Q-AAJGH, digest §2.6): inner per-group replicates
propagated through an outer aggregation with HAVING at both levels, so the dependence between the
two levels is kept replicate by replicate.  Builds on ``aggregates.GroupEstimates``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from estimators.aggregates import GroupEstimates, group_codes, percentile_interval
from estimators.having import Predicate, pass_matrix, point_pass
from estimators.bootstrap import GroupIndex, normalize_agg, replicate_stderr

# --- nested aggregation ---------------------------------------------------------------------------


@dataclass
class NestedEstimates:
    """Result of ``estimate_nested``.

    ``outer``: a ``GroupEstimates`` over the outer groups (replicate-based; its ``method`` is
    ``'replicates'``), ``p_outer``: probability each outer group passes the outer HAVING,
    ``inner_frame``: inner group columns + ``N`` + ``p`` (probability the inner group is in the
    provenance: passes the inner HAVING *and* its outer group passes the outer HAVING) +
    ``point_pass``, ``provenance``: the ``(B, G_inner)`` boolean replicate matrix behind ``p``.
    Feed ``inner_frame``/``provenance`` to ``size.estimate_size``: base-table rows belong to inner
    groups.
    """

    outer: GroupEstimates
    p_outer: pd.Series
    inner_frame: pd.DataFrame
    provenance: np.ndarray


def _outer_reduce(func: str, V: np.ndarray, mask: np.ndarray, oidx: GroupIndex) -> np.ndarray:
    valid = mask & ~np.isnan(V)
    if func == "count":
        return oidx.reduce(np.add, valid.astype(float))
    if func in ("sum", "avg"):
        s = oidx.reduce(np.add, np.where(valid, V, 0.0))
        k = oidx.reduce(np.add, valid.astype(float))
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(k > 0, s if func == "sum" else s / np.where(k > 0, k, 1.0), np.nan)
    if func == "min":
        r = oidx.reduce(np.minimum, np.where(valid, V, np.inf))
    else:
        r = oidx.reduce(np.maximum, np.where(valid, V, -np.inf))
    return np.where(np.isfinite(r), r, np.nan)


def estimate_nested(inner: GroupEstimates, outer_group_cols: Sequence[str], outer_aggs: Sequence[tuple],
                    inner_having: Predicate | None = None, outer_having: Predicate | None = None) -> NestedEstimates:
    """Propagate inner per-group replicates through an outer aggregation (templates Q-AAGH/Q-AAJGH).

    Query shape::

        SELECT G2, f2(ref) FROM (SELECT G1, f1(x) ... GROUP BY G1 HAVING inner_having)
        GROUP BY G2 HAVING outer_having          -- G2 a subset of G1

    ``outer_aggs``: list of ``(func, ref)``; ``ref`` is an inner aggregate (index or name such as
    ``'sum(x)'``), an inner group column (its value is known exactly), or ``None``/``'*'`` for
    ``COUNT(*)`` over the inner groups that pass.  Outer names are ``agg_name(func, ref_name)``,
    e.g. ``'count(*)'`` or ``'sum(sum(x))'``; ``outer_having`` refers to them.

    For every replicate b (the same B the inner estimates carry): inner groups passing
    ``inner_having`` in b are aggregated into their outer group, the outer HAVING is evaluated in b,
    and an inner group is in the provenance in b iff it passes and its outer group passes.  So an
    outer SUM/COUNT over a random set of passing inner groups gets a full distribution, and the
    dependence between the two HAVING levels is kept.  Inner groups are independent across
    replicates' strata (strata are sampled independently), so no extra assumption is made.  The
    point estimate propagates the inner point estimates and Algorithm 1's point classification.
    """
    outer_group_cols = list(outer_group_cols)
    missing = [c for c in outer_group_cols if c not in inner.group_cols]
    if missing:
        raise ValueError(f"outer group columns {missing} are not inner group columns")
    inner_pass = pass_matrix(inner, inner_having)
    inner_pt = point_pass(inner, inner_having)
    og, okeys = group_codes(inner.frame, outer_group_cols)
    O = len(okeys)
    oidx = GroupIndex(og, O)
    B = inner_pass.shape[0]
    out = okeys.reset_index(drop=True).copy()
    out["n"] = oidx.sizes.astype(np.int64)
    out["N"] = oidx.reduce(np.add, inner.frame["N"].to_numpy(dtype=float))
    out["exact"] = oidx.reduce(np.minimum, inner.frame["exact"].to_numpy(dtype=np.int64)) > 0
    out["exists"] = oidx.reduce(np.add, inner_pt.astype(np.int64)) > 0
    exists = oidx.reduce(np.add, inner_pass.astype(np.int64)) > 0
    names, aggs_n, replicates = [], [], {}
    for func, ref in outer_aggs:
        func = normalize_agg(func)
        if ref in (None, "*"):
            ref_name = "*"
            Vp, Vr = np.ones(inner.n_groups), np.ones((B, inner.n_groups))
        elif isinstance(ref, str) and ref in inner.frame.columns and ref in inner.group_cols:
            ref_name = ref
            Vp = inner.frame[ref].to_numpy(dtype=float)
            Vr = np.broadcast_to(Vp, (B, inner.n_groups))
        else:
            ref_name = inner.resolve(ref)
            Vp, Vr = inner.point(ref_name), inner.replicates[ref_name]
        name = f"{func}({ref_name})"
        point = _outer_reduce(func, Vp, inner_pt, oidx)
        reps = _outer_reduce(func, Vr, inner_pass, oidx)
        lo, hi = percentile_interval(reps, inner.confidence)
        out[name], out[name + "_se"] = point, replicate_stderr(reps, axis=0)
        out[name + "_lo"], out[name + "_hi"] = lo, hi
        names.append(name)
        aggs_n.append((func, ref_name))
        replicates[name] = reps
    outer = GroupEstimates(frame=out, group_cols=outer_group_cols, aggs=aggs_n, names=names,
                           replicates=replicates, exists=exists, method="replicates",
                           confidence=inner.confidence, B=B, seed=inner.seed)
    outer_pass = pass_matrix(outer, outer_having)
    outer_pt = point_pass(outer, outer_having)
    prov = inner_pass & outer_pass[:, og]
    prov_pt = inner_pt & outer_pt[og]
    inner_frame = inner.frame[inner.group_cols + ["n", "N"]].copy()
    inner_frame["p"] = prov.mean(axis=0)
    inner_frame["point_pass"] = prov_pt
    p_outer = pd.Series(outer_pass.mean(axis=0), index=out.index, name="p")
    return NestedEstimates(outer=outer, p_outer=p_outer, inner_frame=inner_frame, provenance=prov)
