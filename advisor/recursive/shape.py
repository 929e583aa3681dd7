"""Recognising a linear recursive query over a link table (sqlglot AST -> ``RecursiveShape``).

Supported: one ``WITH RECURSIVE r(...) AS (base UNION step)`` with set semantics, where the base
reads the link table (``src, dst`` and optionally a cost column and ``1`` as the hop count, with an
optional selection on the source) and the step joins ``r`` with the link table once, extending
paths forward (``r.dst = l.src``) or backward (``l.dst = r.src``), adding costs and hops, with an
optional hop bound (``r.hops < K``).  The outer query reads ``r`` alone: any selection, grouping,
HAVING, ORDER BY and LIMIT.  Other recursive shapes raise ``Unsupported`` naming the shape
(they run without a sketch); malformed recursion (no base case, non-linear) raises ``BadInput``.

>>> s = recognise("WITH RECURSIVE r(src, dst) AS (SELECT src, dst FROM link UNION "
...               "SELECT l.src, r.dst FROM link l JOIN r ON l.dst = r.src) SELECT * FROM r")
>>> (s.table, s.forward, s.max_hops, s.kind)
('link', False, None, 'all')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp

from advisor.errors import BadInput, Unsupported
from advisor.plan.read_only import check_read_only

RECURSIVE = re.compile(r"\bwith\s+recursive\b", re.IGNORECASE)


def looks_recursive(sql: str) -> bool:
    """Whether the text has a ``WITH RECURSIVE`` clause (a cheap test before parsing).

    >>> looks_recursive("with  Recursive r as (select 1) select * from r"), looks_recursive("select 1")
    (True, False)
    """
    return bool(RECURSIVE.search(sql))


@dataclass(frozen=True)
class RecursiveShape:
    """A recognised linear recursive query.  View tuples are ``(src, dst[, cost][, hops])`` in the
    order of ``columns``; ``forward`` steps append a link at the destination end (the source is
    fixed along a derivation), backward steps prepend one at the source end."""

    sql: str
    cte: str
    columns: tuple
    table: str
    src_col: str
    dst_col: str
    cost_col: str | None
    has_hops: bool
    max_hops: int | None
    forward: bool
    base_sources: frozenset | None
    outer_sources: frozenset | None
    kind: str  # "minmax": GROUP BY (src, dst) with MIN/MAX aggregates only; "all": anything else
    aggregates: tuple = field(default=())  # ((func, view column), ...) of a minmax outer query
    outer: exp.Expression | None = field(default=None, compare=False, repr=False)

    @property
    def sources(self) -> frozenset | None:
        """Sources the evaluation may start from: the base selection, and for forward steps also
        the outer selection on the source (a forward derivation never changes its source)."""
        srcs = self.base_sources
        if self.forward and self.outer_sources is not None:
            srcs = self.outer_sources if srcs is None else srcs & self.outer_sources
        return srcs

    @property
    def template(self) -> str:
        return " ".join(self.sql.split()).lower()

    def describe(self) -> str:
        """One line on what the query computes."""
        what = "paths with cost" if self.cost_col else "reachability"
        hops = f", at most {self.max_hops} hops" if self.max_hops is not None else ""
        way = "forward (append a link at the destination)" if self.forward else "backward (prepend a link)"
        sel = f", from {len(self.sources)} selected source(s)" if self.sources is not None else ""
        outer = (
            "MIN/MAX per (src, dst): " + ", ".join(f"{f}({c})" for f, c in self.aggregates)
            if self.kind == "minmax"
            else "outer query over the whole view"
        )
        return f"linear recursion over {self.table}: {what}, {way}{hops}{sel}; {outer}"

    def outer_sql(self, view: str) -> str:
        """The outer query with the recursive view replaced by the temp view ``view``."""
        tree = self.outer.copy()
        for t in tree.find_all(exp.Table):
            if t.name.lower() == self.cte:
                t.set("this", exp.to_identifier(view))
                if not t.alias:
                    t.set("alias", exp.TableAlias(this=exp.to_identifier(self.cte)))
        return tree.sql(dialect="spark")


def recognise(sql: str) -> RecursiveShape:
    """The shape of a recursive query, or ``Unsupported``/``BadInput`` (module docstring)."""
    try:
        stmts = [s for s in sqlglot.parse(sql, read="spark") if s is not None]
    except sqlglot.errors.SqlglotError as e:  # parser and tokenizer errors
        raise BadInput(f"malformed SQL: {str(e).splitlines()[0]}") from None
    if len(stmts) != 1 or not isinstance(stmts[0], exp.Select):
        raise BadInput("expected exactly one SELECT statement")
    tree = stmts[0]
    check_read_only(tree)  # before anything runs it, sketched or plainly
    with_ = tree.args.get("with_") or tree.args.get("with")
    if with_ is None or not with_.args.get("recursive"):
        raise Unsupported("not a recursive query")
    ctes = list(with_.expressions)
    names = [c.alias_or_name.lower() for c in ctes]
    refs = {n: {t.name.lower() for t in c.this.find_all(exp.Table)} & set(names) for n, c in zip(names, ctes)}
    if any(refs[a] - {a} for a in names):
        rec = sorted(a for a in names if refs[a])
        raise Unsupported(
            f"mutual or nested recursion across CTEs {', '.join(rec)}: only one linear "
            "recursive CTE is sketched"
        )
    recursive = [c for n, c in zip(names, ctes) if n in refs[n]]
    if not recursive:
        raise Unsupported("WITH RECURSIVE without a self-reference: not a recursive query")
    if len(ctes) > 1:
        raise Unsupported("more than one CTE next to the recursive one: only one recursive CTE is sketched")
    cte = recursive[0]
    name = cte.alias_or_name.lower()
    return _shape(sql, tree, cte, name)


def _shape(sql: str, tree: exp.Select, cte: exp.CTE, name: str) -> RecursiveShape:
    body = cte.this
    if not isinstance(body, exp.Union):
        raise BadInput(
            f"recursive CTE {name} has no base case: its body must be a base query UNION a recursive step"
        )
    branches = _branches(body)
    base = [b for b in branches if not _reads(b, name)]
    steps = [b for b in branches if _reads(b, name)]
    if not base:
        raise BadInput(f"recursive CTE {name} has no base case: every branch of its UNION reads {name}")
    for s in steps:
        n = sum(1 for t in s.find_all(exp.Table) if t.name.lower() == name)
        if n > 1:
            raise BadInput(
                f"recursive CTE {name} is non-linear: its step reads {name} {n} times "
                "(only linear recursion is evaluated)"
            )
    if any(isinstance(u, exp.Union) and not u.args.get("distinct") for u in body.find_all(exp.Union)):
        raise Unsupported(
            f"recursive CTE {name} uses UNION ALL (bag semantics): only set semantics (UNION) is sketched"
        )
    if len(base) != 1 or len(steps) != 1:
        raise Unsupported(
            f"recursive CTE {name} has {len(base)} base queries and {len(steps)} recursive "
            "steps: one of each is sketched"
        )
    base_q, step = base[0], steps[0]
    for s in (base_q, step):
        if not isinstance(s, exp.Select):
            raise Unsupported(f"recursive CTE {name}: a branch is not a plain SELECT")
        if any(
            isinstance(n, (exp.Not, exp.Except, exp.Exists))
            for n in s.find_all(exp.Not, exp.Except, exp.Exists)
        ):
            raise Unsupported(
                f"negation in the recursion of {name}: only monotone (negation-free) recursion is sketched"
            )
        if s.args.get("group") or any(s.find_all(exp.AggFunc)):
            raise Unsupported(
                f"aggregation inside the recursion of {name}: only aggregation in the outer query is sketched"
            )
        if s.args.get("distinct") or s.args.get("limit") or s.args.get("order"):
            raise Unsupported(f"DISTINCT, ORDER BY or LIMIT inside the recursion of {name}")
    table, src_col, dst_col, cost_col, has_hops, base_sources = _base(base_q, name)
    cols = [c.name.lower() for c in (cte.args.get("alias").columns if cte.args.get("alias") else [])]
    if not cols:
        cols = [e.alias_or_name.lower() for e in base_q.expressions]
    width = 2 + (cost_col is not None) + has_hops
    if len(cols) != width or len(set(cols)) != width:
        raise BadInput(
            f"recursive CTE {name} names {len(cols)} distinct column(s) for {width} base output(s)"
        )
    forward, max_hops = _step(step, name, table, src_col, dst_col, cost_col, has_hops, cols)
    if (cost_col is not None or has_hops) and max_hops is None:
        raise Unsupported(
            f"recursive CTE {name} carries path costs or hop counts without a hop bound: "
            "path enumeration does not terminate on cyclic links"
        )
    outer = tree.copy()
    outer.set("with_", None)
    outer.set("with", None)
    outer_sources, kind, aggs = _outer(outer, name, cols)
    return RecursiveShape(
        sql,
        name,
        tuple(cols),
        table,
        src_col,
        dst_col,
        cost_col,
        has_hops,
        max_hops,
        forward,
        base_sources,
        outer_sources,
        kind,
        aggs,
        outer,
    )


def _branches(u: exp.Expression) -> list:
    if isinstance(u, exp.Union):
        return _branches(u.this) + _branches(u.expression)
    if isinstance(u, exp.Subquery):
        return _branches(u.this)
    return [u]


def _reads(e: exp.Expression, name: str) -> bool:
    return any(t.name.lower() == name for t in e.find_all(exp.Table))


def _literal(e: exp.Expression):
    if isinstance(e, exp.Neg) and isinstance(e.this, exp.Literal) and not e.this.is_string:
        v = _literal(e.this)
        return -v
    if not isinstance(e, exp.Literal):
        raise Unsupported(f"a selection on the source compares with {e.sql()} (literals only are sketched)")
    if e.is_string:
        return e.this
    return int(e.this) if re.fullmatch(r"-?\d+", e.this) else float(e.this)


def _conjuncts(e: exp.Expression | None) -> list:
    if e is None:
        return []
    if isinstance(e, exp.Paren):
        return _conjuncts(e.this)
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    return [e]


def _source_values(c: exp.Expression, col: str) -> frozenset | None:
    """Values of ``col = lit`` or ``col IN (lits)``; None if ``c`` is not such a selection."""
    if isinstance(c, exp.EQ):
        for a, b in ((c.this, c.expression), (c.expression, c.this)):
            if isinstance(a, exp.Column) and a.name.lower() == col:
                return frozenset([_literal(b)])
    if (
        isinstance(c, exp.In)
        and isinstance(c.this, exp.Column)
        and c.this.name.lower() == col
        and c.args.get("expressions")
    ):
        return frozenset(_literal(v) for v in c.args["expressions"])
    return None


def _base(q: exp.Select, name: str):
    froms = [q.args["from_"].this] if q.args.get("from_") else []
    if len(froms) != 1 or q.args.get("joins") or not isinstance(froms[0], exp.Table):
        raise Unsupported(f"the base query of {name} reads more than one link table")
    table = froms[0].name.lower()
    outs = q.expressions
    if not 2 <= len(outs) <= 4 or not all(isinstance(e.unalias(), exp.Column) for e in outs[:2]):
        raise Unsupported(f"the base query of {name} is not SELECT src, dst[, cost][, 1] FROM a link table")
    src_col, dst_col = (e.unalias().name.lower() for e in outs[:2])
    cost_col, has_hops = None, False
    rest = [e.unalias() for e in outs[2:]]
    if rest and isinstance(rest[0], exp.Column):
        cost_col = rest.pop(0).name.lower()
    if rest:
        if not (isinstance(rest[0], exp.Literal) and rest[0].this == "1") or len(rest) > 1:
            raise Unsupported(
                f"the base query of {name} is not SELECT src, dst[, cost][, 1] FROM a link table"
            )
        has_hops = True
    sources = None
    for c in _conjuncts(q.args["where"].this if q.args.get("where") else None):
        vals = _source_values(c, src_col)
        if vals is None:
            raise Unsupported(
                f"the base query of {name} filters on {c.sql()}: only a selection of "
                "source values is sketched"
            )
        sources = vals if sources is None else sources & vals
    return table, src_col, dst_col, cost_col, has_hops, sources


def _step(q: exp.Select, name: str, table: str, src: str, dst: str, cost: str | None, hops: bool, cols: list):
    tabs = [q.args["from_"].this] + [j.this for j in q.args.get("joins") or []]
    if len(tabs) != 2 or not all(isinstance(t, exp.Table) for t in tabs):
        raise Unsupported(f"the recursive step of {name} joins other tables than {name} and one link table")
    rec = [t for t in tabs if t.name.lower() == name]
    link = [t for t in tabs if t.name.lower() == table]
    if len(rec) != 1 or len(link) != 1:
        raise Unsupported(f"the recursive step of {name} does not join {name} with the base table {table}")
    ra, la = rec[0].alias_or_name.lower(), link[0].alias_or_name.lower()
    conds = _conjuncts(q.args["where"].this if q.args.get("where") else None)
    for j in q.args.get("joins") or []:
        if j.args.get("using") or (j.args.get("side") or j.args.get("kind", "")).upper() in (
            "LEFT",
            "RIGHT",
            "FULL",
            "ANTI",
        ):
            raise Unsupported(f"the recursive step of {name} uses an outer or USING join")
        conds += _conjuncts(j.args.get("on"))

    def side(c: exp.Expression):
        if isinstance(c, exp.Column):
            t = (c.table or "").lower()
            if t == ra or (not t and c.name.lower() in cols and c.name.lower() not in (src, dst, cost)):
                return ("r", c.name.lower())
            if t == la:
                return ("l", c.name.lower())
        return None

    forward, max_hops = None, None
    for c in conds:
        if isinstance(c, exp.EQ) and side(c.this) and side(c.expression):
            pair = {side(c.this), side(c.expression)}
            if pair == {("r", cols[1]), ("l", src)}:
                forward = True if forward is None else None
                continue
            if pair == {("l", dst), ("r", cols[0])}:
                forward = False if forward is None else None
                continue
        if (
            hops
            and isinstance(c, (exp.LT, exp.LTE))
            and side(c.this) == ("r", cols[-1])
            and isinstance(c.expression, exp.Literal)
            and not c.expression.is_string
        ):
            k = int(c.expression.this)
            bound = k if isinstance(c, exp.LT) else k + 1
            max_hops = bound if max_hops is None else min(max_hops, bound)
            continue
        raise Unsupported(
            f"the recursive step of {name} has the condition {c.sql()}: only the link join "
            "and a hop bound on the hop count are sketched"
        )
    if forward is None:
        raise Unsupported(
            f"the recursive step of {name} does not extend paths by one link "
            f"({name}.{cols[1]} = {table}.{src} or {table}.{dst} = {name}.{cols[0]})"
        )
    want = [("r", cols[0]), ("l", dst)] if forward else [("l", src), ("r", cols[1])]
    outs = [e.unalias() for e in q.expressions]
    if len(outs) != len(cols) or [side(o) for o in outs[:2]] != want:
        raise Unsupported(f"the recursive step of {name} does not output the extended path's endpoints")
    extra = outs[2:]
    if cost is not None:
        c = extra.pop(0)
        if not (
            isinstance(c, exp.Add) and {side(c.this), side(c.expression)} == {("r", cols[2]), ("l", cost)}
        ):
            raise Unsupported(f"the recursive step of {name} does not add the link cost to the path cost")
    if hops:
        h = extra.pop(0)
        if not (
            isinstance(h, exp.Add)
            and side(h.this) == ("r", cols[-1])
            and isinstance(h.expression, exp.Literal)
            and h.expression.this == "1"
        ):
            raise Unsupported(f"the recursive step of {name} does not count hops as {name}.{cols[-1]} + 1")
    if max_hops is not None and max_hops < 1:
        raise BadInput(f"the hop bound of {name} admits no path")
    return forward, max_hops


def _outer(q: exp.Select, name: str, cols: list):
    froms = [q.args["from_"].this] if q.args.get("from_") else []
    if (
        len(froms) != 1
        or q.args.get("joins")
        or not isinstance(froms[0], exp.Table)
        or froms[0].name.lower() != name
    ):
        raise Unsupported(f"the outer query joins the recursive view {name} with other relations")
    if any(isinstance(s, (exp.Subquery, exp.Window)) for s in q.find_all(exp.Subquery, exp.Window)):
        raise Unsupported("a subquery or window in the outer query of a recursive view")
    sources, other_filters = None, False
    for c in _conjuncts(q.args["where"].this if q.args.get("where") else None):
        try:
            vals = _source_values(c, cols[0])
        except Unsupported:
            vals = None
        if vals is not None:
            sources = vals if sources is None else sources & vals
        else:
            other_filters = True  # the extremes are then over filtered groups: keep every tuple
    group = q.args.get("group")
    keys = {g.name.lower() for g in group.expressions if isinstance(g, exp.Column)} if group else set()
    aggs = []
    minmax = bool(group) and len(group.expressions) == 2 and keys == {cols[0], cols[1]} and not other_filters
    for a in q.find_all(exp.AggFunc):
        if (
            isinstance(a, (exp.Min, exp.Max))
            and isinstance(a.this, exp.Column)
            and a.this.name.lower() in cols
        ):
            pair = ("min" if isinstance(a, exp.Min) else "max", a.this.name.lower())
            if pair not in aggs:
                aggs.append(pair)
        else:
            minmax = False
    minmax = minmax and bool(aggs)
    return sources, ("minmax" if minmax else "all"), (tuple(aggs) if minmax else ())
