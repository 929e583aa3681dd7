"""Subqueries outside FROM -> joins, before planning, with sqlglot's optimizer.

The planner's algebra has no subquery expressions; predicates and scalars that hold a subquery are
rewritten into joins over derived tables first:

1. ``qualify`` (sqlglot) resolves every column to its table, so correlations are visible;
2. ``predicate_subqueries`` turns [NOT] EXISTS / [NOT] IN into LEFT SEMI / LEFT ANTI joins;
3. ``unnest_subqueries`` (sqlglot) turns scalar subqueries, correlated or not, into joins against
   derived tables (grouped by the correlation keys);
4. ``null_rejecting_joins`` makes the LEFT JOINs of step 3 inner where WHERE rejects their NULLs.

CTEs and derived tables stay as they are (the planner inlines CTEs).  Only queries that hold such
a subquery are rewritten, so every other query is planned from its text as written.
"""

from __future__ import annotations

from typing import Callable

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.unnest_subqueries import unnest_subqueries

from advisor.errors import BadInput
from advisor.plan.rules.null_rejecting_joins import null_rejecting_joins
from advisor.plan.rules.predicate_subqueries import predicate_subqueries

SchemaLookup = Callable[[str], list[tuple[str, str]]]


def has_expression_subquery(tree: exp.Expression) -> bool:
    """Whether ``tree`` holds a subquery outside FROM / JOIN / set operations / WITH.

    >>> import sqlglot
    >>> has_expression_subquery(sqlglot.parse_one("SELECT a FROM (SELECT a FROM t) s"))
    False
    >>> has_expression_subquery(sqlglot.parse_one("SELECT a FROM t WHERE a IN (SELECT b FROM u)"))
    True
    """
    for node in tree.find_all(exp.Select):
        if node is tree:
            continue
        parent = node.parent
        if isinstance(parent, (exp.Union, exp.CTE)):
            continue
        if isinstance(parent, exp.Subquery) and isinstance(parent.parent, (exp.From, exp.Join, exp.Union, exp.CTE)):
            continue
        return True
    return False


def decorrelate(tree: exp.Expression, schema: SchemaLookup) -> exp.Expression:
    """A copy of ``tree`` with its expression subqueries turned into joins (see the module doc).
    The outermost SELECT's unnamed expressions are named first by their text, as Spark names them,
    so the rewrite does not change the answer's column names."""
    tree = tree.copy()
    _name_outputs(tree)
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    tables = {t.name.lower() for t in tree.find_all(exp.Table)} - ctes
    mapping = {t: {c: typ for c, typ in schema(t)} for t in sorted(tables)}
    try:
        tree = qualify(tree, schema=mapping, dialect="spark", validate_qualify_columns=True,
                       quote_identifiers=False, expand_alias_refs=True)
    except OptimizeError as e:
        raise BadInput(str(e).splitlines()[0]) from None
    tree = predicate_subqueries(tree)
    tree = unnest_subqueries(tree)
    return null_rejecting_joins(tree)


def _name_outputs(tree: exp.Expression) -> None:
    if not isinstance(tree, exp.Select):
        return
    for e in list(tree.expressions):
        if not isinstance(e, (exp.Alias, exp.Column, exp.Star)):
            e.replace(exp.alias_(e.copy(), e.sql(dialect="spark"), quoted=True))
