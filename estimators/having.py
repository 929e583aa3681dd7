"""HAVING predicates over per-group estimates (``estimators.aggregates``) and which groups pass them.

HAVING predicates are tiny dataclasses: ``Cmp(agg, op, value[, high])`` with ``agg`` an aggregate
index or name (``"sum(x)"``), ``op`` one of ``> >= < <= = != between``, combined with ``And([...])``,
``Or([...])``, ``Not(p)``.

Pass probability ``p_g = P(group g exists and satisfies HAVING)``:

* bootstrap -- the fraction of replicates in which the *whole* predicate holds, evaluated jointly per
  replicate, so conjunctions/disjunctions over correlated aggregates are handled exactly (up to the
  bootstrap approximation).
* clt -- analytic normal probabilities.  ``And``: conjunctions on the *same* aggregate are merged
  into one interval and computed exactly; different aggregates are multiplied, **assuming
  independence** (not true e.g. for SUM and COUNT of one group; use the bootstrap if it matters).
  ``Or``: ``1 - prod(1 - p)``, same assumption.  ``Not``: ``P(exists) - p``.

The MIN/MAX rules (a sample extreme that satisfies ``MAX > c`` proves it) are in
``estimators.aggregates``' docstring; ``decided`` marks the groups whose pass is known without
sampling error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np
import pandas as pd

from estimators.aggregates import GroupEstimates
from estimators.clt import compare, normal_interval_probability, normal_pass_probability, normalize_op


# --- predicates -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cmp:
    """``agg op value`` (``between``: ``value <= agg <= high``); ``agg`` is an index or a name."""
    agg: Union[int, str]
    op: str
    value: float
    high: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "op", normalize_op(self.op))
        if self.op == "between" and self.high is None:
            raise ValueError("Cmp(..., 'between', lo, high) needs high")


@dataclass(frozen=True)
class And:
    """Conjunction of predicates."""
    parts: tuple

    def __post_init__(self):
        object.__setattr__(self, "parts", tuple(self.parts))
        if not self.parts:
            raise ValueError("And needs at least one part")


@dataclass(frozen=True)
class Or:
    """Disjunction of predicates."""
    parts: tuple

    def __post_init__(self):
        object.__setattr__(self, "parts", tuple(self.parts))
        if not self.parts:
            raise ValueError("Or needs at least one part")


@dataclass(frozen=True)
class Not:
    """Negation (of an existing group's predicate: an absent group satisfies nothing)."""
    part: object


Predicate = Union[Cmp, And, Or, Not]



# --- predicate evaluation -------------------------------------------------------------------------

_LOWER = (">", ">=")
_UPPER = ("<", "<=")


def _bound_override(est: GroupEstimates, name: str, op: str) -> str | None:
    """'or' if the sample value satisfying the Cmp proves the population does, 'and' if failing
    proves failure, None otherwise (see the MIN/MAX rule in the module docstring)."""
    if name not in est.sample_bound:
        return None
    f = est.func_of(name)
    if (f == "max" and op in _LOWER) or (f == "min" and op in _UPPER):
        return "or"
    if (f == "max" and op in _UPPER) or (f == "min" and op in _LOWER):
        return "and"
    return None


def _eval(est: GroupEstimates, pred: Predicate, replicated: bool) -> np.ndarray:
    ex = est.exists if replicated else est.point_exists
    if isinstance(pred, Cmp):
        name = est.resolve(pred.agg)
        pt = compare(est.point(name), pred.op, pred.value, pred.high) & est.point_exists
        if not replicated:
            return pt
        r = compare(est.replicates[name], pred.op, pred.value, pred.high) & ex
        rule = _bound_override(est, name, pred.op)
        if rule == "or":
            r = r | pt[None, :]
        elif rule == "and":
            r = r & pt[None, :]
        return r
    if isinstance(pred, And):
        return np.logical_and.reduce([_eval(est, p, replicated) for p in pred.parts])
    if isinstance(pred, Or):
        return np.logical_or.reduce([_eval(est, p, replicated) for p in pred.parts])
    if isinstance(pred, Not):
        return ex & ~_eval(est, pred.part, replicated)
    raise TypeError(f"not a predicate: {pred!r}")


def pass_matrix(est: GroupEstimates, predicate: Predicate | None) -> np.ndarray:
    """Boolean ``(B, G)``: does group g exist and satisfy the predicate in replicate b?

    ``None`` means "no HAVING" (every existing group qualifies).
    """
    if predicate is None:
        return est.exists.copy()
    return np.asarray(_eval(est, predicate, True), dtype=bool)


def point_pass(est: GroupEstimates, predicate: Predicate | None) -> np.ndarray:
    """Boolean ``(G,)`` classification by point estimate -- the paper's deterministic Algorithm 1."""
    if predicate is None:
        return est.point_exists.copy()
    return np.asarray(_eval(est, predicate, False), dtype=bool)


def decided(est: GroupEstimates, predicate: Predicate | None) -> np.ndarray:
    """Boolean ``(G,)``: whether each group's pass is known without sampling error -- the group is
    fully sampled, its aggregates have no sampling spread (a COUNT of a group that is its strata,
    a SUM of a constant), or the sample proves the comparison (a sample max above ``c`` for ``MAX >
    c``, the MIN/MAX rule).  A MIN/MAX of a group with unseen rows is never known otherwise: all
    replicates agreeing says only that none of them drew a passing value.  An interval of width zero
    is labelled exact only when every group is decided (``estimators.sketch_size``)."""
    exact = est.frame["exact"].to_numpy(bool)
    if predicate is None:
        return exact | est.point_exists | ~est.exists.any(axis=0)
    return exact | _decided(est, predicate)


def _decided(est: GroupEstimates, pred: Predicate) -> np.ndarray:
    if isinstance(pred, Cmp):
        name = est.resolve(pred.agg)
        reps = est.replicates[name]
        with np.errstate(invalid="ignore"):  # equal up to rounding (43/3 rows weighted back to 43)
            hi, lo = np.max(reps, axis=0), np.min(reps, axis=0)
            flat = np.isfinite(hi) & np.isfinite(lo) & (hi - lo <= 1e-9 * np.maximum(1.0, np.abs(hi)))
        known = flat & ~np.isin(est.func_of(name), ("min", "max")) & est.exists.all(axis=0)
        rule = _bound_override(est, name, pred.op)
        if rule is not None:
            pt = compare(est.point(name), pred.op, pred.value, pred.high) & est.point_exists
            known |= pt if rule == "or" else (est.point_exists & ~pt)
        return known
    if isinstance(pred, (And, Or)):
        return np.logical_and.reduce([_decided(est, p) for p in pred.parts])
    if isinstance(pred, Not):
        return _decided(est, pred.part)
    raise TypeError(f"not a predicate: {pred!r}")


def _clt_prob(est: GroupEstimates, pred: Predicate) -> np.ndarray:
    ex = est.point_exists.astype(float)
    if isinstance(pred, Cmp):
        name = est.resolve(pred.agg)
        if name in est.sample_bound:
            return _eval(est, pred, True).mean(axis=0)
        return normal_pass_probability(est.point(name), est.stderr(name), pred.op, pred.value,
                                       pred.high) * ex
    if isinstance(pred, And):
        # merge inequality conjuncts on the same (CLT) aggregate into one interval
        by_agg: dict = {}
        rest = []
        for p in pred.parts:
            if (isinstance(p, Cmp) and p.op in _LOWER + _UPPER + ("between",)
                    and est.resolve(p.agg) not in est.sample_bound):
                by_agg.setdefault(est.resolve(p.agg), []).append(p)
            else:
                rest.append(p)
        prob = np.ones(est.n_groups)
        for name, cmps in by_agg.items():
            if len(cmps) == 1:
                prob *= _clt_prob(est, cmps[0])
                continue
            lo, hi = -np.inf, np.inf
            for c in cmps:
                if c.op in _LOWER or c.op == "between":
                    lo = max(lo, c.value)
                if c.op in _UPPER:
                    hi = min(hi, c.value)
                if c.op == "between":
                    hi = min(hi, c.high)
            mean, se = est.point(name), est.stderr(name)
            p_int = normal_interval_probability(mean, se, lo, hi) if lo < hi else np.zeros_like(mean)
            det = np.logical_and.reduce([compare(mean, c.op, c.value, c.high) for c in cmps]).astype(float)
            prob *= np.where(se > 0, p_int, det) * ex
        for p in rest:
            prob *= _clt_prob(est, p)
        return prob
    if isinstance(pred, Or):
        q = np.ones(est.n_groups)
        for p in pred.parts:
            q *= 1.0 - _clt_prob(est, p)
        return (1.0 - q) * ex
    if isinstance(pred, Not):
        return np.clip(ex - _clt_prob(est, pred.part), 0.0, 1.0)
    raise TypeError(f"not a predicate: {pred!r}")


def pass_probability(est: GroupEstimates, predicate: Predicate | None, method: str | None = None) -> pd.Series:
    """``p_g`` per group (Series aligned with ``est.frame``), the input of the size estimators.

    ``method`` defaults to ``est.method``: ``'clt'`` is analytic (independence across different
    aggregates, see module docstring); anything else is the replicate fraction of ``pass_matrix``.
    """
    method = (method or est.method).lower()
    if predicate is None:
        p = est.exists.mean(axis=0) if method != "clt" else est.point_exists.astype(float)
    elif method == "clt":
        p = _clt_prob(est, predicate)
    else:
        p = pass_matrix(est, predicate).mean(axis=0)
    return pd.Series(np.clip(np.asarray(p, dtype=float), 0.0, 1.0), index=est.frame.index, name="p")
