"""IN / NOT IN / EXISTS / NOT EXISTS in WHERE -> LEFT SEMI / LEFT ANTI joins over derived tables.

sqlglot's ``unnest_subqueries`` turns these predicates into a LEFT JOIN against a grouped derived
table plus an ``IS [NOT] NULL`` test, and correlations other than equalities into array lambdas;
a semi-join or anti-join says the same thing directly and keeps the outer side's rows as they are,
which is what the safety rules reason about.  This rule runs first (on a qualified tree); what it
leaves (scalar subqueries) goes to ``unnest_subqueries``.

* ``EXISTS (SELECT ... WHERE p AND c)`` with ``c`` the conjuncts that refer to outer columns
  becomes ``LEFT SEMI JOIN (SELECT DISTINCT <inner columns of c> ... WHERE p) AS _s ON c``; ``NOT EXISTS``
  the same with LEFT ANTI JOIN.  Exact: EXISTS asks for a row where the whole WHERE is TRUE.
* ``x IN (SELECT y ... WHERE c)`` with ``c`` correlated is ``EXISTS (SELECT ... WHERE c AND x = y)``.
* ``x IN (SELECT y ...)`` (uncorrelated) becomes ``LEFT SEMI JOIN (SELECT DISTINCT y ...) AS _s ON x = _s.y``
  (DISTINCT unless the subquery groups already).  The derived tables of semi-joins are distinct, so
  when the correlation is all equalities each outer row meets one inner row and the semi-join
  equals an inner join, through which a capture carries the inner side's provenance.
* ``x NOT IN (SELECT y ...)`` becomes ``LEFT ANTI JOIN (...) AS _s ON x = _s.y OR (x = _s.y) IS NULL``:
  a NULL on either side makes NOT IN unknown, so such rows must count as a match (SQL's null-aware
  anti-join; Spark recognises this form).

A predicate the rule cannot rewrite exactly (inside OR, a subquery with aggregates, GROUP BY or
LIMIT under EXISTS, a correlation outside the WHERE conjuncts) is left in place; the planner then
reports it unsupported and the query runs without a sketch.
"""

from __future__ import annotations

from typing import Optional

from sqlglot import exp
from sqlglot.helper import name_sequence
from sqlglot.optimizer.scope import traverse_scope

AGGS = (exp.AggFunc,)


def predicate_subqueries(expression: exp.Expression) -> exp.Expression:
    """Rewrite every top-level WHERE conjunct that is an [NOT] EXISTS / [NOT] IN subquery.

    >>> import sqlglot
    >>> e = sqlglot.parse_one("SELECT t.a FROM t WHERE EXISTS (SELECT * FROM s WHERE s.b = t.a AND s.c > 1)",
    ...                       read="spark")
    >>> predicate_subqueries(e).sql("spark")
    'SELECT t.a FROM t LEFT SEMI JOIN (SELECT DISTINCT s.b AS _c0 FROM s WHERE s.c > 1) AS _s_0 ON _s_0._c0 = t.a WHERE TRUE'
    """
    next_alias = name_sequence("_s_")
    taken = {t.alias_or_name for t in expression.find_all(exp.Table, exp.Subquery)}
    for scope in traverse_scope(expression):
        select = scope.expression
        if not isinstance(select, exp.Select) or select.args.get("where") is None:
            continue
        for conj in _conjuncts(select.args["where"].this):
            negated = isinstance(conj, exp.Not)
            pred = conj.this if negated else conj
            if not (isinstance(pred, exp.Exists) or (isinstance(pred, exp.In) and pred.args.get("query"))):
                continue
            alias = next_alias()
            while alias in taken:
                alias = next_alias()
            join = None
            if isinstance(pred, exp.Exists):
                join = _exists_join(pred.this, alias, negated)
            elif isinstance(pred, exp.In) and pred.args.get("query") is not None:
                join = _in_join(pred, alias, negated)
            if join is None:
                continue
            taken.add(alias)
            select.append("joins", join)
            conj.replace(exp.true())
    return expression


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    return [e]


def _unwrap(q: exp.Expression) -> exp.Expression:
    while isinstance(q, exp.Subquery):
        q = q.this
    return q


def _defined_aliases(q: exp.Expression) -> set[str]:
    """Every table or derived-table alias defined anywhere inside ``q`` (and CTE names)."""
    out = {t.alias_or_name for t in q.find_all(exp.Table)}
    out |= {s.alias for s in q.find_all(exp.Subquery) if s.alias}
    out |= {c.alias for c in q.find_all(exp.CTE)}
    return out


def _outer_refs(e: exp.Expression, inner: set[str]) -> list[exp.Column]:
    return [c for c in e.find_all(exp.Column) if c.table and c.table not in inner]


def _exists_join(sub: exp.Expression, alias: str, anti: bool) -> Optional[exp.Join]:
    sub = _unwrap(sub)
    if not isinstance(sub, exp.Select) or any(sub.args.get(k) for k in ("group", "having", "limit", "offset")):
        return None
    if any(e.find(*AGGS) for e in sub.expressions) or sub.args.get("from_") is None:
        return None
    inner = _defined_aliases(sub)
    where = sub.args.get("where")
    conjs = _conjuncts(where.this) if where is not None else []
    moved = [c for c in conjs if _outer_refs(c, inner)]
    kept = [c for c in conjs if not _outer_refs(c, inner)]
    if any(c.find(exp.Select) for c in moved):
        return None
    rest = sub.copy()
    rest.set("where", None)
    rest.set("expressions", [])
    for c in kept:
        rest = rest.where(c.copy(), copy=False)
    if _outer_refs(rest, inner):  # a correlation outside the WHERE conjuncts
        return None
    names: dict[tuple[str, str], str] = {}
    on_parts = []
    for c in moved:
        c = c.copy()
        for col in list(c.find_all(exp.Column)):
            if col.table in inner:
                key = (col.table, col.name)
                if key not in names:
                    names[key] = f"_c{len(names)}"
                col.replace(exp.column(names[key], alias))
        on_parts.append(c)
    projections = [exp.alias_(exp.column(n, t), a) for (t, n), a in names.items()] or [exp.alias_(exp.Literal.number(1), "_c0")]
    rest.set("expressions", projections)
    if not anti:
        rest.set("distinct", exp.Distinct())
    on = exp.and_(*on_parts) if on_parts else exp.true()
    return _join(rest, alias, on, anti)


def _in_join(pred: exp.In, alias: str, anti: bool) -> Optional[exp.Join]:
    sub = _unwrap(pred.args["query"])
    if not isinstance(sub, exp.Select) or len(sub.expressions) != 1:
        return None
    if _outer_refs(sub, _defined_aliases(sub)):
        # correlated IN: EXISTS with the IN's equality among its conjuncts (NOT IN's NULL rule
        # does not carry over; it is left in place)
        if anti:
            return None
        proj = sub.expressions[0]
        as_exists = sub.copy().where(exp.EQ(this=pred.this.copy(),
                                            expression=(proj.this if isinstance(proj, exp.Alias) else proj).copy()),
                                     copy=False)
        return _exists_join(as_exists, alias, anti)
    rest = sub.copy()
    proj = rest.expressions[0]
    rest.set("expressions", [exp.alias_(proj.this if isinstance(proj, exp.Alias) else proj, "_c0")])
    if not anti and not rest.args.get("group"):
        rest.set("distinct", exp.Distinct())
    x = pred.this.copy()
    eq = exp.EQ(this=x, expression=exp.column("_c0", alias))
    on: exp.Expression = eq
    if anti:
        on = exp.or_(eq, exp.Is(this=exp.Paren(this=eq.copy()), expression=exp.Null()))
    return _join(rest, alias, on, anti)


def _join(q: exp.Select, alias: str, on: exp.Expression, anti: bool) -> exp.Join:
    return exp.Join(this=exp.Subquery(this=q, alias=exp.TableAlias(this=exp.to_identifier(alias))),
                    on=on, side="LEFT", kind="ANTI" if anti else "SEMI")
