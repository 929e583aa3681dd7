"""Reuse test: may the sketch captured for instance Q serve instance Q′ of one template? (seed §5)

The two trees must be the same template: identical structure and internal attribute names,
differing only in literal constants and TopK k. The sufficient condition is TR Thm. 5:
ge(Q′,Q) ∧ uconds(Q′,Q) implies P(Q′,D) ⊆ P(Q,D), so Q's (safe) sketch is a sketch for Q′.
Variables: `a` for the captured instance Q, `a__new` for Q′; Ψ_{Q′,Q} relates them (TR Fig. 7).

Choices (all sound; each verdict's `details` lists the solver checks made):
* TopK has no ge rule. Trees with a TopK are reusable only if identical (same constants, same k),
  or identical except a single TopK whose k′ ≤ k and whose ancestors are all Project, Select,
  Distinct, Join or Union: then τ_k′ ⊆ τ_k under the deterministic order, and lineage of those
  operators is monotone in their input (digest §5.5 [I]).
* Aggregation cases need the aggregate argument to agree (`arg = arg′`) for the mapped tuples;
  the sign conditions use ≥ 0 / ≤ 0 (the paper states > 0 / < 0; ≥ suffices); max/min need no sign.
* non-grp-pred drops CNF clauses whose attributes are all group-by attributes; clauses without
  any attribute are kept (conservative). Statistics conjuncts are facts: hypotheses, never goals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

import z3
from sqlglot import exp

from advisor.plan import ir
from advisor.safety.verdict import Labels, Verdict, agg_desc
from advisor.safety.z3_encoding import (
    TIMEOUT_MS,
    Conds,
    Encoder,
    build_conds,
    le,
    tree_dtypes,
    valid,
    z3_section,
)

NEW = "__new"
MONOTONE_LINEAGE = (ir.Project, ir.Select, ir.Distinct, ir.Join, ir.Union)
CNF_CAP = 64


class NotReusable(Exception):
    pass


def _shape(e: Optional[exp.Expression]) -> Optional[str]:
    if e is None:
        return None
    return e.transform(lambda n: exp.Placeholder() if isinstance(n, exp.Literal) else n).sql()


def _sql(e: Optional[exp.Expression]) -> Optional[str]:
    return None if e is None else e.sql()


@dataclass
class _Diff:
    """How two instances of one template differ."""

    consts: bool = False                      # some literal differs
    k_diffs: list = field(default_factory=list)  # (captured TopK, new TopK, ancestors) with k ≠ k′
    topk: bool = False


def compare(a: ir.Node, b: ir.Node, diff: Optional[_Diff] = None, anc: tuple = ()) -> _Diff:
    """Check that a and b are one template (raise NotReusable naming the mismatch) and record the diff."""
    d = diff or _Diff()
    if type(a) is not type(b):
        raise NotReusable(f"{type(a).__name__} vs {type(b).__name__}")
    if [(c.name, c.dtype) for c in a.cols] != [(c.name, c.dtype) for c in b.cols]:
        raise NotReusable(f"different attributes under {type(a).__name__}")
    exprs: list[tuple] = []
    if isinstance(a, ir.Scan):
        if a.table != b.table:
            raise NotReusable(f"scan of {a.table} vs {b.table}")
    elif isinstance(a, (ir.Select, ir.Join) + ir.PARTIAL_JOINS):
        exprs = [(a.cond, b.cond)]
    elif isinstance(a, ir.Project):
        exprs = [(x, y) for (x, _), (y, _) in zip(a.items, b.items)]
    elif isinstance(a, ir.Aggregate):
        sig = lambda n: (n.keys, [(x.func, x.distinct, x.out) for x in n.aggs])  # noqa: E731
        if sig(a) != sig(b):
            raise NotReusable("different GROUP BY or aggregates")
        exprs = [(x.arg, y.arg) for x, y in zip(a.aggs, b.aggs)]
    elif isinstance(a, ir.TopK):
        d.topk = True
        if a.order != b.order:
            raise NotReusable("different ORDER BY")
        if a.k != b.k:
            d.k_diffs.append((a, b, anc))
    for x, y in exprs:
        if _shape(x) != _shape(y):
            raise NotReusable(f"different expressions {_sql(x)} vs {_sql(y)}")
        d.consts |= _sql(x) != _sql(y)
    for ca, cb in zip(a.children, b.children):
        compare(ca, cb, d, anc + (a,))
    return d


class _Reuse:
    """Ψ_{Q′,Q}, ge and uconds over one pair of instances."""

    def __init__(self, cap: ir.Node, new: ir.Node, stats: Mapping, timeout_ms: int):
        self.timeout = timeout_ms
        self.enc = Encoder(tree_dtypes(cap))
        self.lab, self.labN = Labels(cap), Labels(new)
        self.cQ = build_conds(cap, self.enc, "", stats, self.lab.sql)
        self.cN = build_conds(new, self.enc, NEW, stats, self.labN.sql)
        self.Q, self.N = self.enc.side(""), self.enc.side(NEW)
        self.cap, self.new = cap, new
        self.checks = 0
        self.details: list[str] = []
        self.notes: list[str] = []
        self.changed: dict[str, str] = {}  # attr -> why it may differ between the instances

    def valid(self, hyps: list, goal, what: str) -> bool:
        self.checks += 1
        ok = valid(hyps, goal, self.timeout)
        self.details.append(f"{'ok  ' if ok else 'FAIL'} {what}")
        return ok

    def facts(self, *cs: Conds) -> list:
        return [p.f for c in cs for p in c.pred if p.stat]

    def ngp(self, c: Conds, keys: set[str]) -> list[tuple]:
        """non-grp-pred: CNF clauses of pred (not statistics) that mention a non-group-by attribute."""
        out = []
        for p in c.pred:
            if p.stat:
                continue
            for cl in cnf(p.f):
                attrs = self.enc.attrs_in(cl)
                if not attrs or not attrs <= keys:
                    out.append((cl, p.label))
        return out

    def visit(self, a: ir.Node, b: ir.Node) -> list:
        kids = [(ca, cb, self.visit(ca, cb)) for ca, cb in zip(a.children, b.children)]
        if isinstance(a, ir.Scan):
            return [self.Q(c.name) == self.N(c.name) for c in a.cols]
        if isinstance(a, (ir.Select, ir.Project, ir.TopK, ir.Join)):
            return [f for _, _, psi in kids for f in psi]
        ca, cb, psi1 = kids[0]
        h = psi1 + self.cQ[id(ca)].all() + self.cN[id(cb)].all()
        if isinstance(a, ir.Distinct):
            for n in ca.names:
                if not self.valid(h, self.Q(n) == self.N(n), f"DISTINCT: {self.lab(n)} = {self.lab(n)}′"):
                    raise NotReusable(f"DISTINCT over {self.lab(n)}, which may differ between the instances"
                              f"{self._why(n)}")
            return psi1
        if isinstance(a, ir.Union):
            return self._union(a, kids)
        if isinstance(a, ir.Aggregate):
            return self._aggregate(a, ca, cb, psi1, h)
        raise NotReusable(f"no reuse rule for {type(a).__name__}")

    def _why(self, n: str) -> str:
        return f" ({self.changed[n]})" if n in self.changed else ""

    def _union(self, a: ir.Union, kids) -> list:
        psi = []
        for i, u in enumerate(a.cols):
            ok = True
            for ca, cb, psi_k in kids:
                x = ca.cols[i].name
                h = psi_k + self.cQ[id(ca)].expr + self.cN[id(cb)].expr
                ok = ok and self.valid(h, self.Q(x) == self.N(x), f"UNION ALL: {self.lab(x)} = {self.lab(x)}′")
            if ok:
                psi.append(self.Q(u.name) == self.N(u.name))
        return psi

    def _aggregate(self, a: ir.Aggregate, ca, cb, psi1: list, h: list) -> list:
        op = self.lab.op(a)
        for g in a.keys:
            if not self.valid(h, self.Q(g) == self.N(g), f"{op}: {self.lab(g)} = {self.lab(g)}′"):
                raise NotReusable(f"{op}: group-by attribute {self.lab(g)} may differ between the instances{self._why(g)}")
        keys = set(a.keys)
        gq, gn = self.ngp(self.cQ[id(ca)], keys), self.ngp(self.cN[id(cb)], keys)
        exprs = self.cQ[id(ca)].expr + self.cN[id(cb)].expr + self.facts(self.cQ[id(ca)], self.cN[id(cb)])
        one = all(self.valid(psi1 + [f for f, _ in gq] + exprs, f, f"{op} ①: groups(Q) ⊆ groups(Q′): {lab}′")
                  for f, lab in gn)
        two = all(self.valid(psi1 + [f for f, _ in gn] + exprs, f, f"{op} ②: groups(Q′) ⊆ groups(Q): {lab}")
                  for f, lab in gq)
        condsQ = self.cQ[id(ca)].all()
        psi = list(psi1)
        for call in a.aggs:
            b, d = call.out.name, agg_desc(call, self.lab.sql)
            if call.arg is None or (call.func == "count" and not call.distinct):
                arg_eq, argQ = True, None
            else:
                argQ, argN = self.enc.encode(call.arg, self.Q), self.enc.encode(call.arg, self.N)
                arg_eq = self.valid(h, argQ == argN, f"{op}: arg of {d} equal in both instances")
            bQ, bN = self.Q(b), self.N(b)
            rel = None
            if one and two and arg_eq:
                rel = "="
            elif two and arg_eq:
                if call.func in ("count", "max"):
                    rel = "≥"
                elif call.func == "min":
                    rel = "≤"
                elif call.func == "sum" and argQ is not None and argQ.sort() in (z3.IntSort(), z3.RealSort()):
                    if self.valid(condsQ, argQ >= 0, f"{op}: conds → {self.lab.sql(call.arg)} ≥ 0"):
                        rel = "≥"
                    elif self.valid(condsQ, argQ <= 0, f"{op}: conds → {self.lab.sql(call.arg)} ≤ 0"):
                        rel = "≤"
            if rel == "=":
                psi.append(bQ == bN)
                self.notes.append(f"{d} is the same in both instances (same groups)")
            elif rel == "≥":
                psi.append(le(bN, bQ, self.enc))
                self.notes.append(f"{d} of the captured instance is ≥ the new one (new groups are sub-bags)")
            elif rel == "≤":
                psi.append(le(bQ, bN, self.enc))
                self.notes.append(f"{d} of the captured instance is ≤ the new one (new groups are sub-bags)")
            else:
                why = "the new instance's groups are not contained in the captured ones" if not two else (
                    "avg is not monotone" if call.func == "avg" else "no monotonicity argument applies")
                self.changed[b] = f"{d} may differ: {why}"
        return psi

    def run(self) -> Verdict:
        try:
            psi = self.visit(self.cap, self.new)
            cq, cn = self.cQ[id(self.cap)], self.cN[id(self.new)]
            hyps = psi + cn.all() + cq.expr + self.facts(cq)
            implied = []
            for pq, pn in zip(cq.pred, cn.pred):
                if pq.stat:
                    continue
                if not self.valid(hyps, pq.f, f"uconds: ⇒ {pq.label}"):
                    attrs = sorted(self.enc.attrs_in(pq.f) & set(self.changed))
                    extra = f"; {self.changed[attrs[0]]}" if attrs else ""
                    raise NotReusable(f"{pq.label} of the captured instance does not follow from the new instance "
                              f"({pn.label}){extra}")
                if pq.label != pn.label:
                    implied.append(f"{pn.label} ⇒ {pq.label}")
        except NotReusable as e:
            return Verdict(False, f"not reusable: {e}", self.checks, self.details)
        why = ", ".join(implied) if implied else "same conditions"
        notes = "; ".join(dict.fromkeys(self.notes))
        return Verdict(True, f"reusable: the new instance's conditions imply the captured ones ({why})"
                       + (f"; {notes}" if notes else ""), self.checks, self.details)


def cnf(f: z3.BoolRef, cap: int = CNF_CAP) -> list[z3.BoolRef]:
    """Clauses of f in CNF (NNF + distribution); f itself if that exceeds `cap` clauses."""

    def nnf(g, neg: bool):
        if z3.is_not(g):
            return nnf(g.arg(0), not neg)
        if z3.is_and(g) or z3.is_or(g):
            kids = [nnf(c, neg) for c in g.children()]
            return ("and" if z3.is_and(g) != neg else "or", kids)
        if z3.is_implies(g):
            return nnf(z3.Or(z3.Not(g.arg(0)), g.arg(1)), neg)
        return ("lit", z3.Not(g) if neg else g)

    def clauses(t) -> list[list]:
        if t[0] == "lit":
            return [[t[1]]]
        parts = [clauses(k) for k in t[1]]
        if t[0] == "and":
            out = [c for p in parts for c in p]
        else:
            out = [[]]
            for p in parts:
                out = [x + y for x in out for y in p]
                if len(out) > cap:
                    raise OverflowError
        if len(out) > cap:
            raise OverflowError
        return out

    try:
        cls = clauses(nnf(f, False))
    except OverflowError:
        return [f]
    return [c[0] if len(c) == 1 else z3.Or(*c) for c in cls]


def check_reuse(captured: ir.Node, new: ir.Node, stats: Mapping[tuple[str, str], tuple[object, object]],
                timeout_ms: int = TIMEOUT_MS, shortcut: bool = True) -> Verdict:
    """True if the sketch captured for `captured` is valid for `new` (same template, other constants).

    `shortcut=False` runs the SMT test even for identical instances (used to test it)."""
    try:
        d = compare(captured, new)
    except NotReusable as e:
        return Verdict(False, f"not reusable: not instances of one template ({e})", 0, [])
    identical = not d.consts and not d.k_diffs
    if identical and (shortcut or d.topk):
        return Verdict(True, "reusable: identical instance (same constants" + (", same k)" if d.topk else ")"), 0, [])
    if d.topk:
        if d.consts:
            return Verdict(False, "not reusable: top-k has no reuse rule and the constants differ "
                                  "(only identical instances, or a smaller k, may share a sketch)", 0, [])
        if len(d.k_diffs) == 1:
            a, b, anc = d.k_diffs[0]
            bad = [type(x).__name__ for x in anc if not isinstance(x, MONOTONE_LINEAGE)]
            if b.k <= a.k and not bad:
                return Verdict(True, f"reusable: identical except LIMIT {b.k} ≤ {a.k}: the top {b.k} rows are "
                                     f"among the top {a.k} under the same total order", 0, [])
            why = f"LIMIT {b.k} > {a.k}" if b.k > a.k else f"{', '.join(bad)} above the LIMIT"
            return Verdict(False, f"not reusable: top-k with a different k ({why})", 0, [])
        return Verdict(False, "not reusable: several LIMITs differ", 0, [])
    with z3_section():
        return _Reuse(captured, new, stats, timeout_ms).run()
