"""What a query asks of the estimators: the innermost aggregation, the table to sample, and the
HAVING / top-k / nested shape (``analyze``), or ``CannotEstimate`` with the part it cannot model.

* **Sampled table.** The *largest* table read below the innermost aggregation (the fact / FK side
  of a star join); a query reading it twice is not estimated.
* **Strata** = the group-by attributes that are plain columns of the sampled table (base names).
* **HAVING** must be AND/OR/NOT over ``aggregate op constant`` (and BETWEEN); conditions on group
  keys in HAVING, expressions of aggregates and DISTINCT aggregates are refused with a reason.
  Top-k orders by its first ORDER BY key, which must be an aggregate.  Nested: one outer
  aggregation grouped by a subset of the inner keys, over inner aggregates / keys / ``count(*)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Optional

from sqlglot import exp

from advisor.estimation.semi_join_bound import NoBound, subquery_bound
from advisor.plan import ir
from advisor.plan.to_sql import esql
from estimators.aggregates import agg_name
from estimators.having import And, Cmp, Not, Or

_OPS = {exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=", exp.EQ: "=", exp.NEQ: "!="}
_FLIP = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "=": "=", "!=": "!="}


class CannotEstimate(Exception):
    """The query's shape is outside what the estimators model; the message says which part."""


@dataclass
class Shape:
    """What the estimators need from a query (internal attribute names unless said otherwise)."""

    kind: str                     # 'having' | 'topk' | 'nested' | 'groupby' (no HAVING)
    inner: ir.Aggregate
    fact: ir.Scan                 # the sampled scan
    keys: list                    # inner group-by keys
    strata: list                  # base columns of the fact table used as strata (sorted)
    aggs: list                    # estimator aggregates [(func, frame column or None)]
    args: dict                    # frame column -> SQL of the aggregate argument
    having: object = None         # estimators predicate over inner aggregates
    topk: Optional[tuple] = None  # (estimator aggregate name, k, descending)
    outer_keys: list = field(default_factory=list)
    outer_aggs: list = field(default_factory=list)
    outer_having: object = None
    fact_cols: dict = field(default_factory=dict)  # base column -> internal name in the fact scan
    relevant: set = field(default_factory=set)     # base columns used by keys, filters, joins, args
    agg_inputs: set = field(default_factory=set)   # base columns feeding aggregate arguments
    bound: Optional[str] = None   # set when the shape is a semi-join subquery's whose sketch bounds the query's

    def read_columns(self) -> list:
        """Base columns of the sampled table the aggregation's input reads: keys, arguments,
        filters, join conditions and projected expressions (a superset of ``relevant``)."""
        base = {c.name: c.source for c in self.fact.cols}
        refs = set(self.inner.keys) | {c for a in self.inner.aggs for c in ir.referenced(a.arg)}
        for n in self.inner.child.walk():
            if isinstance(n, (ir.Select, ir.Join, ir.SemiJoin, ir.AntiJoin)):
                refs |= ir.referenced(n.cond)
            elif isinstance(n, ir.Project):
                refs |= {c for e, _ in n.items for c in ir.referenced(e)}
        return sorted({base[r] for r in refs if r in base})

    def determined(self, attr: str) -> bool:
        """A group-by attribute: all rows of a group share its value, so one row shows the fragment."""
        return self.fact_cols.get(attr) in self.keys


def _const(e) -> Optional[float]:
    if isinstance(e, exp.Paren):
        return _const(e.this)
    if isinstance(e, exp.Neg):
        v = _const(e.this)
        return None if v is None else -v
    if isinstance(e, exp.Literal) and not e.is_string:
        return float(e.this)
    return None


def to_predicate(cond, names: dict):
    """HAVING condition -> estimators predicate; ``names``: attribute -> estimator aggregate name."""
    if isinstance(cond, exp.Paren):
        return to_predicate(cond.this, names)
    if isinstance(cond, exp.And):
        return And([to_predicate(cond.this, names), to_predicate(cond.expression, names)])
    if isinstance(cond, exp.Or):
        return Or([to_predicate(cond.this, names), to_predicate(cond.expression, names)])
    if isinstance(cond, exp.Not):
        return Not(to_predicate(cond.this, names))

    def agg(e):
        e = e.this if isinstance(e, exp.Paren) else e
        return names.get(e.name) if isinstance(e, exp.Column) else None

    if isinstance(cond, exp.Between):
        a, lo, hi = agg(cond.this), _const(cond.args.get("low")), _const(cond.args.get("high"))
        if a is not None and lo is not None and hi is not None:
            return Cmp(a, "between", lo, hi)
    elif type(cond) in _OPS:
        op = _OPS[type(cond)]
        if agg(cond.this) is not None and _const(cond.expression) is not None:
            return Cmp(agg(cond.this), op, _const(cond.expression))
        if agg(cond.expression) is not None and _const(cond.this) is not None:
            return Cmp(agg(cond.expression), _FLIP[op], _const(cond.this))
    text = re.sub(r"`?([a-z0-9_]+?)_\d+`?", r"\1", cond.sql(dialect="spark"))[:80]
    raise CannotEstimate(f"HAVING part {text!r} is not 'aggregate op constant' "
                         "(AND/OR/NOT/BETWEEN of such comparisons are supported)")


def _path(root: ir.Node, target: ir.Node) -> list:
    if root is target:
        return [root]
    for c in root.children:
        p = _path(c, target)
        if p:
            return [root] + p
    return []


def _conds(chain: list, names: dict):
    """AND of the Select conditions in a chain of Project/Select nodes (bottom-up), tracking aliases."""
    preds = []
    for n in chain:
        if isinstance(n, ir.Select):
            preds.append(to_predicate(n.cond, {k: v for k, v in names.items() if not k.startswith("key:")}))
        elif isinstance(n, ir.Project):
            for e, c in n.items:
                if isinstance(e, exp.Column) and e.name in names:
                    names[c.name] = names[e.name]
                if isinstance(e, exp.Column) and "key:" + e.name in names:
                    names["key:" + c.name] = names["key:" + e.name]
        else:
            raise CannotEstimate(f"{type(n).__name__} between aggregation levels is not supported")
    return None if not preds else preds[0] if len(preds) == 1 else And(preds)


def analyze(query: ir.Query, rows_of: Callable[[str], int]) -> Shape:
    """Find the innermost aggregation, the table to sample and the HAVING/top-k/nested structure."""
    aggs, inner = _innermost_aggregation(query)
    sub = _semi_join_subquery(query, inner)
    if sub is not None:
        shape = analyze(sub, rows_of)
        shape.bound = (f"the IN subquery's sketch on {shape.fact.table} bounds the query's (its other reads of "
                       f"{shape.fact.table} are joined on the subquery's key): sizes are upper bounds")
        return shape
    fact = _fact_scan(inner, rows_of)
    path = _path(query.root, inner)[:-1][::-1]  # nodes above `inner`, bottom-up
    args, est_aggs, names = _inner_aggregates(inner)
    shape = _groupby_shape(inner, fact, est_aggs, args)
    outer = next((a for a in aggs if a is not inner), None)
    rest = _inner_having(shape, path, outer, names)
    if outer is not None:
        rest = _outer_aggregation(shape, outer, rest, names)
    rest = _top_k(shape, rest, names, outer)
    for n in rest:
        if not isinstance(n, ir.Project):
            raise CannotEstimate(f"{type(n).__name__} above the aggregation is not supported")
    return shape


def _semi_join_subquery(query: ir.Query, inner: ir.Aggregate) -> Optional[ir.Query]:
    """The semi-join subquery holding ``inner`` as a query of its own when its sketch bounds the
    query's (``semi_join_bound``); None when ``inner`` is in no subquery's right side."""
    try:
        return subquery_bound(query, _path(query.root, inner))
    except NoBound as e:
        raise CannotEstimate(str(e)) from None


def _innermost_aggregation(query: ir.Query) -> tuple[list, ir.Aggregate]:
    """The query's aggregations and the innermost one, which must read only scans, filters, joins
    and projections; CannotEstimate for anything else."""
    if query.unsupported:
        raise CannotEstimate(query.unsupported)
    aggs = [n for n in query.root.walk() if isinstance(n, ir.Aggregate)]
    if not aggs:
        raise CannotEstimate("the query has no aggregation (nothing to estimate: every row passing "
                             "WHERE is provenance)")
    inner_l = [a for a in aggs if not any(isinstance(m, ir.Aggregate) for m in a.child.walk())]
    if len(aggs) > 2 or len(inner_l) != 1:
        raise CannotEstimate("more than one aggregation per level or more than two levels")
    inner = inner_l[0]
    for n in spine(inner.child):
        if not isinstance(n, (ir.Scan, ir.Select, ir.Join, ir.Project, ir.SemiJoin, ir.AntiJoin)):
            raise CannotEstimate(f"{type(n).__name__} below the aggregation is not supported")
    for side in filter_sides(inner.child):
        for n in side.walk():
            if not isinstance(n, (ir.Scan, ir.Select, ir.Join, ir.Project, ir.Distinct)):
                raise CannotEstimate(f"{type(n).__name__} in an EXISTS / IN subquery below the aggregation "
                                     "is not supported")
    return aggs, inner


def spine(node: ir.Node):
    """``node``'s subtree without the right sides of its semi- and anti-joins (the rows that reach
    the aggregation come from these nodes' scans; the right sides only filter them)."""
    yield node
    for c in ([node.left] if isinstance(node, (ir.SemiJoin, ir.AntiJoin)) else node.children):
        yield from spine(c)


def filter_sides(node: ir.Node) -> list:
    """The right sides of the semi- and anti-joins on ``node``'s spine."""
    return [n.right for n in spine(node) if isinstance(n, (ir.SemiJoin, ir.AntiJoin))]


def _fact_scan(inner: ir.Aggregate, rows_of: Callable[[str], int]) -> ir.Scan:
    """The scan of the largest table below the aggregation (the one to sample), read only once.  The
    right side of a semi- or anti-join below it (EXISTS / IN / NOT EXISTS / NOT IN) is evaluated in
    full against the sample, as joined tables are, so it may not read the sampled table nor a larger
    one (the estimate would cost more than the query)."""
    scans = [n for n in spine(inner.child) if isinstance(n, ir.Scan)]
    fact_table = max(sorted({s.table for s in scans}), key=rows_of)
    facts = [s for s in scans if s.table == fact_table]
    if len(facts) > 1:
        raise CannotEstimate(f"{fact_table} is read more than once below the aggregation")
    for side in filter_sides(inner.child):
        for t in sorted({n.table for n in side.walk() if isinstance(n, ir.Scan)}):
            if t == fact_table or rows_of(t) > rows_of(fact_table):
                raise CannotEstimate(f"an EXISTS / IN subquery below the aggregation reads {t}, "
                                     f"{'the sampled table' if t == fact_table else 'larger than the sampled ' + fact_table}"
                                     ": it is not evaluated in full for an estimate")
    return facts[0]


def _inner_aggregates(inner: ir.Aggregate) -> tuple[dict, list, dict]:
    """(frame column -> argument SQL, estimator aggregates, names): ``names`` maps each aggregate's
    output to its estimator name and ``key:<k>`` to each group-by key; no DISTINCT aggregates."""
    args, est_aggs, names = {}, [], {}
    for i, a in enumerate(inner.aggs):
        if a.distinct:
            raise CannotEstimate(f"{a.func}(DISTINCT ...) is not supported by the estimators")
        col = None if a.arg is None else f"__a{i}"
        if col:
            args[col] = esql(a.arg)
        est_aggs.append((a.func, col))
        names[a.out.name] = agg_name(a.func, col)
    for k in inner.keys:
        names["key:" + k] = k
    return args, est_aggs, names


def _groupby_shape(inner: ir.Aggregate, fact: ir.Scan, est_aggs: list, args: dict) -> Shape:
    """The shape of the inner aggregation alone: keys, strata, aggregates and the fact columns used."""
    fact_cols = {c.source: c.name for c in fact.cols}
    base = {c.name: c.source for c in fact.cols}
    used = set(inner.keys) | {c for a in inner.aggs for c in ir.referenced(a.arg)}
    for n in inner.child.walk():
        if isinstance(n, (ir.Select, ir.Join, ir.SemiJoin, ir.AntiJoin)):
            used |= ir.referenced(n.cond)
    keys_base = [base[k] for k in inner.keys if k in base]
    return Shape("groupby", inner, fact, list(inner.keys), sorted(keys_base), est_aggs, args,
                 fact_cols=fact_cols, relevant={base[c] for c in used if c in base},
                 agg_inputs={base[c] for a in inner.aggs for c in ir.referenced(a.arg) if c in base})


def _inner_having(shape: Shape, path: list, outer: Optional[ir.Aggregate], names: dict) -> list:
    """The inner HAVING: the filters between the aggregation and the outer one (or top-k); returns
    the nodes above them."""
    stop = path.index(outer) if outer is not None else next(
        (i for i, n in enumerate(path) if isinstance(n, ir.TopK)), len(path))
    shape.having = _conds(path[:stop], names)
    shape.kind = "having" if shape.having is not None else "groupby"
    return path[stop:]


def _outer_aggregation(shape: Shape, outer: ir.Aggregate, rest: list, names: dict) -> list:
    """A nested query's outer keys, aggregates and HAVING, over inner keys and aggregates; returns
    the nodes above its HAVING."""
    okeys = []
    for k in outer.keys:
        if "key:" + k not in names:
            raise CannotEstimate("the outer GROUP BY must use inner group-by columns")
        okeys.append(names["key:" + k])
    onames = {}
    for a in outer.aggs:
        if a.distinct or (a.arg is not None and not isinstance(a.arg, exp.Column)):
            raise CannotEstimate("outer aggregates must be over an inner column or count(*)")
        ref = None if a.arg is None else names.get(a.arg.name) or names.get("key:" + a.arg.name)
        if a.arg is not None and ref is None:
            raise CannotEstimate(f"outer aggregate {a.func} over an expression is not supported")
        shape.outer_aggs.append((a.func, ref))
        onames[a.out.name] = f"{a.func}({'*' if ref is None else ref})"
    shape.outer_keys = okeys
    rest = rest[1:]
    stop = next((i for i, n in enumerate(rest) if isinstance(n, ir.TopK)), len(rest))
    shape.outer_having = _conds(rest[:stop], onames)
    shape.kind = "nested"
    return rest[stop:]


def _top_k(shape: Shape, rest: list, names: dict, outer: Optional[ir.Aggregate]) -> list:
    """Top-k ordered by an inner aggregate, if the next node is one; returns the nodes above it."""
    if rest and isinstance(rest[0], ir.TopK):
        if outer is not None:
            raise CannotEstimate("top-k over a nested aggregation is not supported")
        t = rest[0]
        o = names.get(t.order[0][0]) if t.order else None
        if o is None:
            raise CannotEstimate("top-k must order by an aggregate (ordering by a group-by column "
                                 "or an expression is not modelled)")
        shape.topk, shape.kind = (o, t.k, not t.order[0][1]), "topk"
        rest = rest[1:]
    return rest
