"""When a semi-join equals an inner join: its right side meets each left row at most once."""

from __future__ import annotations

from sqlglot import exp

from advisor.plan import ir
from advisor.plan.conjuncts import column_equalities


def unique_on_join_keys(node: ir.SemiJoin) -> bool:
    """Whether each left row meets at most one row of ``node.right``: the right side is an
    aggregation or DISTINCT (under selections / projections that keep its keys) whose keys are all
    equated to left attributes by conjuncts of ``node.cond``.  Then the semi-join is the inner join.

    >>> from advisor.plan.parse import parse_sql
    >>> s = {"t": [("a", "int")], "u": [("c", "int"), ("d", "int")]}.get
    >>> semi = lambda q: next(n for n in parse_sql(q, s).root.walk() if isinstance(n, ir.SemiJoin))
    >>> unique_on_join_keys(semi("SELECT a FROM t WHERE a IN (SELECT c FROM u)"))
    True
    >>> unique_on_join_keys(semi("SELECT a FROM t WHERE EXISTS (SELECT * FROM u WHERE u.c = t.a AND u.d <> t.a)"))
    False
    """
    r = node.right
    while isinstance(r, (ir.Select, ir.Project)):
        r = r.child
    if not isinstance(r, (ir.Aggregate, ir.Distinct)):
        return False
    keys = set(r.keys) if isinstance(r, ir.Aggregate) else set(r.names)
    right_names, left_names = set(node.right.names), set(node.left.names)
    equated = set()
    for x, y in column_equalities(node.cond):
        for a, b in ((x, y), (y, x)):
            if a in right_names and b in left_names:
                equated.add(_through(a, node.right))
    return bool(keys) and keys <= equated


def _through(name: str, node: ir.Node) -> str:
    """The attribute of the first node below Selects / Projects that ``name`` copies."""
    while isinstance(node, (ir.Select, ir.Project)):
        if isinstance(node, ir.Project):
            hit = [e for e, c in node.items if c.name == name]
            if not hit or not isinstance(hit[0], exp.Column):
                return name
            name = hit[0].name
        node = node.child
    return name


def distinct_rows(node: ir.Node) -> bool:
    """Whether no two output rows of ``node`` are equal: it is an aggregation or DISTINCT, under
    selections / projections that still output every one of its keys unchanged.

    >>> from advisor.plan.parse import parse_sql
    >>> s = {"t": [("a", "int"), ("b", "int")]}.get
    >>> distinct_rows(parse_sql("SELECT a, sum(b) AS s FROM t GROUP BY a HAVING sum(b) > 1", s).root)
    True
    >>> distinct_rows(parse_sql("SELECT sum(b) AS s FROM t GROUP BY a", s).root)
    False
    """
    reach = set(node.names)
    while isinstance(node, (ir.Select, ir.Project)):
        if isinstance(node, ir.Project):
            reach = {e.name for e, c in node.items if isinstance(e, exp.Column) and c.name in reach}
        node = node.child
    if isinstance(node, ir.Aggregate):
        return set(node.keys) <= reach
    if isinstance(node, ir.Distinct):
        return set(node.names) <= reach
    return False
