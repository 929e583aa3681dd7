"""Z3 checks behind the MIN/MAX sketches of recursive queries, and the safety verdict of a shape.

The sketch keeps link rows of a subset of the data, so by monotonicity the view it derives is a
subset K of the full view.  For a group of n tuples with values v_i, ``min_lemma`` proves: if K
holds one tuple attaining the group's minimum, the minimum over K equals the minimum over all
(and likewise MAX); if K also holds every tied winner, the arg-min tuples over K are exactly those
over all.  ``min_lemma`` also shows the converse checks fail (counterexamples exist): a kept tuple
that is not an arg-min, or one tied winner only for an arg-min output, or COUNT, would change the
answer.  Z3 checks each group size up to ``MAX_GROUP``; the argument itself does not depend on n.

>>> min_lemma(3).safe
True
"""

from __future__ import annotations

from functools import lru_cache

import z3

from advisor.recursive.witness_proof import MAX_NODES, reach_lemma
from advisor.safety.verdict import Verdict

MAX_GROUP = 6


def _check(hyps: list, goal) -> bool:
    """Whether ``hyps`` imply ``goal`` (the negation is unsatisfiable)."""
    s = z3.Solver()
    s.set("timeout", 10_000)
    s.add(*hyps, z3.Not(goal))
    return s.check() == z3.unsat


@lru_cache(maxsize=None)
def min_lemma(n: int, func: str = "min") -> Verdict:
    """The MIN (or MAX) sketch lemma for a group of ``n`` tuples (module docstring)."""
    v = [z3.Real(f"v{i}") for i in range(n)]
    k = [z3.Bool(f"k{i}") for i in range(n)]
    better = (lambda a, b: a <= b) if func == "min" else (lambda a, b: a >= b)
    m, mk = z3.Real("m"), z3.Real("mk")
    ext_all = [z3.And(*[better(m, x) for x in v]), z3.Or(*[m == x for x in v])]
    ext_kept = [
        z3.And(*[z3.Implies(ki, better(mk, x)) for ki, x in zip(k, v)]),
        z3.Or(*[z3.And(ki, mk == x) for ki, x in zip(k, v)]),
    ]
    argmin_kept = z3.Or(*[z3.And(ki, x == m) for ki, x in zip(k, v)])
    all_ties_kept = z3.And(*[z3.Implies(x == m, ki) for ki, x in zip(k, v)])
    details, checks = [], 0

    def claim(what: str, hyps: list, goal, expect: bool) -> bool:
        nonlocal checks
        checks += 1
        got = _check(hyps, goal)
        details.append(f"{what}: {'proved' if got else 'refuted (counterexample)'}")
        return got == expect

    ok = claim(
        f"{func} over kept = {func} over all, given one kept arg-{func} tuple",
        ext_all + ext_kept + [argmin_kept],
        mk == m,
        True,
    )
    ok &= claim(
        f"arg-{func} tuples over kept = over all, given every tied winner kept",
        ext_all + ext_kept + [all_ties_kept],
        z3.And(mk == m, *[z3.Implies(ki, (x == mk) == (x == m)) for ki, x in zip(k, v)]),
        True,
    )
    if n >= 2:
        ok &= claim(f"{func} preserved given any one kept tuple", ext_all + ext_kept, mk == m, False)
        ok &= claim(
            f"every arg-{func} tuple kept given one kept arg-{func} tuple",
            ext_all + ext_kept + [argmin_kept],
            z3.And(*[z3.Implies(x == m, ki) for ki, x in zip(k, v)]),
            False,
        )
        cnt_all = z3.Sum([z3.If(z3.BoolVal(True), 1, 0) for _ in v])
        cnt_kept = z3.Sum([z3.If(ki, 1, 0) for ki in k])
        ok &= claim(
            "COUNT preserved given one kept arg-min tuple",
            ext_all + ext_kept + [argmin_kept],
            cnt_kept == cnt_all,
            False,
        )
    reason = (f"Z3, groups of {n}: " + "; ".join(details)) if ok else "Z3 did not confirm the lemma"
    return Verdict(ok, reason, checks, details)


def verdict(shape, attr: str) -> Verdict:
    """Safety of sketching ``shape`` on ``shape.table.attr`` (any attribute of the link table)."""
    base = (
        "monotone linear recursion (no negation or aggregation inside): the sketch's rows hold a "
        "witness of every needed view tuple, so the view they derive agrees on those tuples"
    )
    reach = [reach_lemma(n) for n in range(1, MAX_NODES + 1)]
    if not all(p.safe for p in reach):
        return Verdict(False, f"not safe on {shape.table}.{attr}: " + reach[-1].reason, sum(p.checks for p in reach))
    if shape.kind != "minmax":
        how = "one witness per view tuple" + (" with the selected source" if shape.outer_sources else "")
        return Verdict(
            True,
            f"safe on {shape.table}.{attr}: {base}; {how} (Z3 proved the witness rule on every graph of "
            f"1..{MAX_NODES} nodes: kept links derive nothing new and, holding one witness per reached "
            "node, lose nothing; it refuted the rule without kept witnesses)",
            sum(p.checks for p in reach),
            reach[-1].details,
        )
    proofs = [
        min_lemma(n, f) for f in sorted({f for f, _ in shape.aggregates}) for n in range(1, MAX_GROUP + 1)
    ]
    if not all(p.safe for p in proofs):
        return Verdict(
            False, f"not safe on {shape.table}.{attr}: " + proofs[0].reason, sum(p.checks for p in proofs)
        )
    aggs = ", ".join(f"{f}({c})" for f, c in shape.aggregates)
    return Verdict(
        True,
        f"safe on {shape.table}.{attr}: {base}; {aggs} per {'node' if shape.nodes else '(src, dst)'} keep "
        "one witness of every "
        f"tied winner (Z3 proved the MIN/MAX step for groups of 1..{MAX_GROUP}, and refuted "
        "it for a kept tuple that is not a winner and for COUNT)",
        sum(p.checks for p in proofs + reach),
        [d for p in proofs[-1:] + reach[-1:] for d in p.details],
    )
