"""Evaluate a sqlglot expression over a pandas DataFrame whose columns are internal attribute names.

Values live in pandas' nullable dtypes (Int64, Float64, boolean, string, datetime64), so NULL is
`pd.NA` and `&`, `|`, `~` on boolean arrays are Kleene (SQL three-valued) logic. A WHERE keeps
only rows whose condition is TRUE (`mask`). Semantics follow Spark's non-ANSI mode where the two
differ: division or modulo by zero and failed casts give NULL, `ROUND` rounds half away from zero,
`%` takes the sign of the dividend. DECIMAL values are evaluated as doubles.

Supported: literals (int, float/decimal, string, boolean, NULL, DATE/TIMESTAMP '...'), columns,
+ - * / %, unary minus, = <> < <= > >= <=>, AND/OR/NOT, BETWEEN, IN (list), IS [NOT] NULL,
[NOT] LIKE / ILIKE, CASE (searched and simple), IF, CAST/TRY_CAST to numeric, string, date,
timestamp and boolean types, and abs, round, year, month, day, substring, coalesce, lower, upper,
length. Anything else raises `advisor.errors.Unsupported`.
"""

from __future__ import annotations

import re
from typing import Optional

import numpy as np
import pandas as pd
from sqlglot import exp

from advisor.errors import Unsupported

from advisor.maintain.frames import from_values, normalize_series

_INT_TYPES = {"TINYINT", "SMALLINT", "INT", "BIGINT", "UTINYINT", "USMALLINT", "UINT", "UBIGINT"}
_FLOAT_TYPES = {"FLOAT", "DOUBLE", "DECIMAL", "BIGDECIMAL", "UDECIMAL", "MONEY"}
_STR_TYPES = {"VARCHAR", "CHAR", "TEXT", "NVARCHAR", "NCHAR", "STRING"}
_TS_TYPES = {"TIMESTAMP", "TIMESTAMPTZ", "TIMESTAMPLTZ", "TIMESTAMPNTZ", "DATETIME"}


def mask(e: exp.Expression, df: pd.DataFrame) -> np.ndarray:
    """Boolean numpy mask of the rows where predicate `e` is TRUE (FALSE and NULL are dropped)."""
    if len(df) == 0:
        return np.zeros(0, dtype=bool)
    fast = _fast_mask(e, df)
    if fast is not None:
        return fast
    s = _as_bool(evaluate(e, df))
    return s.fillna(False).to_numpy(dtype=bool)


_NP_CMP = {exp.GT: np.greater, exp.GTE: np.greater_equal, exp.LT: np.less, exp.LTE: np.less_equal,
           exp.EQ: np.equal, exp.NEQ: np.not_equal}
_SWAP = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.EQ: exp.EQ, exp.NEQ: exp.NEQ}


def _number(e: exp.Expression):
    neg = False
    while isinstance(e, (exp.Paren, exp.Neg)):
        neg ^= isinstance(e, exp.Neg)
        e = e.this
    if not isinstance(e, exp.Literal) or e.is_string:
        return None
    try:
        v = int(e.this)
    except ValueError:
        try:
            v = float(e.this)
        except ValueError:
            return None
    return -v if neg else v


def _fast_mask(e: exp.Expression, df: pd.DataFrame) -> Optional[np.ndarray]:
    """The same mask computed with numpy, for ANDs and ORs of `numeric column <op> number`
    (None for anything else). A mask is TRUE-only, so under three-valued logic AND and OR of
    masks are plain & and |; a NULL operand makes a comparison not TRUE."""
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, (exp.And, exp.Or)):
        a = _fast_mask(e.this, df)
        b = None if a is None else _fast_mask(e.expression, df)
        if b is None:
            return None
        return a & b if isinstance(e, exp.And) else a | b
    kind = type(e)
    if kind not in _NP_CMP:
        return None
    col, lit = e.this, e.expression
    while isinstance(col, exp.Paren):
        col = col.this
    if not isinstance(col, exp.Column):
        col, lit, kind = lit, col, _SWAP[kind]
        while isinstance(col, exp.Paren):
            col = col.this
    v = _number(lit)
    if v is None or not isinstance(col, exp.Column) or col.name not in df.columns:
        return None
    s = df[col.name]
    d = str(s.dtype)
    if d in ("Int64", "int64") and isinstance(v, int):
        vals = s.to_numpy(dtype=np.int64, na_value=0)
    elif d in ("Int64", "int64", "Float64", "float64"):
        vals = s.to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        return None
    out = _NP_CMP[kind](vals, v)
    if d in ("Int64", "Float64"):
        out &= ~s.isna().to_numpy(dtype=bool)
    elif d == "float64":  # a plain float column's NaN is the engine's NULL (normalize_series)
        out &= ~np.isnan(vals)
    return np.asarray(out, dtype=bool)


def evaluate(e: exp.Expression, df: pd.DataFrame) -> pd.Series:
    """The value of `e` for every row of `df`, as a Series aligned with df.index."""
    return _Eval(df).ev(e)


def _bcast(v, df: pd.DataFrame, dtype: str) -> pd.Series:
    """A constant column of length len(df)."""
    return pd.Series(pd.array([v] * len(df), dtype=dtype), index=df.index)


def _as_bool(s: pd.Series) -> pd.Series:
    """A nullable boolean view of a predicate's value (NULL stays NULL)."""
    if str(s.dtype) == "boolean":
        return s
    if s.isna().all():
        return pd.Series(pd.array([None] * len(s), dtype="boolean"), index=s.index)
    if s.dtype == object:
        return pd.Series(pd.array([None if v is None or v is pd.NA else bool(v) for v in s.tolist()],
                                  dtype="boolean"), index=s.index)
    return s.astype("boolean")


def _bool_result(res, null: np.ndarray, index) -> pd.Series:
    """A comparison's raw result as nullable boolean, NULL wherever an operand was NULL."""
    if isinstance(res, pd.Series) and str(res.dtype) == "boolean":
        arr = res.fillna(False).to_numpy(dtype=bool)
    else:
        arr = np.asarray(res, dtype=bool)
    out = pd.array(arr, dtype="boolean")
    out[null] = pd.NA
    return pd.Series(out, index=index)


def _is_numeric(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype)


def _nulls(*ss: pd.Series) -> np.ndarray:
    out = np.zeros(len(ss[0]), dtype=bool)
    for s in ss:
        out |= s.isna().to_numpy(dtype=bool)
    return out


class _Eval:
    def __init__(self, df: pd.DataFrame):
        self.df = df
        self.n = len(df)

    def ev(self, e: exp.Expression) -> pd.Series:
        m = getattr(self, "_" + type(e).__name__, None)
        if m is None:
            raise Unsupported(f"expression {e.sql()!r} ({type(e).__name__}) is not supported by the "
                              "incremental maintainer")
        return m(e)

    # ----- leaves -----
    def _Column(self, e):
        if e.name not in self.df.columns:
            raise Unsupported(f"unknown attribute {e.name!r} in {e.sql()!r}")
        return normalize_series(self.df[e.name])

    def _Literal(self, e):
        if e.is_string:
            return _bcast(e.this, self.df, "string")
        txt = e.this
        try:
            return _bcast(int(txt), self.df, "Int64")
        except ValueError:
            return _bcast(float(txt), self.df, "Float64")

    def _Boolean(self, e):
        return _bcast(bool(e.this), self.df, "boolean")

    def _Null(self, e):
        return pd.Series(pd.array([None] * self.n, dtype="Int64"), index=self.df.index)

    def _Paren(self, e):
        return self.ev(e.this)

    # ----- arithmetic -----
    def _num(self, e) -> pd.Series:
        s = self.ev(e)
        if pd.api.types.is_bool_dtype(s.dtype) or not _is_numeric(s):
            if s.isna().all():
                return pd.Series(pd.array([None] * self.n, dtype="Int64"), index=self.df.index)
            raise Unsupported(f"arithmetic on non-numeric value {e.sql()!r}")
        return s

    def _Add(self, e):
        return self._num(e.this) + self._num(e.expression)

    def _Sub(self, e):
        return self._num(e.this) - self._num(e.expression)

    def _Mul(self, e):
        return self._num(e.this) * self._num(e.expression)

    def _Div(self, e):
        a = self._num(e.this).astype("Float64")
        b = self._num(e.expression).astype("Float64")
        zero = (b == 0).fillna(False).to_numpy(dtype=bool)
        res = a / b.mask(zero, 1.0)
        res[zero] = pd.NA
        return res

    def _Mod(self, e):
        a, b = self._num(e.this), self._num(e.expression)
        zero = (b == 0).fillna(False).to_numpy(dtype=bool)
        null = _nulls(a, b) | zero
        ints = str(a.dtype) == "Int64" and str(b.dtype) == "Int64"
        av = a.astype("Float64").fillna(0).to_numpy(dtype=np.float64)
        bv = b.astype("Float64").fillna(1).to_numpy(dtype=np.float64)
        bv[zero] = 1
        out = np.fmod(av, bv)
        res = pd.Series(pd.array(out.astype(np.int64) if ints else out, dtype="Int64" if ints else "Float64"),
                        index=self.df.index)
        res[null] = pd.NA
        return res

    def _Neg(self, e):
        return -self._num(e.this)

    def _Abs(self, e):
        return self._num(e.this).abs()

    def _Round(self, e):
        s = self._num(e.this)
        d = int(e.args["decimals"].this) if e.args.get("decimals") is not None else 0
        if str(s.dtype) == "Int64" and d >= 0:
            return s
        f = 10.0 ** d
        v = s.astype("Float64")
        r = np.sign(v) * np.floor(v.abs() * f + 0.5) / f
        return r.astype("Int64") if str(s.dtype) == "Int64" else r

    # ----- comparisons -----
    def _cmp(self, e, op):
        a, b = self.ev(e.this), self.ev(e.expression)
        null = _nulls(a, b)
        if pd.api.types.is_datetime64_any_dtype(a.dtype) and b.dtype == "string":
            b = pd.to_datetime(b, errors="coerce")
        if pd.api.types.is_datetime64_any_dtype(b.dtype) and a.dtype == "string":
            a = pd.to_datetime(a, errors="coerce")
        try:
            res = op(a, b)
        except TypeError as ex:
            raise Unsupported(f"cannot compare in {e.sql()!r}: {ex}") from None
        return _bool_result(res, null, self.df.index)

    def _EQ(self, e):
        return self._cmp(e, lambda a, b: a == b)

    def _NEQ(self, e):
        return self._cmp(e, lambda a, b: a != b)

    def _GT(self, e):
        return self._cmp(e, lambda a, b: a > b)

    def _GTE(self, e):
        return self._cmp(e, lambda a, b: a >= b)

    def _LT(self, e):
        return self._cmp(e, lambda a, b: a < b)

    def _LTE(self, e):
        return self._cmp(e, lambda a, b: a <= b)

    def _NullSafeEQ(self, e):
        a, b = self.ev(e.this), self.ev(e.expression)
        na, nb = a.isna().to_numpy(dtype=bool), b.isna().to_numpy(dtype=bool)
        eq = (a == b).astype(object).where(~(na | nb), False).astype(bool).to_numpy()
        return pd.Series(pd.array(eq | (na & nb), dtype="boolean"), index=self.df.index)

    def _Between(self, e):
        x, lo, hi = e.this, e.args["low"], e.args["high"]
        return self._And(exp.and_(exp.GTE(this=x, expression=lo), exp.LTE(this=x, expression=hi)))

    def _In(self, e):
        if e.args.get("query") is not None or e.args.get("unnest") is not None:
            raise Unsupported(f"IN with a subquery is not supported: {e.sql()!r}")
        x = self.ev(e.this)
        res = pd.Series(pd.array([False] * self.n, dtype="boolean"), index=self.df.index)
        any_null = np.zeros(self.n, dtype=bool)
        for item in e.expressions:
            eq = self._cmp(exp.EQ(this=e.this, expression=item), lambda a, b: a == b)
            res = res | eq
            any_null |= eq.isna().to_numpy(dtype=bool)
        # TRUE if any equal; else NULL if x or some item is NULL; else FALSE.
        unknown = any_null & ~res.fillna(False).to_numpy(dtype=bool)
        res = res.fillna(False)
        res[unknown | x.isna().to_numpy(dtype=bool)] = pd.NA
        return res

    def _Is(self, e):
        if not isinstance(e.expression, exp.Null):
            raise Unsupported(f"IS is only supported with NULL: {e.sql()!r}")
        return pd.Series(pd.array(self.ev(e.this).isna().to_numpy(dtype=bool), dtype="boolean"),
                         index=self.df.index)

    def _Like(self, e, flags=0):
        if e.args.get("escape") is not None:
            raise Unsupported(f"LIKE ... ESCAPE is not supported: {e.sql()!r}")
        s = self.ev(e.this)
        pat = e.expression
        if not (isinstance(pat, exp.Literal) and pat.is_string):
            raise Unsupported(f"LIKE needs a constant pattern: {e.sql()!r}")
        rx = re.compile(like_to_regex(pat.this), flags | re.DOTALL)
        vals = [None if v is None or v is pd.NA else bool(rx.fullmatch(str(v))) for v in s.astype(object).tolist()]
        res = pd.Series(pd.array(vals, dtype="boolean"), index=self.df.index)
        return ~res if e.args.get("negate") else res

    def _ILike(self, e):
        return self._Like(e, re.IGNORECASE)

    # ----- logic -----
    def _And(self, e):
        return _as_bool(self.ev(e.this)) & _as_bool(self.ev(e.expression))

    def _Or(self, e):
        return _as_bool(self.ev(e.this)) | _as_bool(self.ev(e.expression))

    def _Not(self, e):
        return ~_as_bool(self.ev(e.this))

    # ----- conditionals -----
    def _Case(self, e):
        subject = e.this
        done = np.zeros(self.n, dtype=bool)
        out = [None] * self.n
        for branch in e.args.get("ifs") or []:
            cond = branch.this if subject is None else exp.EQ(this=subject, expression=branch.this)
            hit = mask(cond, self.df) & ~done
            if hit.any():
                vals = self.ev(branch.args["true"]).astype(object).tolist()
                for i in np.flatnonzero(hit):
                    out[i] = vals[i]
            done |= hit
        default = e.args.get("default")
        if default is not None and (~done).any():
            vals = self.ev(default).astype(object).tolist()
            for i in np.flatnonzero(~done):
                out[i] = vals[i]
        return from_values(out, self.df.index)

    def _If(self, e):
        case = exp.Case(ifs=[exp.If(this=e.this, true=e.args["true"])], default=e.args.get("false"))
        return self._Case(case)

    def _Coalesce(self, e):
        parts = [e.this] + list(e.expressions)
        out = [None] * self.n
        for p in parts:
            vals = self.ev(p).astype(object).tolist()
            out = [o if o is not None and o is not pd.NA else (None if v is pd.NA else v) for o, v in zip(out, vals)]
        return from_values(out, self.df.index)

    # ----- casts -----
    def _Cast(self, e):
        s = self.ev(e.this)
        t = e.to.this.name
        if t in _INT_TYPES:
            if s.dtype == "string" or s.dtype == object:
                s = pd.to_numeric(s.astype(object), errors="coerce")
            if pd.api.types.is_datetime64_any_dtype(s.dtype):
                raise Unsupported(f"cannot cast a date to an integer: {e.sql()!r}")
            v = pd.Series(s, dtype="Float64") if not str(s.dtype) == "Int64" else s
            return np.trunc(v).astype("Int64") if str(v.dtype) != "Int64" else v
        if t in _FLOAT_TYPES:
            if s.dtype == "string" or s.dtype == object:
                s = pd.to_numeric(s.astype(object), errors="coerce")
            v = s.astype("Float64")
            params = e.to.expressions
            if t == "DECIMAL" and len(params) >= 2:
                scale = int(params[1].this.this)
                f = 10.0 ** scale
                v = np.sign(v) * np.floor(v.abs() * f + 0.5) / f
            return v
        if t in _STR_TYPES:
            if pd.api.types.is_datetime64_any_dtype(s.dtype):
                return s.dt.strftime("%Y-%m-%d").astype("string")
            if str(s.dtype) == "boolean":
                return s.astype(object).map(lambda v: v if v is pd.NA else str(v).lower()).astype("string")
            return s.astype(object).map(lambda v: v if v is pd.NA or v is None else str(v)).astype("string")
        if t == "DATE":
            return pd.to_datetime(s.astype(object), errors="coerce").dt.normalize()
        if t in _TS_TYPES:
            return pd.to_datetime(s.astype(object), errors="coerce")
        if t == "BOOLEAN":
            if s.dtype == "string":
                m = {"true": True, "false": False, "t": True, "f": False, "1": True, "0": False}
                return from_values([m.get(str(v).strip().lower()) if v is not pd.NA else None
                                    for v in s.tolist()], self.df.index).astype("boolean")
            return (s != 0) if _is_numeric(s) else _as_bool(s)
        raise Unsupported(f"CAST to {t} is not supported: {e.sql()!r}")

    _TryCast = _Cast

    def _TsOrDsToDate(self, e):
        s = self.ev(e.this)
        if pd.api.types.is_datetime64_any_dtype(s.dtype):
            return s
        return pd.to_datetime(s.astype(object), errors="coerce")

    # ----- functions -----
    def _date_part(self, e, part: str):
        s = self._TsOrDsToDate(exp.TsOrDsToDate(this=e.this))
        return getattr(s.dt, part).astype("Int64")

    def _Year(self, e):
        return self._date_part(e, "year")

    def _Month(self, e):
        return self._date_part(e, "month")

    def _Day(self, e):
        return self._date_part(e, "day")

    def _Lower(self, e):
        return self.ev(e.this).astype("string").str.lower()

    def _Upper(self, e):
        return self.ev(e.this).astype("string").str.upper()

    def _Length(self, e):
        return self.ev(e.this).astype("string").str.len().astype("Int64")

    def _Substring(self, e):
        s = self.ev(e.this).astype("string").astype(object).tolist()
        start = self.ev(e.args["start"]).astype(object).tolist() if e.args.get("start") is not None else [1] * self.n
        ln = self.ev(e.args["length"]).astype(object).tolist() if e.args.get("length") is not None else [None] * self.n
        out = []
        for v, p, n in zip(s, start, ln):
            if v is pd.NA or p is pd.NA or n is pd.NA:
                out.append(None)
            else:
                out.append(spark_substring(v, int(p), None if n is None else int(n)))
        return pd.Series(pd.array(out, dtype="string"), index=self.df.index)


def spark_substring(s: str, pos: int, length: int | None) -> str:
    """Spark's substring: 1-based, 0 behaves like 1, negative positions count from the end."""
    if pos > 0:
        start = pos - 1
    elif pos == 0:
        start = 0
    else:
        start = len(s) + pos
    end = len(s) if length is None else start + length
    if length is not None and length <= 0:
        return ""
    start_c = max(start, 0)
    return s[start_c:max(end, start_c)] if end > 0 else ""


def like_to_regex(pattern: str) -> str:
    """Translate a SQL LIKE pattern (% any run, _ one char, backslash escapes) into a regex."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return "".join(out)
