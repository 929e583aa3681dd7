"""LEFT JOIN whose right side a WHERE conjunct rejects when NULL -> inner JOIN.

A row the LEFT JOIN pads with NULLs fails a WHERE conjunct that is a plain comparison over the
right side's columns (NULL compares to unknown), so only matched rows survive: the inner join
gives the same bag.  ``unnest_subqueries`` writes correlated scalar subqueries as exactly this
shape (``LEFT JOIN (SELECT agg, key ... GROUP BY key) AS _u ON _u.key = outer.key WHERE x < _u.agg``).
"""

from __future__ import annotations

from sqlglot import exp

_COMPARE = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
_STRICT = (exp.Column, exp.Literal, exp.Identifier, exp.Paren, exp.Add, exp.Sub, exp.Mul, exp.Div,
           exp.Neg, exp.Cast, exp.DataType) + _COMPARE


def null_rejecting_joins(expression: exp.Expression) -> exp.Expression:
    """Turn LEFT [OUTER] JOINs whose right side is null-rejected by WHERE into inner joins.

    >>> import sqlglot
    >>> e = sqlglot.parse_one("SELECT t.a FROM t LEFT JOIN u ON u.k = t.k WHERE t.a < u.m", read="spark")
    >>> null_rejecting_joins(e).sql("spark")
    'SELECT t.a FROM t JOIN u ON u.k = t.k WHERE t.a < u.m'
    """
    for select in expression.find_all(exp.Select):
        where = select.args.get("where")
        if where is None:
            continue
        conjs = list(where.this.flatten()) if isinstance(where.this, exp.And) else [where.this]
        for join in select.args.get("joins") or []:
            side = (join.args.get("side") or "").upper()
            kind = (join.args.get("kind") or "").upper()
            if side != "LEFT" or kind not in ("", "OUTER"):
                continue
            alias = join.this.alias_or_name
            if any(_rejects(c, alias) for c in conjs):
                join.set("side", None)
                join.set("kind", None)
    return expression


def _rejects(c: exp.Expression, alias: str) -> bool:
    """``c`` is NULL (never TRUE) whenever the columns of ``alias`` it reads are NULL."""
    if isinstance(c, exp.Not) and isinstance(c.this, exp.Is) and isinstance(c.this.expression, exp.Null):
        col = c.this.this
        return isinstance(col, exp.Column) and col.table == alias
    if not isinstance(c, _COMPARE):
        return False
    if any(not isinstance(n, _STRICT) for n in c.walk()):
        return False
    return any(col.table == alias for col in c.find_all(exp.Column))
