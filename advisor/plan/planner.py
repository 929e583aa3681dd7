"""The planner proper: a sqlglot SELECT tree the entry checks of ``advisor.plan.parse`` let through
-> IR nodes, scope by scope (FROM and joins, WHERE, aggregation, ORDER BY / LIMIT).  Apart from
the parser's statement checks and templates so that each reads on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Optional

from sqlglot import exp

from advisor.errors import BadInput, Unsupported
from advisor.plan import ir
from advisor.plan.expr_types import infer

SchemaLookup = Callable[[str], list[tuple[str, str]]]  # table -> [(column, type)]; raises BadInput
AGG_CLASSES = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}


@dataclass
class _Entry:
    qual: Optional[str]
    name: str
    col: ir.Col


@dataclass
class _Rel:
    """A planned relation: its node and the user-visible names of its output columns."""

    node: ir.Node
    names: list[str]
    order: list[tuple[str, bool]]
    sorts_hidden: bool = False  # ``order`` names columns below the final projection (no LIMIT)


class Planner:
    """Plans one statement's query blocks over ``schema``, naming every column it makes afresh."""

    def __init__(self, schema: SchemaLookup):
        self.schema = schema
        self.n = 0
        self.scan_n = 0

    def fresh(self, base: str) -> str:
        self.n += 1
        clean = re.sub(r"[^a-z0-9_]", "_", base.lower())[:40] or "c"
        return f"{clean}_{self.n}"

    # ---------------- queries ----------------
    def plan_query(self, tree: exp.Expression, ctes: dict) -> _Rel:
        with_ = tree.args.get("with_") or tree.args.get("with")
        if with_ is not None and with_.args.get("recursive"):
            # planned by ``advisor.recursive`` (the advise path routes it there); here it would
            # expand the CTE into itself without end
            raise Unsupported("recursive CTE (WITH RECURSIVE): planned by the recursive-query path")
        if with_ is not None:
            ctes = dict(ctes)
            for cte in with_.expressions:
                ctes[cte.alias_or_name.lower()] = cte.this
        if isinstance(tree, exp.Union):
            return self.plan_union(tree, ctes)
        if isinstance(tree, exp.Subquery):
            return self.plan_query(tree.this, ctes)
        return self.plan_select(tree, ctes)

    def plan_union(self, u: exp.Union, ctes: dict) -> _Rel:
        left = self.plan_query(u.this, ctes)
        right = self.plan_query(u.expression, ctes)
        if len(left.names) != len(right.names):
            raise BadInput(f"UNION branches have {len(left.names)} and {len(right.names)} columns")
        cols = [ir.Col(self.fresh(nm), c.dtype) for nm, c in zip(left.names, left.node.cols)]
        node: ir.Node = ir.Union(left.node, right.node, cols)
        if u.args.get("distinct"):
            node = ir.Distinct(node)
        rel = _Rel(node, left.names, [])
        return self._order_limit(rel, u, None)

    def plan_select(self, s: exp.Select, ctes: dict) -> _Rel:
        from_ = s.args.get("from_") or s.args.get("from")
        if from_ is None:
            raise Unsupported("SELECT without FROM is not supported")
        node, scope = self.plan_from_item(from_.this, ctes)
        for j in s.args.get("joins") or []:
            rnode, rscope = self.plan_from_item(j.this, ctes)
            both = scope + rscope
            partial = _partial_join(j)
            if partial is not None:
                cond = self.resolve(j.args["on"], both)
                node = partial(node, rnode, cond)
                if partial is ir.LeftJoin:
                    scope = both
                continue
            cond = None
            if j.args.get("on") is not None:
                cond = self.resolve(j.args["on"], both)
            elif j.args.get("using"):
                parts = []
                for ident in j.args["using"]:
                    lc = self._lookup(scope, None, ident.name)
                    rc = self._lookup(rscope, None, ident.name)
                    parts.append(exp.EQ(this=ir.col_ref(lc.name), expression=ir.col_ref(rc.name)))
                    rscope = [e for e in rscope if e.name != ident.name.lower()]
                cond = exp.and_(*parts)
                both = scope + rscope
            node = ir.Join(node, rnode, cond)
            scope = both
        where = s.args.get("where")
        if where is not None:
            if list(where.find_all(*AGG_CLASSES)):
                raise BadInput("aggregate functions are not allowed in WHERE")
            node = ir.Select(node, self.resolve(where.this, scope))
        has_agg = bool(s.args.get("group")) or any(
            list(e.find_all(*AGG_CLASSES)) for e in s.expressions) or s.args.get("having") is not None
        if has_agg:
            return self.plan_aggregate(s, node, scope)
        items = self.expand_star(s.expressions, scope)
        proj_items, names = [], []
        types = self._types(node)
        for e in items:
            r = self.resolve(e.this if isinstance(e, exp.Alias) else e, scope)
            nm = self._out_name(e)
            proj_items.append((r, ir.Col(self.fresh(nm), infer(r, types), *self._origin(r, node))))
            names.append(nm)
        rel = _Rel(ir.Project(node, proj_items), names, [])
        if s.args.get("distinct"):
            rel.node = ir.Distinct(rel.node)
        return self._order_limit(rel, s, lambda e: self.resolve(e, scope))

    # ---------------- FROM ----------------
    def plan_from_item(self, item: exp.Expression, ctes: dict) -> tuple[ir.Node, list[_Entry]]:
        if isinstance(item, exp.Table):
            name = item.name.lower()
            alias = (item.alias or item.name).lower()  # a database qualifier is ignored: one warehouse
            if name in ctes:
                rel = self.plan_query(ctes[name], ctes)
                return rel.node, [_Entry(alias, n.lower(), c) for n, c in zip(rel.names, rel.node.cols)]
            cols_t = self.schema(name)
            self.scan_n += 1
            cols = [ir.Col(self.fresh(f"{alias}_{c}"), t, name, c) for c, t in cols_t]
            scan = ir.Scan(name, alias, cols, self.scan_n)
            return scan, [_Entry(alias, c.source, c) for c in cols]
        if isinstance(item, exp.Subquery):
            alias = (item.alias or "").lower() or None
            rel = self.plan_query(item.this, ctes)
            return rel.node, [_Entry(alias, n.lower(), c) for n, c in zip(_column_aliases(item, rel), rel.node.cols)]
        raise Unsupported(f"FROM item {item.sql(dialect='spark')[:60]} is not supported")

    # ---------------- aggregation ----------------
    def plan_aggregate(self, s: exp.Select, node: ir.Node, scope: list[_Entry]) -> _Rel:
        """SELECT ``s`` with GROUP BY or aggregates over ``node``: keys, aggregate calls, HAVING,
        the SELECT list, DISTINCT and ORDER BY / LIMIT."""
        items = list(s.expressions)
        if any(isinstance(e, exp.Star) for e in items):
            raise BadInput("SELECT * cannot be combined with GROUP BY or aggregates")
        group_src = self._group_sources(s, items, scope)
        node, keys, key_by_sql = self._group_keys(group_src, node, scope)
        refs = _AggregateRefs(self, scope, self._types(node), key_by_sql)
        post_items = [(refs.post(e.this if isinstance(e, exp.Alias) else e), self._out_name(e)) for e in items]
        having = s.args["having"].this if s.args.get("having") is not None else None
        having = refs.post(self._select_aliases(having, items, scope)) if having is not None else None
        node = ir.Aggregate(node, keys, refs.aggs)
        if having is not None:
            node = ir.Select(node, having)
        refs.types = self._types(node)  # ORDER BY's new aggregates are typed against the aggregated node
        rel = self._project_aggregate(node, post_items, refs.types)
        if s.args.get("distinct"):
            rel.node = ir.Distinct(rel.node)
        return self._order_limit(rel, s, refs.post)

    def _group_sources(self, s: exp.Select, items: list, scope: list[_Entry]) -> list[exp.Expression]:
        """The GROUP BY expressions, a position or a SELECT alias (one no column of the scope
        shadows) replaced by the item it names."""
        group_src = []
        for g in (s.args["group"].expressions if s.args.get("group") else []):
            if isinstance(g, exp.Literal) and not g.is_string:
                pos = int(g.this)
                if not 1 <= pos <= len(items):
                    raise BadInput(f"GROUP BY position {pos} is out of range")
                g = items[pos - 1]
                g = g.this if isinstance(g, exp.Alias) else g
            elif isinstance(g, exp.Column) and not g.table:
                alias_hit = [e.this for e in items if isinstance(e, exp.Alias) and e.alias.lower() == g.name.lower()]
                if alias_hit and not self._has(scope, g.name):
                    g = alias_hit[0]
            group_src.append(g)
        return group_src

    def _group_keys(self, group_src: list, node: ir.Node, scope: list[_Entry]) -> tuple[ir.Node, list[str], dict]:
        """(input node, key names, key SQL -> key name): columns are keys directly, expressions are
        pre-projected under fresh names."""
        pre_items: list[tuple[exp.Expression, ir.Col]] = []
        keys: list[str] = []
        key_by_sql: dict[str, str] = {}
        types = self._types(node)
        for g in group_src:
            r = self.resolve(g, scope)
            if isinstance(r, exp.Column):
                name = r.name
            else:
                c = ir.Col(self.fresh("g"), infer(r, types))
                pre_items.append((r, c))
                name = c.name
            if name not in keys:
                keys.append(name)
            key_by_sql[r.sql()] = name
        if pre_items:
            node = ir.Project(node, [(ir.col_ref(c.name), c) for c in node.cols] + pre_items)
        return node, keys, key_by_sql

    def _project_aggregate(self, node: ir.Node, post_items: list, types: dict[str, str]) -> _Rel:
        """The SELECT list over the aggregated node, each item under a fresh name."""
        proj, names = [], []
        for r, nm in post_items:
            proj.append((r, ir.Col(self.fresh(nm), infer(r, types), *self._origin(r, node))))
            names.append(nm)
        return _Rel(ir.Project(node, proj), names, [])

    def _select_aliases(self, e: exp.Expression, items: list, scope: list[_Entry]) -> exp.Expression:
        """HAVING ``e`` with each name that is a SELECT alias, not a FROM column, replaced (Spark's way)."""
        aliases = {it.alias.lower(): it.this for it in items if isinstance(it, exp.Alias)}

        def fn(n):
            if isinstance(n, exp.Column) and not n.table and n.name.lower() in aliases \
                    and not self._has(scope, n.name.lower()):
                return aliases[n.name.lower()].copy()
            return n
        return e.copy().transform(fn)

    # ---------------- ORDER BY / LIMIT ----------------
    def _order_limit(self, rel: _Rel, s: exp.Expression, resolve_hidden) -> _Rel:
        order = s.args.get("order")
        limit = s.args.get("limit")
        if s.args.get("offset") is not None:
            raise Unsupported("OFFSET is not supported")
        keys: list[tuple[str, bool]] = []
        hidden = False
        if order is not None:
            proj = rel.node if isinstance(rel.node, ir.Project) else None
            for o in order.expressions:
                e, asc = o.this, not o.args.get("desc")
                if o.args.get("nulls_first") is not None and not _default_nulls(o):
                    raise Unsupported("explicit NULLS FIRST/LAST differing from Spark's default is not supported")
                target = None
                if isinstance(e, exp.Literal) and not e.is_string:
                    pos = int(e.this)
                    if not 1 <= pos <= len(rel.names):
                        raise BadInput(f"ORDER BY position {pos} is out of range")
                    target = rel.node.cols[pos - 1].name
                elif isinstance(e, exp.Column) and not e.table:
                    hits = [c.name for n, c in zip(rel.names, rel.node.cols) if n.lower() == e.name.lower()]
                    if hits:
                        target = hits[0]
                if target is None:
                    if resolve_hidden is None or proj is None:
                        raise BadInput(f"ORDER BY {e.sql()} must name an output column")
                    r = resolve_hidden(e)
                    same = [c.name for x, c in proj.items if x.sql() == r.sql()]
                    if same:
                        target = same[0]
                    else:
                        if isinstance(rel.node, ir.Distinct):
                            raise BadInput("ORDER BY of a SELECT DISTINCT must use selected columns")
                        c = ir.Col(self.fresh("ord"), infer(r, self._types(proj.child)))
                        proj.items.append((r, c))
                        target, hidden = c.name, True
                keys.append((target, asc))
        if limit is not None:
            lim = limit.expression if isinstance(limit, exp.Limit) else limit
            if not (isinstance(lim, exp.Literal) and not lim.is_string and lim.this.isdigit()):
                raise BadInput("LIMIT must be a non-negative integer literal")
            rel.node = ir.TopK(rel.node, keys, int(lim.this))
        if hidden:
            visible = rel.node.cols[: len(rel.names)]
            rel.node = ir.Project(rel.node, [(ir.col_ref(c.name), c) for c in visible])
        rel.order, rel.sorts_hidden = keys, hidden and limit is None
        return rel

    # ---------------- expressions ----------------
    def expand_star(self, items, scope: list[_Entry]) -> list[exp.Expression]:
        out = []
        for e in items:
            if isinstance(e, exp.Star):
                out += [exp.alias_(exp.column(en.name, en.qual), en.name) for en in scope]
            elif isinstance(e, exp.Column) and isinstance(e.this, exp.Star):
                q = e.table.lower()
                hits = [en for en in scope if en.qual == q]
                if not hits:
                    raise BadInput(f"unknown table alias {e.table!r} in {e.sql()}")
                out += [exp.alias_(exp.column(en.name, en.qual), en.name) for en in hits]
            else:
                out.append(e)
        return out

    def resolve(self, e: exp.Expression, scope: list[_Entry]) -> exp.Expression:
        """Copy of e with every column replaced by its internal attribute reference."""
        for sub in e.find_all(exp.Select, exp.Subquery):
            raise Unsupported("subqueries in expressions are not supported")

        def fn(n):
            if isinstance(n, exp.Column) and not isinstance(n.this, exp.Star):
                c = self._lookup(scope, n.table or None, n.name)
                return ir.col_ref(c.name)
            return n

        return e.copy().transform(fn)

    def _lookup(self, scope: list[_Entry], qual: Optional[str], name: str) -> ir.Col:
        name = name.lower()
        q = qual.lower() if qual else None
        hits = [en for en in scope if en.name == name and (q is None or en.qual == q)]
        if not hits:
            where = f"{qual}.{name}" if qual else name
            raise BadInput(f"unknown column {where!r}")
        if len({h.col.name for h in hits}) > 1:
            raise BadInput(f"column reference {name!r} is ambiguous; qualify it with a table alias")
        return hits[0].col

    def _has(self, scope, name: str) -> bool:
        return any(en.name == name.lower() for en in scope)

    @staticmethod
    def _out_name(e: exp.Expression) -> str:
        if isinstance(e, exp.Alias):
            return e.alias
        if isinstance(e, exp.Column):
            return e.name
        return e.sql(dialect="spark")

    @staticmethod
    def _types(node: ir.Node) -> dict[str, str]:
        return {c.name: c.dtype for c in node.cols}

    @staticmethod
    def _origin(r: exp.Expression, node: ir.Node) -> tuple:
        if isinstance(r, exp.Column):
            try:
                c = node.col(r.name)
                return (c.table, c.source)
            except KeyError:
                pass
        return (None, None)


@dataclass
class _AggregateRefs:
    """Rewrites an aggregation's SELECT, HAVING and ORDER BY expressions over its output: each
    aggregate call becomes a reference to its AggCall (added to ``aggs`` when first seen), each
    group-key expression a reference to its key."""

    builder: Planner
    scope: list[_Entry]
    types: dict[str, str]
    key_by_sql: dict[str, str]
    aggs: list[ir.AggCall] = field(default_factory=list)
    agg_by_sql: dict[str, str] = field(default_factory=dict)

    def ref(self, a: exp.Expression) -> exp.Expression:
        """The reference to aggregate call ``a``; one AggCall per function, DISTINCT and argument."""
        func = next(v for k, v in AGG_CLASSES.items() if isinstance(a, k))
        arg = a.this
        distinct = False
        if isinstance(arg, exp.Distinct):
            if len(arg.expressions) != 1:
                raise Unsupported("count(DISTINCT a, b) with several columns is not supported")
            distinct, arg = True, arg.expressions[0]
        if isinstance(arg, exp.Star) or (func == "count" and arg is None):
            rarg = None
        else:
            if arg is None:
                raise BadInput(f"{func}() needs an argument")
            if list(arg.find_all(*AGG_CLASSES)):
                raise BadInput("nested aggregate functions are not allowed")
            rarg = self.builder.resolve(arg, self.scope)
        key = f"{func}|{distinct}|{rarg.sql() if rarg is not None else '*'}"
        if key not in self.agg_by_sql:
            dtype = "bigint" if func == "count" else infer(a.__class__(this=rarg), self.types) if rarg is not None else "bigint"
            c = ir.Col(self.builder.fresh(func), dtype)
            self.aggs.append(ir.AggCall(func, rarg, distinct, c))
            self.agg_by_sql[key] = c.name
        return ir.col_ref(self.agg_by_sql[key])

    def post(self, e: exp.Expression) -> exp.Expression:
        """A copy of ``e`` over the aggregation's output; BadInput for a column neither grouped by
        nor inside an aggregate."""
        return e.copy().transform(self._rewrite)

    def _rewrite(self, n: exp.Expression) -> exp.Expression:
        if isinstance(n, tuple(AGG_CLASSES)):
            return self.ref(n)
        if isinstance(n, (exp.Column, exp.Binary, exp.Func, exp.Paren, exp.Unary)) and \
                not list(n.find_all(*AGG_CLASSES)):
            try:
                r = self.builder.resolve(n, self.scope)
            except BadInput:
                if isinstance(n, exp.Column):
                    raise
                return n
            if r.sql() in self.key_by_sql:
                return ir.col_ref(self.key_by_sql[r.sql()])
            if isinstance(n, exp.Column):
                raise BadInput(f"column {n.sql()} must appear in GROUP BY or inside an aggregate")
        return n


def _partial_join(j: exp.Join):
    """The IR class of a LEFT [OUTER] / LEFT SEMI / LEFT ANTI join, None for an inner or cross join."""
    side = (j.args.get("side") or "").upper()
    kind = (j.args.get("kind") or "").upper()
    if side != "LEFT":
        return None
    return {"SEMI": ir.SemiJoin, "ANTI": ir.AntiJoin}.get(kind, ir.LeftJoin)


def _column_aliases(item: exp.Subquery, rel: _Rel) -> list[str]:
    """A derived table's column names: its alias list (``AS t (a, b)``), else its query's own."""
    alias = item.args.get("alias")
    cols = [c.name for c in alias.columns] if alias is not None and alias.columns else []
    if cols and len(cols) != len(rel.names):
        raise BadInput(f"derived table {alias.name} names {len(cols)} columns but its query has {len(rel.names)}")
    return cols or rel.names


def _default_nulls(o: exp.Ordered) -> bool:
    """Spark's default: ASC NULLS FIRST, DESC NULLS LAST."""
    nf = o.args.get("nulls_first")
    return bool(nf) == (not o.args.get("desc"))
