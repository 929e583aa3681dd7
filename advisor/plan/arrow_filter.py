"""A SQL predicate as a pyarrow filter that keeps a superset of the rows it accepts.

Maintenance reads each batch's rows from Parquet and then applies the plan's pushed-down
selections. Dropping rows that the selection will reject anyway, before they become pandas
frames, saves the conversion and annotation work for rows that cannot matter (a delta
filtered to 2 % of its rows is the common case). The engine still applies the full condition
afterwards. So this filter only has to be *sound*: it must never drop a row the condition
keeps. It may keep rows the condition rejects. The catalog applies it only to batches of at
least ``MIN_ROWS`` rows: an Acero filter costs ~0.6 ms per call, more than converting and
filtering a small batch in the engine (TPC-H SF1, 1,000-row batch: the read went 3.0 -> 2.0 ms).

How each part of the predicate is translated:
* AND keeps the parts it can translate and drops the others, which only widens the filter.
* OR needs both sides translated.
* NOT, `<>`, column-to-column comparisons and arithmetic are not translated.
* Numeric comparisons are widened by a relative 1e-9. The engine compares decimals as Python
  floats, and arrow's conversion may round a decimal differently in the last bit.
* `IS NULL` also keeps NaN.
* Only plain `YYYY-MM-DD` literals are compared with date columns.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Optional

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_REL = 1e-9
_MAX_IN = 64
MIN_ROWS = 4096


def _kind(t: pa.DataType) -> Optional[str]:
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "num"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "str"
    if pa.types.is_date32(t):
        return "date"
    return None


def _literal(e: exp.Expression):
    """(kind, value) of a literal, or None."""
    neg = False
    while isinstance(e, (exp.Paren, exp.Neg)):
        neg ^= isinstance(e, exp.Neg)
        e = e.this
    if not isinstance(e, exp.Literal):
        return None
    if e.is_string:
        if neg:
            return None
        s = e.this
        if _DATE.match(s):
            try:
                return "strdate", (s, dt.date.fromisoformat(s))
            except ValueError:
                return "str", s
        return "str", s
    try:
        v = float(e.this)
    except ValueError:
        return None
    return "num", -v if neg else v


def _column(e: exp.Expression, schema: pa.Schema) -> Optional[tuple[str, str]]:
    while isinstance(e, exp.Paren):
        e = e.this
    if not isinstance(e, exp.Column) or e.name not in schema.names:
        return None
    k = _kind(schema.field(e.name).type)
    return (e.name, k) if k else None


def _operand(col: tuple[str, str], lit) -> Optional[tuple[pc.Expression, object, str]]:
    """(field expression, comparable literal, 'num'|'exact') when column and literal types agree."""
    name, ck = col
    lk, v = lit
    if ck == "num" and lk == "num":
        return pc.field(name).cast(pa.float64()), v, "num"
    if ck == "str" and lk in ("str", "strdate"):
        return pc.field(name), (v[0] if lk == "strdate" else v), "exact"
    if ck == "date" and lk == "strdate":
        return pc.field(name), pa.scalar(v[1], pa.date32()), "exact"
    return None


_FLIP = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.EQ: exp.EQ}


def _slack(v: float) -> float:
    return _REL * max(1.0, abs(v))


def _compare(kind: type, f: pc.Expression, v, how: str) -> pc.Expression:
    if how == "num":  # widened: the engine's float may differ from arrow's in the last bit
        d = _slack(v)
        if kind in (exp.GT, exp.GTE):
            return f >= v - d
        if kind in (exp.LT, exp.LTE):
            return f <= v + d
        return (f >= v - d) & (f <= v + d)
    return {exp.GT: f > v, exp.GTE: f >= v, exp.LT: f < v, exp.LTE: f <= v, exp.EQ: f == v}[kind]


def superset_filter(e: Optional[exp.Expression], schema: pa.Schema) -> Optional[pc.Expression]:
    """A pyarrow expression keeping at least every row on which `e` is TRUE (None: keep all)."""
    if e is None:
        return None
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.And):
        parts = [p for p in (superset_filter(e.this, schema), superset_filter(e.expression, schema))
                 if p is not None]
        return None if not parts else parts[0] if len(parts) == 1 else parts[0] & parts[1]
    if isinstance(e, exp.Or):
        a, b = superset_filter(e.this, schema), superset_filter(e.expression, schema)
        return None if a is None or b is None else a | b
    if type(e) in _FLIP:
        kind = type(e)
        col, lit = _column(e.this, schema), _literal(e.expression)
        if col is None or lit is None:
            col, lit, kind = _column(e.expression, schema), _literal(e.this), _FLIP[type(e)]
        if col is None or lit is None:
            return None
        op = _operand(col, lit)
        return None if op is None else _compare(kind, *op)
    if isinstance(e, exp.Between):
        col, lo, hi = _column(e.this, schema), _literal(e.args["low"]), _literal(e.args["high"])
        if col is None or lo is None or hi is None:
            return None
        a, b = _operand(col, lo), _operand(col, hi)
        if a is None or b is None:
            return None
        return _compare(exp.GTE, *a) & _compare(exp.LTE, *b)
    if isinstance(e, exp.In) and not e.args.get("query"):
        col = _column(e.this, schema)
        items = e.expressions
        if col is None or not items or len(items) > _MAX_IN:
            return None
        out = None
        for it in items:
            lit = _literal(it)
            op = None if lit is None else _operand(col, lit)
            if op is None:
                return None
            term = _compare(exp.EQ, *op)
            out = term if out is None else out | term
        return out
    if isinstance(e, exp.Is) and isinstance(e.expression, exp.Null):
        col = _column(e.this, schema)
        return None if col is None else pc.field(col[0]).is_null(nan_is_null=True)
    if isinstance(e, exp.Not) and isinstance(e.this, exp.Is) and isinstance(e.this.expression, exp.Null):
        col = _column(e.this.this, schema)
        return None if col is None else ~pc.field(col[0]).is_null(nan_is_null=False)
    return None


def apply(table: pa.Table, e: Optional[exp.Expression]) -> pa.Table:
    """`table` with the rows `superset_filter(e)` keeps. If arrow cannot evaluate the filter on
    these types, the table is returned whole: not filtering is always sound."""
    f = superset_filter(e, table.schema)
    if f is None or table.num_rows == 0:
        return table
    try:
        return table.filter(f)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return table
