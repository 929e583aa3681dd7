"""Recognising a linear recursive query over a link table (sqlglot AST -> ``RecursiveShape``).

Sketched: one ``WITH RECURSIVE r(...) AS (base UNION step)`` with set semantics over one link
table, in two families.  *Pairs*: the base is ``SELECT src, dst[, cost][, 1] FROM link`` and the
step joins ``r`` with the link table once, extending paths forward (``r.dst = l.src``) or backward
(``l.dst = r.src``).  *Node sets*: the base is ``SELECT dst[, cost][, 1] FROM link`` and the step
``SELECT l.dst[, r.cost + l.cost][, r.hops + 1] FROM r JOIN link l ON l.src = r.node`` (the nodes
reached from the base links' sources; with ``src`` and ``dst`` swapped, the nodes that reach
them: the same forward shape over the swapped columns, so ``src_col`` is the link's near end).  Either adds costs and
hops, with an optional hop bound (``r.hops < K``); the base may select link rows by any predicate
on the link's columns (``src = lit`` and ``dst = lit`` are also used to start the evaluation), and
so may the step (``l.cost < 10``).  The outer query reads ``r`` alone: any selection, grouping,
HAVING, ORDER BY and LIMIT.  Other recursive shapes raise ``Unsupported`` naming the shape (they
run in the general semi-naive loop without a sketch, ``advisor.recursive.linear``); malformed
recursion (no base case, non-linear) raises ``BadInput``.

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
from advisor.recursive.shape_sql import and_all, conjuncts, outer_query, row_predicate, source_values

RECURSIVE = re.compile(r"\bwith\s+recursive\b", re.IGNORECASE)


def looks_recursive(sql: str) -> bool:
    """Whether the text has a ``WITH RECURSIVE`` clause (a cheap test before parsing).

    >>> looks_recursive("with  Recursive r as (select 1) select * from r"), looks_recursive("select 1")
    (True, False)
    """
    return bool(RECURSIVE.search(sql))


@dataclass(frozen=True)
class RecursiveShape:
    """A recognised linear recursive query.  View tuples are ``(src, dst[, cost][, hops])``, or
    ``(node[, cost][, hops])`` for node sets, in the order of ``columns``; ``forward`` steps append
    a link at the destination end (the source is fixed along a derivation), backward steps prepend
    one at the source end (node sets are always forward, from ``src_col`` to ``dst_col``).
    ``base_filter``/``step_filter`` are the other link-row selections of the base and the step, as
    SQL over the link table's columns."""

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
    nodes: bool = False
    base_targets: frozenset | None = None
    base_filter: str | None = None
    step_filter: str | None = None

    @property
    def sources(self) -> frozenset | None:
        """Sources the evaluation may start from: the base selection, and for forward pair steps
        also the outer selection on the source (a forward derivation never changes its source)."""
        srcs = self.base_sources
        if self.forward and not self.nodes and self.outer_sources is not None:
            srcs = self.outer_sources if srcs is None else srcs & self.outer_sources
        return srcs

    @property
    def template(self) -> str:
        return " ".join(self.sql.split()).lower()

    def describe(self) -> str:
        """One line on what the query computes."""
        what = "paths with cost" if self.cost_col else "reachability"
        hops = f", at most {self.max_hops} hops" if self.max_hops is not None else ""
        if self.nodes:
            what = f"node set: {what}"
            way = f"along {self.table}.{self.src_col} -> {self.table}.{self.dst_col}"
        else:
            way = "forward (append a link at the destination)" if self.forward else "backward (prepend a link)"
        sel = f", from {len(self.sources)} selected source(s)" if self.sources is not None else ""
        if self.base_filter or self.step_filter:
            sel += "".join(
                f", {w} selects links by {f}"
                for w, f in (("the base", self.base_filter), ("the step", self.step_filter))
                if f
            )
        ends = "node" if self.nodes else "(src, dst)"
        outer = (
            f"MIN/MAX per {ends}: " + ", ".join(f"{f}({c})" for f, c in self.aggregates)
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
        if any(True for _ in s.find_all(exp.Not, exp.Except, exp.Exists)):
            raise Unsupported(
                f"negation in the recursion of {name}: only monotone (negation-free) recursion is sketched"
            )
        if s.args.get("group") or any(s.find_all(exp.AggFunc)):
            raise Unsupported(
                f"aggregation inside the recursion of {name}: only aggregation in the outer query is sketched"
            )
        if s.args.get("distinct") or s.args.get("limit") or s.args.get("order"):
            raise Unsupported(f"DISTINCT, ORDER BY or LIMIT inside the recursion of {name}")
    table, outs, has_hops, conds = _base(base_q, name)
    cols = [c.name.lower() for c in (cte.args.get("alias").columns if cte.args.get("alias") else [])]
    if not cols:
        cols = [e.alias_or_name.lower() for e in base_q.expressions]
    width = len(outs) + has_hops
    if len(cols) != width or len(set(cols)) != width:
        raise BadInput(
            f"recursive CTE {name} names {len(cols)} distinct column(s) for {width} base output(s)"
        )
    if len(outs) > 3:
        raise Unsupported(f"the base query of {name} outputs more than src, dst and a cost")
    attempts = ([_pairs] if len(outs) >= 2 else []) + ([_nodes] if len(outs) <= 2 else [])
    errors = []
    for attempt in attempts:
        try:
            parts = attempt(step, name, table, outs, has_hops, cols)
            break
        except Unsupported as e:
            errors.append(e)
    else:
        raise errors[0]
    src_col, dst_col, cost_col, forward, max_hops, step_filter, nodes = parts
    sources, targets, residual = _selection(conds, src_col, dst_col)
    if (cost_col is not None or has_hops) and max_hops is None:
        raise Unsupported(
            f"recursive CTE {name} carries path costs or hop counts without a hop bound: "
            "path enumeration does not terminate on cyclic links"
        )
    outer = tree.copy()
    outer.set("with_", None)
    outer.set("with", None)
    outer_sources, kind, aggs = outer_query(outer, name, cols, 1 if nodes else 2)
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
        sources,
        outer_sources,
        kind,
        aggs,
        outer,
        nodes=nodes,
        base_targets=targets,
        base_filter=residual,
        step_filter=step_filter,
    )


def _branches(u: exp.Expression) -> list:
    if isinstance(u, exp.Union):
        return _branches(u.this) + _branches(u.expression)
    if isinstance(u, exp.Subquery):
        return _branches(u.this)
    return [u]


def _reads(e: exp.Expression, name: str) -> bool:
    return any(t.name.lower() == name for t in e.find_all(exp.Table))


def _base(q: exp.Select, name: str):
    """(link table, output column names, whether it ends in the hop count 1, WHERE conjuncts)."""
    froms = [q.args["from_"].this] if q.args.get("from_") else []
    if len(froms) != 1 or q.args.get("joins") or not isinstance(froms[0], exp.Table):
        raise Unsupported(f"the base query of {name} does not read one link table")
    outs, hops = [], False
    exprs = [e.unalias() for e in q.expressions]
    for i, e in enumerate(exprs):
        if isinstance(e, exp.Column):
            outs.append(e.name.lower())
        elif isinstance(e, exp.Literal) and e.this == "1" and i == len(exprs) - 1 and outs:
            hops = True
        else:
            raise Unsupported(
                f"the base query of {name} outputs {e.sql()}: only link columns and 1 as the hop count "
                "are sketched"
            )
    conds = conjuncts(q.args["where"].this if q.args.get("where") else None)
    return froms[0].name.lower(), outs, hops, conds


def _selection(conds: list, src: str, dst: str):
    """(source values, destination values, residual predicate) of the base query's WHERE."""
    sources = targets = None
    residual = []
    for c in conds:
        vals = source_values(c, src)
        if vals is not None:
            sources = vals if sources is None else sources & vals
            continue
        vals = source_values(c, dst)
        if vals is not None:
            targets = vals if targets is None else targets & vals
            continue
        p = row_predicate(c, lambda k: True)
        if p is None:
            raise Unsupported(f"the base query filters on {c.sql()}: only predicates on link columns are sketched")
        residual.append(p)
    return sources, targets, and_all(residual)


class _Step:
    """The recursive step's tables, conditions and a classifier of its columns (view or link)."""

    def __init__(self, q: exp.Select, name: str, table: str, cols: list, link_cols: tuple):
        tabs = [q.args["from_"].this] + [j.this for j in q.args.get("joins") or []]
        if len(tabs) != 2 or not all(isinstance(t, exp.Table) for t in tabs):
            raise Unsupported(f"the recursive step of {name} joins other tables than {name} and one link table")
        rec = [t for t in tabs if t.name.lower() == name]
        link = [t for t in tabs if t.name.lower() == table]
        if len(rec) != 1 or len(link) != 1:
            raise Unsupported(f"the recursive step of {name} does not join {name} with the base table {table}")
        self.ra, self.la = rec[0].alias_or_name.lower(), link[0].alias_or_name.lower()
        self.cols, self.link_cols = cols, link_cols
        self.conds = conjuncts(q.args["where"].this if q.args.get("where") else None)
        for j in q.args.get("joins") or []:
            if j.args.get("using") or (j.args.get("side") or j.args.get("kind", "")).upper() in (
                "LEFT",
                "RIGHT",
                "FULL",
                "ANTI",
            ):
                raise Unsupported(f"the recursive step of {name} uses an outer or USING join")
            self.conds += conjuncts(j.args.get("on"))
        self.outs = [e.unalias() for e in q.expressions]

    def side(self, c: exp.Expression):
        if isinstance(c, exp.Column):
            t, n = (c.table or "").lower(), c.name.lower()
            if t == self.ra or (not t and n in self.cols and n not in self.link_cols):
                return ("r", n)
            if t == self.la or (not t and n not in self.cols):
                return ("l", n)
        return None

    def is_link(self, c: exp.Column) -> bool:
        s = self.side(c)
        return s is not None and s[0] == "l"

    def hop_bound(self, c: exp.Expression, hops: bool):
        """The hop bound ``r.hops < K`` (or ``<=``) as the largest hop count kept, else None."""
        if (
            hops
            and isinstance(c, (exp.LT, exp.LTE))
            and self.side(c.this) == ("r", self.cols[-1])
            and isinstance(c.expression, exp.Literal)
            and not c.expression.is_string
        ):
            k = int(c.expression.this)
            return k if isinstance(c, exp.LT) else k + 1
        return None


def _tail(st: _Step, name: str, extra: list, cost: str | None, hops: bool, w: int) -> None:
    """Check the step's outputs after the endpoints: the added cost and the counted hop."""
    cols = st.cols
    if cost is not None:
        c = extra.pop(0)
        if not (isinstance(c, exp.Add) and {st.side(c.this), st.side(c.expression)} == {("r", cols[w]), ("l", cost)}):
            raise Unsupported(f"the recursive step of {name} does not add the link cost to the path cost")
    if hops:
        h = extra.pop(0)
        if not (
            isinstance(h, exp.Add)
            and st.side(h.this) == ("r", cols[-1])
            and isinstance(h.expression, exp.Literal)
            and h.expression.this == "1"
        ):
            raise Unsupported(f"the recursive step of {name} does not count hops as {name}.{cols[-1]} + 1")


def _bound(max_hops, k):
    return k if max_hops is None else min(max_hops, k)


def _bound_or_selection(st, c, hops: bool, max_hops, filters: list, name: str):
    """A step condition other than the link join: a hop bound (the tighter bound is returned) or a
    selection of link rows (appended to ``filters``); anything else is not sketched."""
    if (k := st.hop_bound(c, hops)) is not None:
        return _bound(max_hops, k)
    if (p := row_predicate(c, st.is_link)) is not None:
        filters.append(p)
        return max_hops
    raise Unsupported(
        f"the recursive step of {name} has the condition {c.sql()}: only the link join, a hop "
        "bound and selections of link rows are sketched"
    )


def _pairs(q: exp.Select, name: str, table: str, outs: list, hops: bool, cols: list):
    """The pair family's step (module docstring): (src, dst, cost, forward, max hops, step filter, False)."""
    src, dst = outs[0], outs[1]
    cost = outs[2] if len(outs) > 2 else None
    st = _Step(q, name, table, cols, tuple(c for c in (src, dst, cost) if c))
    forward, max_hops, filters = None, None, []
    for c in st.conds:
        if isinstance(c, exp.EQ) and st.side(c.this) and st.side(c.expression):
            pair = {st.side(c.this), st.side(c.expression)}
            if pair == {("r", cols[1]), ("l", src)}:
                forward = True if forward is None else None
                continue
            if pair == {("l", dst), ("r", cols[0])}:
                forward = False if forward is None else None
                continue
        max_hops = _bound_or_selection(st, c, hops, max_hops, filters, name)
    if forward is None:
        raise Unsupported(
            f"the recursive step of {name} does not extend paths by one link "
            f"({name}.{cols[1]} = {table}.{src} or {table}.{dst} = {name}.{cols[0]})"
        )
    want = [("r", cols[0]), ("l", dst)] if forward else [("l", src), ("r", cols[1])]
    if len(st.outs) != len(cols) or [st.side(o) for o in st.outs[:2]] != want:
        raise Unsupported(f"the recursive step of {name} does not output the extended path's endpoints")
    _tail(st, name, st.outs[2:], cost, hops, 2)
    if max_hops is not None and max_hops < 1:
        raise BadInput(f"the hop bound of {name} admits no path")
    return src, dst, cost, forward, max_hops, and_all(filters), False


def _nodes(q: exp.Select, name: str, table: str, outs: list, hops: bool, cols: list):
    """The node-set family's step (module docstring): the join column is the link's near end."""
    far = outs[0]
    cost = outs[1] if len(outs) > 1 else None
    st = _Step(q, name, table, cols, tuple(c for c in (far, cost) if c))
    near, max_hops, filters = None, None, []
    for c in st.conds:
        if isinstance(c, exp.EQ) and st.side(c.this) and st.side(c.expression):
            pair = {st.side(c.this), st.side(c.expression)}
            other = pair - {("r", cols[0])}
            if len(pair) == 2 and len(other) == 1 and next(iter(other))[0] == "l" and near is None:
                near = next(iter(other))[1]
                continue
        max_hops = _bound_or_selection(st, c, hops, max_hops, filters, name)
    if near is None or near == far:
        raise Unsupported(
            f"the recursive step of {name} does not extend the node set by one link "
            f"({table}.<near end> = {name}.{cols[0]}, outputting {table}.{far})"
        )
    if len(st.outs) != len(cols) or st.side(st.outs[0]) != ("l", far):
        raise Unsupported(f"the recursive step of {name} does not output the link's far end {far}")
    _tail(st, name, st.outs[1:], cost, hops, 1)
    if max_hops is not None and max_hops < 1:
        raise BadInput(f"the hop bound of {name} admits no path")
    return near, far, cost, True, max_hops, and_all(filters), True
