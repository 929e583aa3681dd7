"""Static safety test gc(Q, X, S_D) for provenance sketches (seed 001 §2, TR Fig. 6a/6b).

Bottom-up over the algebra tree, each subquery gets Ψ (how values on the sketched database
D_PS relate to values on D, over variables `a` and `a__ps`) and pred/expr on both sides
(`advisor.safety.z3_encoding.build_conds`). Every check is `valid(hyps -> goal)` with Z3 and a timeout;
"unknown" means not proven, hence unsafe. The test is sound, not complete.

Deviations from the paper's rules, all sound:
* max/min need no sign condition ([I] in the digest: the max of a sub-bag is never larger);
  the aggregate argument must however be related (`arg^PS = / ≤ / ≥ arg`), which the paper
  leaves implicit and which matters when aggregates are nested.
* TopK breaks ties by all other attributes ascending, so the check covers the whole sort
  vector: `o ≤ o^PS` (ASC) / `o ≥ o^PS` (DESC) for order keys and `a ≤ a^PS` for every other
  attribute (usually proven as `a^PS = a`). Componentwise ≤ implies lexicographic ≤.
* If X does not touch a subtree, Ψ equates every attribute of that subtree, not only its output.
* Semi-join (EXISTS / IN): monotone in both inputs, so the join rule applies (θ^PS → θ) and the
  output keeps the outer side's Ψ; the inner side gets its own rules (e.g. HAVING safety under
  IN (... GROUP BY ... HAVING ...)).  A sketch inside the inner side is allowed only when that side
  is unique on the join keys, so the capture can carry its provenance through the equal inner join.
* Anti-join (NOT EXISTS / NOT IN) and the NULL-padded side of a left outer join are not monotone:
  fewer inner rows let more outer rows through or turn matched rows into padded ones, so a sketch
  there is unsafe.  A sketch on the outer (preserved) side is safe when every outer attribute the
  join condition reads is unchanged (a^PS = a): each kept outer row then meets exactly the inner
  rows it met on D, so the operator acts as a selection on the outer side.
* NULLs are not modelled by Z3, with one exception found by the differential soak: a min/max/sum/avg
  that may change on the sketched data is NULL for a group left with only NULL arguments, and an
  ascending order (key or tie-break) puts NULLs first, so such an attribute makes a top-k unsafe --
  unless its argument is a column the statistics show NULL-free (``NOT_NULL``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Optional

import z3
from sqlglot import exp

from advisor.caches import BoundedMemo
from advisor.plan import ir
from advisor.plan.uniqueness import unique_on_join_keys
from advisor.safety.verdict import Labels, Verdict, agg_desc
from advisor.safety.z3_encoding import (
    TIMEOUT_MS,
    Encoder,
    build_conds,
    eq,
    le,
    tree_dtypes,
    valid,
    z3_section,
)

PS = "__ps"
NOT_NULL = ("", "not_null")  # stats key: frozenset of (table, column) holding no NULL at this version


class _Unsafe(Exception):
    pass


def subtree_attrs(n: ir.Node) -> list[str]:
    out: list[str] = []
    for m in n.walk():
        for name in m.names + ([a.out.name for a in m.aggs] if isinstance(m, ir.Aggregate) else []):
            if name not in out:
                out.append(name)
    return out


class SafetyChecker:
    """One run of gc for (root, X, stats); collects the check log and the explanatory notes."""

    def __init__(self, root: ir.Node, X: set[str], stats: Mapping, timeout_ms: int):
        self.root, self.X, self.timeout = root, set(X), timeout_ms
        self.enc = Encoder(tree_dtypes(root))
        self.lab = Labels(root)
        self.cD = build_conds(root, self.enc, "", stats, self.lab.sql)
        self.cP = build_conds(root, self.enc, PS, stats, self.lab.sql)
        self.D, self.P = self.enc.side(""), self.enc.side(PS)
        self.checks = 0
        self.details: list[str] = []
        self.notes: list[str] = []
        self.origin: dict[str, tuple[str, str]] = {}  # attr -> (aggregate it comes from, relation)
        self.nullable: set[str] = set()  # changed min/max/sum/avg outputs: NULL on a group left with NULL args only
        self.not_null = {c.name for sc in root.walk() if isinstance(sc, ir.Scan) for c in sc.cols
                         if (sc.table, c.source) in stats.get(NOT_NULL, ())}
        self.xs = [self.lab(x) for x in sorted(self.X)]
        self.passed: list[str] = []  # monotone operators above a sketched scan
        self.loose: list[tuple[str, str]] = []  # (aggregate, note) changed by the sketch

    # ---------- helpers ----------
    def valid(self, hyps: list, goal, what: str) -> bool:
        self.checks += 1
        ok = valid(hyps, goal, self.timeout)
        self.details.append(f"{'ok  ' if ok else 'FAIL'} {what}")
        return ok

    def x_in(self, n: ir.Node) -> set[str]:
        return {c.name for m in n.walk() if isinstance(m, ir.Scan) for c in m.cols if c.name in self.X}

    def hyp(self, *kids: tuple[ir.Node, list]) -> list:
        """Ψ ∧ conds(Q1) ∧ conds(Q1^PS) for the given (child, Ψ_child) pairs."""
        out: list = []
        for n, psi in kids:
            out += psi + self.cD[id(n)].all() + self.cP[id(n)].all()
        return out

    def why(self, a: str) -> str:
        """' (from sum(x) over a non-group-by attribute (x))' when a was changed by an aggregate."""
        if a not in self.origin:
            return ""
        desc = self.origin[a][0]
        pre = "" if desc == self.lab(a) else f" = {desc}"
        return f"{pre} (an aggregate over a non-group-by attribute: {', '.join(self.xs)})"

    def feeds(self, attrs: set[str], n: ir.Node, ok: bool, how: str = "") -> str:
        """Explain a filter/order `n` that depends on attributes changed by an aggregate."""
        src = [(a, self.origin[a]) for a in sorted(attrs) if a in self.origin]
        if not src:
            return ""
        desc, rel = src[0][1]
        grow = {"≤": "can only shrink", "≥": "can only grow"}.get(rel, "may change")
        xs = ", ".join(self.xs)
        if ok:
            kind = how or {"≤": "keep-large", "≥": "keep-small"}.get(rel, "")
            tag = f"{kind}: safe" if kind else "safe"
            return f"{xs} is not a group-by attribute and {desc} feeds {self.lab.op(n)} ({tag})"
        if rel == "?":
            return f"{desc} over a non-group-by attribute ({xs}) feeds {self.lab.op(n)}"
        return f"{desc} over a non-group-by attribute ({xs}) {grow} on the sketched data and feeds {self.lab.op(n)}"

    # ---------- the rules ----------
    def visit(self, n: ir.Node) -> list:
        kids = [(c, self.visit(c)) for c in n.children]
        if not self.x_in(n):  # X ∩ ATTRS(Q) = ∅: this subtree sees unmodified relations
            return [f for a in subtree_attrs(n) if (f := eq(self.P(a), self.D(a))) is not None]
        if isinstance(n, ir.Scan):
            return [self.P(c.name) == self.D(c.name) for c in n.cols]
        if isinstance(n, (ir.Select, ir.Join, ir.Project, ir.Union, ir.SemiJoin)):
            self.passed.append(self.lab.op(n))
        if isinstance(n, ir.SemiJoin):
            return self._semi_join(n, kids)
        if isinstance(n, (ir.AntiJoin, ir.LeftJoin)):
            return self._outer_side_only(n, kids)
        if isinstance(n, (ir.Select, ir.Join)):
            if n.cond is not None:
                self._filter(n, kids)
            return [f for _, psi in kids for f in psi]
        if isinstance(n, ir.Project):
            for e, c in n.items:
                hit = [self.origin[r] for r in sorted(ir.referenced(e)) if r in self.origin]
                if hit:
                    same = isinstance(e, exp.Column)
                    self.origin[c.name] = (hit[0][0], hit[0][1] if same else "?")
                if ir.referenced(e) & self.nullable:
                    self.nullable.add(c.name)
            return kids[0][1]
        if isinstance(n, ir.Aggregate):
            return self._aggregate(n, kids[0])
        if isinstance(n, ir.Distinct):
            h = self.hyp(kids[0])
            for a in n.child.names:
                if not self.valid(h, self.P(a) == self.D(a), f"DISTINCT: {self.lab(a)}^PS = {self.lab(a)}"):
                    raise _Unsafe(f"DISTINCT over {self.lab(a)}{self.why(a)}, which may differ on the sketched data")
            return kids[0][1]
        if isinstance(n, ir.TopK):
            self._topk(n, kids[0])
            return kids[0][1]
        if isinstance(n, ir.Union):
            return self._union(n, kids)
        raise _Unsafe(f"no safety rule for operator {type(n).__name__}")

    def _filter(self, n, kids) -> None:
        """Selection / join rule: valid(Ψ ∧ conds ∧ conds^PS ∧ θ^PS → θ)."""
        thD = self.enc.encode_bool(n.cond, self.D)
        thP = self.enc.encode_bool(n.cond, self.P)
        ok = self.valid(self.hyp(*kids) + [thP], thD, f"{self.lab.op(n)}: θ^PS → θ")
        note = self.feeds(ir.referenced(n.cond), n, ok)
        if not ok:
            raise _Unsafe(note or f"{self.lab.op(n)} may keep extra rows on the sketched data "
                                  f"(θ^PS → θ not provable for {', '.join(self.xs)})")
        if note:
            self.notes.append(note)

    def _semi_join(self, n: ir.SemiJoin, kids) -> list:
        """Semi-join rule: θ^PS → θ (as for a join); a sketch inside the inner side needs that side
        unique on the join keys (the capture writes the semi-join as the inner join it then equals)."""
        if self.x_in(n.right) and not unique_on_join_keys(n):
            raise _Unsafe(f"{self.lab.op(n)}: the inner side is not unique on the join keys, so the "
                          f"provenance of {', '.join(self.xs)} inside it is not captured")
        self._filter(n, kids)
        return list(kids[0][1])

    def _outer_side_only(self, n, kids) -> list:
        """Anti-join / left outer join rule: no sketch on the inner side; outer attributes the
        condition reads must be unchanged (a^PS = a)."""
        op = self.lab.op(n)
        if self.x_in(n.right):
            what = ("fewer rows there let more outer rows through" if isinstance(n, ir.AntiJoin) else
                    "fewer rows there turn matched rows into NULL-padded ones")
            raise _Unsafe(f"{op}: {', '.join(self.xs)} would drop rows of the inner side, and {what} "
                          f"(not monotone: unsafe)")
        h = self.hyp(*kids)
        left = set(n.left.names)
        for a in sorted(ir.referenced(n.cond) & left):
            if not self.valid(h, self.P(a) == self.D(a), f"{op}: {self.lab(a)}^PS = {self.lab(a)}"):
                raise _Unsafe(f"{op}: the outer attribute {self.lab(a)}{self.why(a)} may differ on the sketched "
                              f"data, so an outer row may meet other inner rows")
        self.passed.append(f"{op} (outer side only)")
        psi = list(kids[0][1])
        if isinstance(n, ir.LeftJoin):  # a kept outer row meets the same inner rows (or none) on both
            psi += [f for a in n.right.names if (f := eq(self.P(a), self.D(a))) is not None]
        return psi

    def _aggregate(self, n: ir.Aggregate, kid) -> list:
        child, psi1 = kid
        h = self.hyp(kid)
        op = self.lab.op(n)
        for g in n.keys:
            if not self.valid(h, self.P(g) == self.D(g), f"{op}: {self.lab(g)}^PS = {self.lab(g)}"):
                raise _Unsafe(f"{op}: group-by attribute {self.lab(g)}{self.why(g)} may differ on the sketched data")
        condsD = self.cD[id(child)].all()
        grouped: dict[str, Optional[str]] = {}
        for x in sorted(self.x_in(child)):
            grouped[x] = None
            for g in n.keys:
                f = eq(self.D(x), self.D(g))
                if f is not None and self.valid(condsD, f, f"{op}: conds → {self.lab(x)} = {self.lab(g)}"):
                    grouped[x] = g
                    break
        whole = bool(grouped) and all(grouped.values())
        if whole:
            self.notes.append("; ".join(dict.fromkeys(
                (f"{self.lab(x)} is a group-by attribute" if x == g else
                 f"{self.lab(x)} is equal to group-by attribute {self.lab(g)}") +
                f" ({op}): groups are kept whole" for x, g in grouped.items() if g)))
        psi = list(psi1)
        for a in n.aggs:
            b = a.out.name
            rel = self._agg_case(a, whole, h, condsD, op)
            if rel == "=":
                psi.append(self.P(b) == self.D(b))
                continue
            if rel == "≤":
                psi.append(le(self.P(b), self.D(b), self.enc))
            elif rel == "≥":
                psi.append(le(self.D(b), self.P(b), self.enc))
            self.origin[b] = (agg_desc(a, self.lab.sql), rel or "?")
            if a.func in ("min", "max", "sum", "avg") and not (
                    isinstance(a.arg, exp.Column) and a.arg.name in self.not_null):
                self.nullable.add(b)
            d = self.origin[b][0]
            self.loose.append((d, f"{op}: {d} is computed over a non-group-by attribute ({', '.join(self.xs)}) "
                                  f"but no filter or order depends on it"))
        return psi

    def _agg_case(self, a: ir.AggCall, whole: bool, h: list, condsD: list, op: str) -> Optional[str]:
        """Ψ case for one aggregate: '=' (i), '≤' (ii), '≥' (iii) or None (iv)."""
        d = agg_desc(a, self.lab.sql)
        if a.arg is None or (a.func == "count" and not a.distinct):
            argD = argP = None
        else:
            argD, argP = self.enc.encode(a.arg, self.D), self.enc.encode(a.arg, self.P)

        def arg_rel(kind: str) -> bool:
            if argD is None:
                return True
            goal = {"=": argP == argD, "≤": le(argP, argD, self.enc), "≥": le(argD, argP, self.enc)}[kind]
            return self.valid(h, goal, f"{op}: arg of {d}: {self.lab.sql(a.arg)}^PS {kind} {self.lab.sql(a.arg)}")

        def sign(kind: str) -> bool:
            goal = argD >= 0 if kind == "≥" else argD <= 0
            return self.valid(condsD, goal, f"{op}: conds → {self.lab.sql(a.arg)} {kind} 0")

        if whole and arg_rel("="):
            return "="
        if a.func == "count":
            return "≤" if arg_rel("=") else None
        if a.func == "max" and arg_rel("≤"):
            return "≤"
        if a.func == "min" and arg_rel("≥"):
            return "≥"
        if a.func == "sum" and argD is not None and argD.sort() in (z3.IntSort(), z3.RealSort()):
            if sign("≥") and arg_rel("≤"):
                return "≤"
            if sign("≤") and arg_rel("≥"):
                return "≥"
        return None

    def _topk(self, n: ir.TopK, kid) -> None:
        """Every component of the sort vector (keys, then the tie-breakers) must satisfy t ≤ t^PS."""
        h = self.hyp(kid)
        op = self.lab.op(n)
        keys = [o for o, _ in n.order]
        for a in [o for o, asc in n.order if asc] + [a for a in n.child.names if a not in keys]:
            if a in self.nullable:  # NULLs sort first ascending; Z3 does not model NULLs
                raise _Unsafe(f"{op}: {self.lab(a)}{self.why(a)} is NULL on the sketched data for a group left "
                              f"with only NULL arguments, and NULLs sort first in ascending order")
        for o, asc in n.order:
            goal = le(self.D(o), self.P(o), self.enc) if asc else le(self.P(o), self.D(o), self.enc)
            rel = f"{self.lab(o)} ≤ {self.lab(o)}^PS" if asc else f"{self.lab(o)} ≥ {self.lab(o)}^PS"
            ok = self.valid(h, goal, f"{op}: {rel}")
            note = self.feeds({o}, n, ok, "keep-large" if not asc else "keep-small")
            if not ok:
                raise _Unsafe(note or f"{op}: order key {self.lab(o)} may move ahead on the sketched data")
            if note:
                self.notes.append(note)
        for a in n.child.names:
            if a in keys:
                continue
            what = f"{op}: tie-break {self.lab(a)} ≤ {self.lab(a)}^PS"
            if not self.valid(h, le(self.D(a), self.P(a), self.enc), what):
                raise _Unsafe(f"{op}: ties are broken by {self.lab(a)}{self.why(a)}, which may differ on the "
                              f"sketched data")

    def _union(self, n: ir.Union, kids) -> list:
        psi = []
        for i, u in enumerate(n.cols):
            sides = [(kid, child.cols[i].name) for kid, child in zip(kids, n.children)]
            for rel in ("=", "≤", "≥"):
                def goal(a):
                    return {"=": self.P(a) == self.D(a), "≤": le(self.P(a), self.D(a), self.enc),
                            "≥": le(self.D(a), self.P(a), self.enc)}[rel]
                if all(self.valid(self.hyp(kid), goal(a), f"UNION ALL: {self.lab(a)}^PS {rel} {self.lab(a)}")
                       for kid, a in sides):
                    uP, uD = self.P(u.name), self.D(u.name)
                    psi.append(uP == uD if rel == "=" else le(uP, uD, self.enc) if rel == "≤" else le(uD, uP, self.enc))
                    break
            hit = [self.origin[a] for _, a in sides if a in self.origin]
            if hit:
                self.origin[u.name] = hit[0]
        return psi

    def run(self) -> Verdict:
        try:
            self.visit(self.root)
        except _Unsafe as e:
            return Verdict(False, str(e), self.checks, self.details)
        notes = list(dict.fromkeys(x for x in self.notes if x))
        notes += [note for d, note in self.loose if not any(d in x for x in notes)]
        ops = ", ".join(dict.fromkeys(self.passed))
        reason = "; ".join(notes) or (f"{', '.join(self.xs)} only passes through {ops} (monotone: safe)" if ops
                                      else f"{', '.join(self.xs)}: the query is a plain scan (monotone: safe)")
        return Verdict(True, reason, self.checks, self.details)


# ---------------- public API ----------------
_CACHE_MAX = 512
_CACHE = BoundedMemo("safety verdicts", _CACHE_MAX)  # first in, first out


def fingerprint(n: ir.Node) -> tuple:
    """A structural key of the tree, constants included (cheap, used for caching)."""
    s = lambda e: None if e is None else e.sql()  # noqa: E731
    cols = tuple((c.name, c.dtype) for c in n.cols) if not isinstance(n, (ir.Select, ir.Distinct, ir.TopK)) else ()
    if isinstance(n, ir.Scan):
        extra: tuple = (n.table, n.scan_id, tuple((c.table, c.source) for c in n.cols))
    elif isinstance(n, (ir.Select, ir.Join) + ir.PARTIAL_JOINS):
        extra = (s(n.cond),)
    elif isinstance(n, ir.Project):
        extra = tuple(s(e) for e, _ in n.items)
    elif isinstance(n, ir.Aggregate):
        extra = (tuple(n.keys), tuple((a.func, s(a.arg), a.distinct, a.out.name, a.out.dtype) for a in n.aggs))
    elif isinstance(n, ir.TopK):
        extra = (tuple(n.order), n.k)
    else:
        extra = ()
    return (type(n).__name__, cols, extra, tuple(fingerprint(c) for c in n.children))


def _validate_X(root: ir.Node, X: set[str], per_scan_max: int) -> None:
    owner = {c.name: s.scan_id for s in root.walk() if isinstance(s, ir.Scan) for c in s.cols}
    per_scan: dict[int, list] = {}
    for x in sorted(X):
        if x not in owner:
            raise ValueError(f"{x} is not a column of a scanned table in this query")
        per_scan.setdefault(owner[x], []).append(x)
        if len(per_scan[owner[x]]) > per_scan_max:
            raise ValueError(f"at most {per_scan_max} sketch attribute(s) per table access: "
                             f"{', '.join(per_scan[owner[x]])}")


def check_safety(root: ir.Node, X: set[str], stats: Mapping[tuple[str, str], tuple[object, object]],
                 timeout_ms: int = TIMEOUT_MS, per_scan_max: int = 1) -> Verdict:
    """gc(Q, X, S_D): True means every sketch on X is safe for Q.  Several attributes of one scan
    (``per_scan_max`` > 1; ``advisor.selection.attribute_pairs``) mean a partition on their
    product: the rules hold as they are, since a group is kept whole only when *every* sketched
    attribute is a group-by attribute (each group then lies in one cell), and is otherwise
    reasoned about as a sub-bag.

    A sketch on the group-by attribute keeps groups whole; one on the summed attribute would cut
    groups and change what passes the HAVING:

    >>> from advisor.plan.parse import parse_sql
    >>> q = parse_sql("SELECT a, sum(b) AS s FROM t GROUP BY a HAVING sum(b) > 3",
    ...               {"t": [("a", "int"), ("b", "int")]}.get)
    >>> v = check_safety(q.root, {"t_a_1"}, {})
    >>> v.safe, v.reason
    (True, 'a is a group-by attribute (GROUP BY a): groups are kept whole')
    >>> check_safety(q.root, {"t_b_2"}, {}).safe
    False
    """
    X = set(X)
    _validate_X(root, X, per_scan_max)
    if not X:
        return Verdict(True, "no sketch attribute: the query runs on unmodified data", 0, [])
    tables = {s.table for s in root.walk() if isinstance(s, ir.Scan)}
    skey = tuple(sorted((k, repr(v)) for k, v in stats.items() if k[0] in tables))
    skey += tuple(sorted(x for x in stats.get(NOT_NULL, ()) if x[0] in tables))
    key = (fingerprint(root), frozenset(X), skey, timeout_ms)
    hit = _CACHE.get(key)
    if hit is None:
        with z3_section():
            hit = SafetyChecker(root, X, stats, timeout_ms).run()
        _CACHE.put(key, hit)
    return replace(hit, details=list(hit.details))


def check_combination(root: ir.Node, picks: Mapping[int, str], stats: Mapping,
                      timeout_ms: int = TIMEOUT_MS) -> Verdict:
    """Safety of a multi-table X given as {scan_id: internal attribute name}."""
    scans = {s.scan_id: s for s in root.walk() if isinstance(s, ir.Scan)}
    for sid, name in picks.items():
        if sid not in scans or name not in scans[sid].names:
            raise ValueError(f"{name} is not a column of scan {sid}")
    return check_safety(root, set(picks.values()), stats, timeout_ms)


def safe_candidates(root: ir.Node, stats: Mapping, candidates: Mapping[int, list[str]],
                    timeout_ms: int = TIMEOUT_MS) -> dict[str, Verdict]:
    """Check each single candidate attribute (X = {a}) per scan; returns {internal name: Verdict}."""
    out: dict[str, Verdict] = {}
    for sid, names in candidates.items():
        for name in names:
            out[name] = check_combination(root, {sid: name}, stats, timeout_ms)
    return out
