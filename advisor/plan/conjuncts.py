"""The AND terms of an IR condition, and its column-to-column equalities (join keys, equated
attributes), shared by the plan rules and the maintenance operators.

>>> from sqlglot import parse_one
>>> column_equalities(parse_one("(a = b) AND c > 1 AND (d = e OR f = g) AND h = 3"))
[('a', 'b')]
"""

from __future__ import annotations

from typing import Optional

from sqlglot import exp


def conjuncts(e: Optional[exp.Expression]) -> list[exp.Expression]:
    """Top-level AND terms of a predicate (parentheses removed)."""
    if e is None:
        return []
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.And):
        return conjuncts(e.this) + conjuncts(e.expression)
    return [e]


def column_equalities(cond: Optional[exp.Expression]) -> list[tuple[str, str]]:
    """(left name, right name) of the conjuncts ``column = column``, as written."""
    return [(c.this.name, c.expression.name) for c in conjuncts(cond)
            if isinstance(c, exp.EQ) and isinstance(c.this, exp.Column) and isinstance(c.expression, exp.Column)]
