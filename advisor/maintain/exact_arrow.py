"""Exact evaluation of filters and integer/DECIMAL arithmetic over pyarrow columns, as Spark does.

What a driver-side bulk initialisation (``advisor.maintain.spark.bulk_arrow``) needs below an
aggregation such as TPC-H Q3's ``sum(l_extendedprice * (1 - l_discount)) ... WHERE l_shipdate >
DATE '1995-03-15'``: numbers are carried as unscaled 64-bit integers with a scale (DECIMAL columns
of at most 18 digits, integer columns, integer and decimal literals), so +, - and * are exact and
every step checks that it cannot pass 2**63; comparisons align scales; AND, OR and NOT follow
SQL's three-valued logic, and a filter keeps the rows where its condition is TRUE.  Anything else
(doubles, division, functions, strings compared with dates, ...) is refused with ``ArrowUnsupported``:
the caller then lets Spark do it.

>>> import datetime as dt, decimal
>>> from sqlglot import parse_one
>>> dec = lambda *v: pa.array([None if x is None else decimal.Decimal(x) for x in v], pa.decimal128(15, 2))
>>> t = pa.table({"p": dec("10.00", "20.50", None), "d": dec("0.10", "0.00", "0.05"),
...               "s": pa.array([dt.date(1995, 3, 1), dt.date(1995, 4, 1), dt.date(1995, 5, 1)])})
>>> types = {"p": "decimal(15,2)", "d": "decimal(15,2)", "s": "date"}
>>> v = number(parse_one("p * (1 - d)"), t, types)
>>> v.scale, v.values.tolist(), v.valid.tolist()
(4, [90000, 205000, 0], [True, True, False])
>>> keep(parse_one("s > CAST('1995-03-15' AS DATE)"), t, types).tolist()
[False, True, True]
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from advisor.maintain.decimals import MAX_PRECISION, parse_decimal

LIMIT = 2 ** 63 - 1          # an int64's magnitude
_DIGITS = 18                 # DECIMAL columns whose unscaled values are one int64 word
_INTS = {"tinyint": 8, "smallint": 16, "int": 32, "integer": 32, "bigint": 64}
_CMP = {exp.GT: np.greater, exp.GTE: np.greater_equal, exp.LT: np.less, exp.LTE: np.less_equal,
        exp.EQ: np.equal, exp.NEQ: np.not_equal}
_EPOCH = dt.date(1970, 1, 1)


class ArrowUnsupported(Exception):
    """An expression or a value range this evaluator does not take (Spark evaluates it instead)."""


@dataclass
class Num:
    """Unscaled int64 values at ``scale`` (0 where NULL), ``valid`` per row, and whether Spark
    types them DECIMAL (``decimal``) or integer."""

    values: np.ndarray
    valid: np.ndarray
    scale: int
    decimal: bool
    bits: int = 64   # an integer result's Spark type (8, 16, 32 or 64 bits)

    def most(self) -> int:
        """The largest magnitude among the valid values (a Python int)."""
        if not len(self.values):
            return 0
        v = self.values[self.valid] if not self.valid.all() else self.values
        return max(abs(int(v.min())), abs(int(v.max()))) if len(v) else 0


@dataclass
class Truth:
    """Three-valued truth per row: ``value`` where ``known``, NULL elsewhere."""

    value: np.ndarray
    known: np.ndarray


def _strip(e: exp.Expression) -> exp.Expression:
    while isinstance(e, exp.Paren):
        e = e.this
    return e


def _dtype(e: exp.Column, types: dict) -> str:
    t = types.get(e.name)
    if t is None:
        raise ArrowUnsupported(f"unknown column {e.name}")
    return str(t).lower()


def _mask(arr) -> np.ndarray:
    return np.ones(len(arr), dtype=bool) if arr.null_count == 0 else np.asarray(arr.is_valid())


def _column(tab: pa.Table, name: str):
    col = tab.column(name)
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def number(e: exp.Expression, tab: pa.Table, types: dict) -> Num:
    """``e`` (integer or DECIMAL columns and literals under +, - and unary -, *) evaluated
    exactly; ``ArrowUnsupported`` for anything else or for a step that could pass 2**63."""
    e = _strip(e)
    n = len(tab)
    if isinstance(e, exp.Column):
        t = _dtype(e, types)
        arr = _column(tab, e.name)
        valid = _mask(arr)
        d = parse_decimal(t)
        if d is not None:
            if d[0] > _DIGITS or not pa.types.is_decimal128(arr.type):
                raise ArrowUnsupported(f"DECIMAL{d} wider than {_DIGITS} digits")
            words = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=2 * (arr.offset + n))[2 * arr.offset:]
            vals = np.where(valid, words[0::2], 0)
            return Num(vals, valid, d[1], True)
        if t in _INTS:
            vals = np.asarray(arr.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
            return Num(vals, valid, 0, False, _INTS[t])
        raise ArrowUnsupported(f"column of type {t}")
    if isinstance(e, exp.Literal) and not e.is_string:
        txt = e.this
        m = re.fullmatch(r"-?(\d*)(?:\.(\d+))?", txt)
        if not m or not (m.group(1) or m.group(2)):
            raise ArrowUnsupported(f"literal {txt}")  # exponent notation is a double in Spark
        scale = len(m.group(2) or "")
        u = int(txt.replace(".", ""))
        if abs(u) > LIMIT:
            raise ArrowUnsupported("literal beyond 64 bits")
        return Num(np.full(n, u, dtype=np.int64), np.ones(n, dtype=bool), scale, scale > 0,
                   32 if abs(u) < 2 ** 31 else 64)
    if isinstance(e, exp.Neg):
        a = number(e.this, tab, types)
        return _fits(Num(-_checked(a).values, a.valid, a.scale, a.decimal, a.bits))
    if isinstance(e, (exp.Add, exp.Sub, exp.Mul)):
        a, b = number(e.left, tab, types), number(e.right, tab, types)
        valid = a.valid & b.valid
        if isinstance(e, exp.Mul):
            if a.most() * b.most() > LIMIT or a.scale + b.scale > MAX_PRECISION:
                raise ArrowUnsupported("a product that could pass 64 bits")
            return _fits(Num(np.where(valid, a.values * b.values, 0), valid, a.scale + b.scale,
                             a.decimal or b.decimal, max(a.bits, b.bits)))
        a, b = _aligned(a, b)
        if a.most() + b.most() > LIMIT:
            raise ArrowUnsupported("a sum that could pass 64 bits")
        vals = a.values + b.values if isinstance(e, exp.Add) else a.values - b.values
        return _fits(Num(np.where(valid, vals, 0), valid, a.scale, a.decimal or b.decimal, max(a.bits, b.bits)))
    raise ArrowUnsupported(f"expression {type(e).__name__}")


def _checked(x: Num) -> Num:
    if x.most() > LIMIT:
        raise ArrowUnsupported("a value of -2**63")
    return x


def _fits(x: Num) -> Num:
    """``x``, unless it is an integer result that passes its Spark type (which would overflow
    there: an error, or a wrapped value without ANSI mode)."""
    if not x.decimal and x.most() > 2 ** (x.bits - 1) - 1:
        raise ArrowUnsupported(f"an integer result beyond {x.bits} bits")
    return x


def _aligned(a: Num, b: Num) -> tuple[Num, Num]:
    """``a`` and ``b`` at their larger scale."""
    s = max(a.scale, b.scale)

    def up(x: Num) -> Num:
        f = 10 ** (s - x.scale)
        if f == 1:
            return x
        if x.most() * f > LIMIT:
            raise ArrowUnsupported("rescaling past 64 bits")
        return Num(x.values * f, x.valid, s, x.decimal, x.bits)

    return up(a), up(b)


def _date_literal(e: exp.Expression) -> Optional[int]:
    """Days since 1970-01-01 of ``CAST('yyyy-mm-dd' AS DATE)`` (how ``DATE '...'`` parses), else None."""
    if (isinstance(e, exp.Cast) and e.to.this == exp.DataType.Type.DATE
            and isinstance(e.this, exp.Literal) and e.this.is_string):
        try:
            return (dt.date.fromisoformat(e.this.this.strip()) - _EPOCH).days
        except ValueError:
            raise ArrowUnsupported(f"date literal {e.this.this!r}") from None
    return None


def _operand_kind(e: exp.Expression, types: dict) -> str:
    e = _strip(e)
    if isinstance(e, exp.Column):
        t = _dtype(e, types)
        return "date" if t == "date" else "str" if t in ("string",) or t.startswith("varchar") else "num"
    if _date_literal(e) is not None:
        return "date"
    if isinstance(e, exp.Literal) and e.is_string:
        return "str"
    return "num"


def _dates(e: exp.Expression, tab: pa.Table, types: dict) -> Num:
    e = _strip(e)
    days = _date_literal(e)
    if days is not None:
        return Num(np.full(len(tab), days, dtype=np.int64), np.ones(len(tab), dtype=bool), 0, False)
    if isinstance(e, exp.Column) and _dtype(e, types) == "date":
        arr = _column(tab, e.name)
        return Num(np.asarray(arr.cast(pa.int32()).fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64),
                   _mask(arr), 0, False)
    raise ArrowUnsupported("a date compared with a non-date")


def _strings(e: exp.Expression, tab: pa.Table, types: dict):
    e = _strip(e)
    if isinstance(e, exp.Literal) and e.is_string:
        return pa.scalar(e.this, pa.string())
    if isinstance(e, exp.Column) and _operand_kind(e, types) == "str":
        return _column(tab, e.name)
    raise ArrowUnsupported("a string compared with a non-string")


def _compare(e: exp.Expression, tab: pa.Table, types: dict) -> Truth:
    kinds = {_operand_kind(e.left, types), _operand_kind(e.right, types)}
    if kinds == {"str"}:
        fn = {exp.GT: pc.greater, exp.GTE: pc.greater_equal, exp.LT: pc.less, exp.LTE: pc.less_equal,
              exp.EQ: pc.equal, exp.NEQ: pc.not_equal}[type(e)]
        got = fn(_strings(e.left, tab, types), _strings(e.right, tab, types))
        if isinstance(got, pa.Scalar):
            raise ArrowUnsupported("a comparison of two literals")
        return Truth(np.asarray(got.fill_null(False)), _mask(got))
    if kinds == {"date"}:
        a, b = _dates(e.left, tab, types), _dates(e.right, tab, types)
    elif kinds == {"num"}:
        a, b = _aligned(number(e.left, tab, types), number(e.right, tab, types))
    else:
        raise ArrowUnsupported("a comparison across types")
    return Truth(_CMP[type(e)](a.values, b.values), a.valid & b.valid)


def truth(e: exp.Expression, tab: pa.Table, types: dict) -> Truth:
    """The condition ``e`` per row of ``tab`` in three-valued logic (comparisons of numbers, dates
    or strings; BETWEEN, IN lists, IS [NOT] NULL, AND, OR, NOT)."""
    e = _strip(e)
    if type(e) in _CMP:
        return _compare(e, tab, types)
    if isinstance(e, exp.And):
        a, b = truth(e.left, tab, types), truth(e.right, tab, types)
        false = (a.known & ~a.value) | (b.known & ~b.value)
        known = false | (a.known & b.known)
        return Truth(known & ~false, known)
    if isinstance(e, exp.Or):
        a, b = truth(e.left, tab, types), truth(e.right, tab, types)
        true = (a.known & a.value) | (b.known & b.value)
        known = true | (a.known & b.known)
        return Truth(true, known)
    if isinstance(e, exp.Not):
        a = truth(e.this, tab, types)
        return Truth(a.known & ~a.value, a.known)
    if isinstance(e, exp.Between):
        lo = exp.GTE(this=e.this.copy(), expression=e.args["low"].copy())
        hi = exp.LTE(this=e.this.copy(), expression=e.args["high"].copy())
        return truth(exp.And(this=lo, expression=hi), tab, types)
    if isinstance(e, exp.In) and e.expressions and not e.args.get("query"):
        if any(isinstance(_strip(x), exp.Null) for x in e.expressions):
            raise ArrowUnsupported("NULL in an IN list")
        out = None
        for x in e.expressions:
            t = _compare(exp.EQ(this=e.this.copy(), expression=x.copy()), tab, types)
            out = t if out is None else truth_or(out, t)
        return out
    if isinstance(e, exp.Is) and isinstance(_strip(e.expression), exp.Null):
        inner = _strip(e.this)
        if not isinstance(inner, exp.Column):
            raise ArrowUnsupported("IS NULL of an expression")
        null = ~_mask(_column(tab, inner.name))
        _dtype(inner, types)
        return Truth(null, np.ones(len(tab), dtype=bool))
    raise ArrowUnsupported(f"condition {type(e).__name__}")


def truth_or(a: Truth, b: Truth) -> Truth:
    true = (a.known & a.value) | (b.known & b.value)
    return Truth(true, true | (a.known & b.known))


def keep(e: exp.Expression, tab: pa.Table, types: dict) -> np.ndarray:
    """The rows a filter on ``e`` keeps: where it is TRUE (not FALSE, not NULL)."""
    t = truth(e, tab, types)
    return t.value & t.known


def columns_of(e: exp.Expression) -> list[str]:
    """The column names ``e`` reads."""
    return [c.name for c in e.find_all(exp.Column)]


def supported(e: exp.Expression, types: dict, condition: bool) -> bool:
    """Whether ``e`` (a condition, or a number when ``condition`` is False) is of the forms this
    module evaluates, judged on an empty table of ``types`` (value ranges are checked when run).

    >>> from sqlglot import parse_one
    >>> types = {"a": "int", "x": "double", "s": "string"}
    >>> supported(parse_one("a > 3 AND s IN ('x', 'y')"), types, True), supported(parse_one("x > 1"), types, True)
    (True, False)
    >>> supported(parse_one("a * 2 - 1"), types, False), supported(parse_one("a / 2"), types, False)
    (True, False)
    """
    names = set(columns_of(e))
    if not names <= set(types):
        return False
    arrow = {"string": pa.string(), "date": pa.date32(), "tinyint": pa.int8(), "smallint": pa.int16(),
             "int": pa.int32(), "integer": pa.int32(), "bigint": pa.int64()}
    cols = {}
    for n in names:
        t = str(types[n]).lower()
        d = parse_decimal(t)
        ty = pa.decimal128(*d) if d is not None else arrow.get("string" if t.startswith("varchar") else t)
        if ty is None:
            return False
        cols[n] = pa.array([], type=ty)
    tab = pa.table(cols) if cols else pa.table({"_": pa.array([], pa.int8())})
    try:
        truth(e, tab, types) if condition else number(e, tab, types)
    except ArrowUnsupported:
        return False
    return True
