"""Small readers over sqlglot trees shared by the recursive-shape recognisers: conjuncts, literal
values, ``col = lit`` / ``col IN (...)`` selections, link-row predicates (rendered against the
link table alone, so Spark can evaluate them per row when the links are read) and the outer query
over the recursive view.

>>> import sqlglot
>>> q = sqlglot.parse_one("SELECT 1 FROM t WHERE a = 1 AND (b IN (2, 3) AND c > 0)")
>>> [c.sql() for c in conjuncts(q.args["where"].this)]
['a = 1', 'b IN (2, 3)', 'c > 0']
"""

from __future__ import annotations

import re

from sqlglot import exp

from advisor.errors import Unsupported


def literal(e: exp.Expression):
    """The Python value of a numeric or string literal (``Unsupported`` otherwise)."""
    if isinstance(e, exp.Neg) and isinstance(e.this, exp.Literal) and not e.this.is_string:
        return -literal(e.this)
    if not isinstance(e, exp.Literal):
        raise Unsupported(f"a selection on the source compares with {e.sql()} (literals only are sketched)")
    if e.is_string:
        return e.this
    return int(e.this) if re.fullmatch(r"-?\d+", e.this) else float(e.this)


def conjuncts(e: exp.Expression | None) -> list:
    if e is None:
        return []
    if isinstance(e, exp.Paren):
        return conjuncts(e.this)
    if isinstance(e, exp.And):
        return conjuncts(e.this) + conjuncts(e.expression)
    return [e]


def source_values(c: exp.Expression, col: str) -> frozenset | None:
    """Values of ``col = lit`` or ``col IN (lits)``; None if ``c`` is not such a selection."""
    if isinstance(c, exp.EQ):
        for a, b in ((c.this, c.expression), (c.expression, c.this)):
            if isinstance(a, exp.Column) and a.name.lower() == col:
                try:
                    return frozenset([literal(b)])
                except Unsupported:
                    return None
    if (
        isinstance(c, exp.In)
        and isinstance(c.this, exp.Column)
        and c.this.name.lower() == col
        and c.args.get("expressions")
    ):
        try:
            return frozenset(literal(v) for v in c.args["expressions"])
        except Unsupported:
            return None
    return None


def row_predicate(c: exp.Expression, is_link) -> str | None:
    """``c`` as SQL over the link table's columns alone (qualifiers dropped), or None when it
    reads anything else (a column ``is_link`` rejects, a subquery, an aggregate or a window)."""
    if any(True for _ in c.find_all(exp.Subquery, exp.Select, exp.AggFunc, exp.Window, exp.Exists)):
        return None
    cols = list(c.find_all(exp.Column))
    if not all(is_link(k) for k in cols):
        return None
    tree = c.copy()
    for k in tree.find_all(exp.Column):
        k.set("table", None)
    return tree.sql(dialect="spark")


def and_all(preds: list) -> str | None:
    """One predicate from several (None for none)."""
    preds = [p for p in preds if p]
    return " AND ".join(f"({p})" for p in preds) if preds else None


def outer_query(q: exp.Select, name: str, cols: list, ends: int):
    """(selected values of the first view column, "minmax" or "all", MIN/MAX aggregates) of the
    outer query ``q`` over the view ``name``; "minmax" when it groups by the ``ends`` endpoint
    columns and aggregates with MIN/MAX only, with no selection but on the first column."""
    froms = [q.args["from_"].this] if q.args.get("from_") else []
    if (
        len(froms) != 1
        or q.args.get("joins")
        or not isinstance(froms[0], exp.Table)
        or froms[0].name.lower() != name
    ):
        raise Unsupported(f"the outer query joins the recursive view {name} with other relations")
    if any(isinstance(s, (exp.Subquery, exp.Window)) for s in q.find_all(exp.Subquery, exp.Window)):
        raise Unsupported("a subquery or window in the outer query of a recursive view")
    sources, other_filters = None, False
    for c in conjuncts(q.args["where"].this if q.args.get("where") else None):
        vals = source_values(c, cols[0])
        if vals is not None:
            sources = vals if sources is None else sources & vals
        else:
            other_filters = True  # the extremes are then over filtered groups: keep every tuple
    group = q.args.get("group")
    keys = {g.name.lower() for g in group.expressions if isinstance(g, exp.Column)} if group else set()
    aggs = []
    minmax = bool(group) and len(group.expressions) == ends and keys == set(cols[:ends]) and not other_filters
    for a in q.find_all(exp.AggFunc):
        if isinstance(a, (exp.Min, exp.Max)) and isinstance(a.this, exp.Column) and a.this.name.lower() in cols:
            pair = ("min" if isinstance(a, exp.Min) else "max", a.this.name.lower())
            if pair not in aggs:
                aggs.append(pair)
        else:
            minmax = False
    minmax = minmax and bool(aggs)
    return sources, ("minmax" if minmax else "all"), (tuple(aggs) if minmax else ())
