"""The base columns a query reads of each table: what a narrow copy of the table must hold to
answer it.

A column counts as read when any expression of the plan refers to it (a condition, a projected
expression, a group key, an aggregate's argument, an order key) or when an operator's result
depends on whole rows: the root's output, DISTINCT, UNION and a top-k (whose ties are broken by
every column).  This over-approximates (a projected column nobody uses above still counts), which
is the safe side: a copy holding these columns gives the query the same rows as the table.

>>> from advisor.plan.parse import parse_sql
>>> schema = {"t": [("a", "bigint"), ("b", "bigint"), ("c", "string")]}
>>> q = parse_sql("SELECT a, sum(b) AS s FROM t GROUP BY a HAVING sum(b) > 3", schema.get)
>>> sorted(read_columns(q)["t"])
['a', 'b']
>>> sorted(read_columns(parse_sql("SELECT a FROM t ORDER BY b LIMIT 3", schema.get))["t"])
['a', 'b']
>>> read_columns(parse_sql("SELECT count(*) AS n FROM t WHERE c = 'x'", schema.get))
{'t': frozenset({'c'})}
"""

from __future__ import annotations

from advisor.plan import ir


def _whole_rows(node: ir.Node) -> bool:
    """Operators whose result depends on every column of their input."""
    return isinstance(node, (ir.Distinct, ir.Union, ir.TopK))


def referenced_names(root: ir.Node) -> set[str]:
    """Internal attribute names any operator of the plan under ``root`` depends on."""
    refs = {c.name for c in root.cols}
    for n in root.walk():
        if isinstance(n, ir.Select):
            refs |= ir.referenced(n.cond)
        elif isinstance(n, ir.Project):
            refs |= {c for e, _ in n.items for c in ir.referenced(e)}
        elif isinstance(n, (ir.Join, ir.SemiJoin, ir.AntiJoin, ir.LeftJoin)):
            refs |= ir.referenced(n.cond)
        elif isinstance(n, ir.Aggregate):
            refs |= set(n.keys) | {c for a in n.aggs for c in ir.referenced(a.arg)}
        if _whole_rows(n):
            refs |= {c.name for ch in n.children for c in ch.cols}
    return refs


def read_columns(query: ir.Query) -> dict[str, frozenset]:
    """{table: base columns the query reads of it}, over every access of each table."""
    refs = referenced_names(query.root)
    out: dict[str, set] = {}
    for s in query.scans():
        out.setdefault(s.table, set()).update(c.source for c in s.cols if c.name in refs and c.source)
    return {t: frozenset(cs) for t, cs in out.items()}
