"""Queries whose aggregation to estimate is the subquery of a semi-join, as TPC-H Q18's
``o_orderkey IN (SELECT l_orderkey FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 300)``:
the estimators size the subquery's own sketch (a HAVING / top-k over one table they model), and
that sketch bounds the whole query's when ``subquery_bound`` proves it does.

Why it bounds: the semi-join keeps only outer rows whose column equals a passing group's key K
(``left = k``), so every other read of the same table whose K is tied to that column by equalities
holding on every row of the outer block (inner joins, WHERE, renames) contributes only rows of
passing groups; the operators above (joins, aggregation, HAVING, top-k, DISTINCT) only drop rows.
When the subquery groups the bare table (no WHERE, no join), its passing groups' rows are exactly
those rows, so the bound holds for every attribute of the table, not only K; a top-k above keeping
fewer groups makes it an over-estimate (a more cautious decision, never an unsafe one: the safety
verdicts are proven on the whole query).
"""

from __future__ import annotations

from typing import Optional

from sqlglot import exp

from advisor.plan import ir


class NoBound(Exception):
    """A semi-join subquery whose sketch cannot be shown to bound the query's; the message says why."""


def subquery_bound(query: ir.Query, path: list) -> Optional[ir.Query]:
    """The semi-join subquery holding the innermost aggregation (``path``: root down to it) as a query
    of its own, when its sketch bounds ``query``'s; None when the aggregation is not inside the right
    side of a partial join; ``NoBound`` when it is but the bound does not hold."""
    inner = path[-1]
    partial = [i for i, n in enumerate(path[:-1]) if isinstance(n, ir.PARTIAL_JOINS) and path[i + 1] is n.right]
    if not partial:
        return None
    i = partial[-1]
    sj = path[i]
    if not isinstance(sj, ir.SemiJoin):
        raise NoBound(f"the aggregation is the right side of a {type(sj).__name__}: rows it rejects are the answer")
    if len(partial) > 1:
        raise NoBound("the aggregation is nested in more than one subquery")
    scan = _bare_scan(inner)
    left_col, key = _matched_column(sj, path[i + 1:-1], inner, scan)
    _check_other_reads(query, path[:i], sj, scan, left_col, key)
    return ir.Query(root=sj.right, output_names=[c.name for c in sj.right.cols], order=[], sql=query.sql,
                    template=query.template, bindings=query.bindings)


def _bare_scan(inner: ir.Aggregate) -> ir.Scan:
    """The one table the subquery groups, read without a filter or a join (so its passing groups'
    rows are all rows of their keys, whatever attribute is sketched)."""
    nodes = list(inner.child.walk())
    if any(not isinstance(n, (ir.Scan, ir.Project)) for n in nodes):
        raise NoBound("the IN subquery filters or joins the rows it groups: its sketch does not bound the rows "
                      "the outer query reads of its keys")
    return next(n for n in nodes if isinstance(n, ir.Scan))


def _matched_column(sj: ir.SemiJoin, between: list, inner: ir.Aggregate, scan: ir.Scan) -> tuple[str, str]:
    """(outer column, base column of the key) of the equality the semi-join holds between an outer
    column and a group-by key of ``scan`` (renames only between the aggregation and the semi-join)."""
    base = {c.name: c.source for c in scan.cols}
    names = {k: base[k] for k in inner.keys if k in base}
    for n in reversed(between):  # bottom-up: the HAVING and the projection of the IN list
        if isinstance(n, ir.Project):
            names.update({c.name: names[e.name] for e, c in n.items if isinstance(e, exp.Column) and e.name in names})
        elif not isinstance(n, ir.Select):
            raise NoBound(f"{type(n).__name__} between the subquery's aggregation and its semi-join")
    left = set(sj.left.names)
    for a, b in _equalities(sj.cond):
        for x, y in ((a, b), (b, a)):
            if x in left and y in names:
                return x, names[y]
    raise NoBound("the semi-join does not match a group-by column of the subquery's table")


def _check_other_reads(query: ir.Query, above: list, sj: ir.SemiJoin, scan: ir.Scan, left_col: str,
                       key: str) -> None:
    """Every other read of the subquery's table lies in the semi-join's block and has its ``key``
    tied to ``left_col`` by equalities holding on every row of the block."""
    table = scan.table
    outer = next((n for n in reversed(above) if isinstance(n, (ir.Aggregate, ir.Union))), None)
    start = outer.child if isinstance(outer, ir.Aggregate) else query.root
    if isinstance(outer, ir.Union):
        raise NoBound("a UNION lies above the semi-join")
    block, eqs = [], []
    _walk(start, sj, table, block, eqs)
    others = [s for s in query.scans() if s.table == table and s is not scan]
    stray = [s for s in others if s not in block]
    if stray:
        raise NoBound(f"{table} is read outside the semi-join's block (another subquery, an aggregation or "
                      "the nullable side of an outer join)")
    find = _classes(eqs)
    for s in block:
        k = next(c.name for c in s.cols if c.source == key)
        if find(k) != find(left_col):
            raise NoBound(f"another read of {table} is not joined on {key} to the semi-join's column")


def _walk(node: ir.Node, sj: ir.SemiJoin, table: str, block: list, eqs: list) -> None:
    """Collect the block's reads of ``table`` and the equalities holding on every row of the block."""
    if node is sj:
        _walk(sj.left, sj, table, block, eqs)
    elif isinstance(node, ir.Scan):
        if node.table == table:
            block.append(node)
    elif isinstance(node, (ir.Select, ir.Join)):
        eqs.extend(_equalities(node.cond))
        for c in node.children:
            _walk(c, sj, table, block, eqs)
    elif isinstance(node, ir.Project):
        eqs.extend((e.name, c.name) for e, c in node.items if isinstance(e, exp.Column))
        _walk(node.child, sj, table, block, eqs)
    elif isinstance(node, ir.Distinct):
        _walk(node.child, sj, table, block, eqs)
    elif isinstance(node, ir.PARTIAL_JOINS):
        _walk(node.left, sj, table, block, eqs)  # the right side's reads are strays if they are the table


def _equalities(cond) -> list[tuple[str, str]]:
    """Column = column conjuncts of ``cond`` (through AND and parentheses)."""
    if cond is None:
        return []
    if isinstance(cond, exp.Paren):
        return _equalities(cond.this)
    if isinstance(cond, exp.And):
        return _equalities(cond.this) + _equalities(cond.expression)
    if isinstance(cond, exp.EQ) and isinstance(cond.this, exp.Column) and isinstance(cond.expression, exp.Column):
        return [(cond.this.name, cond.expression.name)]
    return []


def _classes(pairs: list):
    """Union-find over the equalities: the function giving each name its class representative."""
    parent: dict = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        parent[find(a)] = find(b)
    return find
