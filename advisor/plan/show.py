"""Human-readable rendering of an IR tree (for `advisor explain`)."""

from __future__ import annotations

from advisor.plan import ir


def _e(e) -> str:
    return e.sql(dialect="spark").replace("`", "") if e is not None else ""


def describe(node: ir.Node) -> str:
    if isinstance(node, ir.Scan):
        return f"Scan {node.table} AS {node.alias}"
    if isinstance(node, ir.Select):
        return f"Select {_e(node.cond)}"
    if isinstance(node, ir.Project):
        return "Project " + ", ".join(f"{_e(e)} -> {c.name}" for e, c in node.items)
    if isinstance(node, ir.Join):
        return f"Join {_e(node.cond)}" if node.cond is not None else "CrossJoin"
    if isinstance(node, ir.SemiJoin):
        return f"SemiJoin {_e(node.cond)}"
    if isinstance(node, ir.AntiJoin):
        return f"AntiJoin {_e(node.cond)}"
    if isinstance(node, ir.LeftJoin):
        return f"LeftOuterJoin {_e(node.cond)}"
    if isinstance(node, ir.Aggregate):
        aggs = ", ".join(f"{a.func}({'DISTINCT ' if a.distinct else ''}{_e(a.arg) or '*'}) -> {a.out.name}"
                         for a in node.aggs)
        return f"Aggregate group by [{', '.join(node.keys)}] {aggs}"
    if isinstance(node, ir.Distinct):
        return "Distinct"
    if isinstance(node, ir.TopK):
        keys = ", ".join(f"{n} {'ASC' if a else 'DESC'}" for n, a in node.order)
        return f"TopK k={node.k} by [{keys}]"
    if isinstance(node, ir.Union):
        return "UnionAll"
    return type(node).__name__


def tree_lines(node: ir.Node, depth: int = 0) -> list[str]:
    """The tree, one operator a line, children indented under their parent.

    >>> from advisor.plan.parse import parse_sql
    >>> q = parse_sql("SELECT a, count(*) AS n FROM t WHERE b > 1 GROUP BY a",
    ...               {"t": [("a", "int"), ("b", "int")]}.get)
    >>> print("\\n".join(tree_lines(q.root)))
    Project t_a_1 -> a_4, count_3 -> n_5
      Aggregate group by [t_a_1] count(*) -> count_3
        Select t_b_2 > 1
          Scan t AS t
    """
    lines = ["  " * depth + describe(node)]
    for c in node.children:
        lines += tree_lines(c, depth + 1)
    return lines
