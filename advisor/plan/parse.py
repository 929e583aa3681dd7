"""Spark SQL text -> relational algebra (ir.Query) with sqlglot.

Supported: SELECT [DISTINCT] over tables, subqueries in FROM and WITH, inner/cross joins (comma or
JOIN ... ON/USING), LEFT [OUTER] / LEFT SEMI / LEFT ANTI JOIN ... ON, WHERE with [NOT] EXISTS,
[NOT] IN and scalar subqueries (turned into joins first, ``advisor.plan.decorrelate``), GROUP BY
(columns, expressions, positions), count/count distinct/sum/avg/min/max (several per query, also
inside expressions), HAVING, ORDER BY ... LIMIT (ASC/DESC), UNION [ALL]. Anything else raises
Unsupported naming the construct; such queries run without a sketch.  Here: the statement checks,
decorrelation and the template; the planning of a checked tree is ``advisor.plan.planner``'s.
"""

from __future__ import annotations

import hashlib
import re

import sqlglot
from sqlglot import exp

from advisor.errors import BadInput, Unsupported
from advisor.plan import ir
from advisor.plan.decorrelate import decorrelate, has_expression_subquery
from advisor.plan.planner import Planner, SchemaLookup
from advisor.plan.read_only import check_read_only


def parse_sql(sql: str, schema: SchemaLookup) -> ir.Query:
    """Parse one SELECT statement into an ir.Query, or raise BadInput/Unsupported.

    The query's constants become its template's bindings, so instances of a template share one
    template text:

    >>> schema = {"t": [("a", "int"), ("b", "int")]}
    >>> q = parse_sql("SELECT a, sum(b) AS s FROM t GROUP BY a HAVING sum(b) > 3", schema.get)
    >>> q.template, q.bindings, q.output_names
    ('select a, sum(b) as s from t group by a having sum(b) > ?', (3,), ['a', 's'])"""
    try:
        stmts = [s for s in sqlglot.parse(sql, read="spark") if s is not None]
    except sqlglot.errors.SqlglotError as e:  # parser and tokenizer errors
        msg = str(e).splitlines()[0]
        raise BadInput(f"malformed SQL: {msg}") from None
    if len(stmts) != 1:
        raise BadInput(f"expected exactly one SQL statement, got {len(stmts)}")
    tree = stmts[0]
    if not isinstance(tree, (exp.Select, exp.Union)):
        if isinstance(tree, (exp.Intersect, exp.Except)):
            raise Unsupported(f"{type(tree).__name__.upper()} is not supported")
        raise BadInput(f"only SELECT queries are supported, got {type(tree).__name__.upper()}")
    check_read_only(tree)
    planned = tree
    if has_expression_subquery(tree):
        _reject_unsupported(tree, subqueries=False)
        planned = decorrelate(tree, schema)
    _reject_unsupported(planned)
    b = Planner(schema)
    try:
        rel = b.plan_query(planned, {})
    except BadInput as e:
        if planned is tree:
            raise
        # the columns were checked before decorrelating, so this is the rewrite's shape
        raise Unsupported(f"subqueries outside FROM that cannot be turned into joins are not supported "
                          f"({e})") from None
    if rel.sorts_hidden:  # the answer is sorted on columns it does not show: the root keeps them,
        rel.node = rel.node.child  # after the visible ones, and the final ORDER BY reads them there
    template, bindings = templatize(tree)
    return ir.Query(rel.node, rel.names, rel.order, sql, template, bindings)


def templatize(tree: exp.Expression) -> tuple[str, tuple]:
    """Template = the SQL with literals in WHERE/HAVING/LIMIT replaced by ?; bindings = those literals."""
    t = tree.copy()
    binds: list = []

    def repl(node):
        if isinstance(node, exp.Literal) and node.find_ancestor(exp.Where, exp.Having, exp.Limit, exp.Join):
            binds.append(node.this if node.is_string else _num(node.this))
            return exp.Placeholder()
        return node

    t = t.transform(repl)
    text = re.sub(r"\s+", " ", t.sql(dialect="spark").lower())
    return text, tuple(binds)


def template_id(template: str) -> str:
    return hashlib.sha1(template.encode()).hexdigest()[:12]


def _num(s: str):
    try:
        return int(s)
    except ValueError:
        return float(s)


def _reject_unsupported(tree: exp.Expression, subqueries: bool = True) -> None:
    """Unsupported naming the first construct the planner has no operator for; ``subqueries``
    False skips the subquery checks (for a tree about to be decorrelated)."""
    for node in tree.walk():
        if isinstance(node, exp.Window):
            raise Unsupported("window functions (OVER ...) are not supported")
        if isinstance(node, exp.Exists) and subqueries:
            raise Unsupported("EXISTS / NOT EXISTS subqueries that cannot be written as a semi-join or "
                              "anti-join are not supported")
        if isinstance(node, (exp.Intersect, exp.Except)):
            raise Unsupported(f"{type(node).__name__.upper()} is not supported")
        if isinstance(node, exp.Join):
            side = (node.args.get("side") or "").upper()
            kind = (node.args.get("kind") or "").upper()
            if side in ("RIGHT", "FULL"):
                raise Unsupported(f"{side} OUTER JOIN is not supported")
            if (kind in ("SEMI", "ANTI") and side != "LEFT") or \
                    kind not in ("", "SEMI", "ANTI", "OUTER", "CROSS", "INNER"):
                raise Unsupported(f"{(side + ' ' + kind).strip()} JOIN is not supported")
            if side == "LEFT" and node.args.get("on") is None:
                raise Unsupported(f"LEFT {kind or 'OUTER'} JOIN needs an ON condition")
        if isinstance(node, exp.Lateral):
            raise Unsupported("LATERAL is not supported")
        if isinstance(node, (exp.Subquery, exp.Select)) and node is not tree and subqueries:
            anc = node.parent
            if isinstance(node, exp.Select) and isinstance(anc, (exp.Subquery, exp.Union, exp.CTE)):
                continue
            if isinstance(node, exp.Subquery) and isinstance(anc, (exp.From, exp.Join, exp.Union)):
                continue
            if isinstance(anc, exp.In):
                raise Unsupported(f"{'NOT IN' if isinstance(anc.parent, exp.Not) else 'IN'} (subquery) is not supported"
                                  " (correlated NOT IN, or IN that cannot be written as a semi-join)")
            if isinstance(node, (exp.Subquery, exp.Select)):
                raise Unsupported("subqueries outside FROM that cannot be turned into joins are not supported")
