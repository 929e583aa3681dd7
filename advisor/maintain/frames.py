"""Annotated frames: the one data representation shared by the reference evaluator and the engine.

An *annotated frame* is a pandas DataFrame whose columns are

* the attributes of an IR node, named by their internal names, held in pandas' nullable dtypes
  (Int64, Float64, boolean, string, datetime64) so that SQL NULL is `pd.NA` everywhere and
  comparisons/AND/OR follow SQL three-valued logic;
* `M` (`"__m"`): the signed multiplicity of the row (+n insert, -n delete; the reference evaluator
  uses +1 per copy);
* `fcol(sid)` (`"__f<sid>"`) for every sketched scan below the node: a frozenset of that scan's
  fragment ids in the row's lineage (a singleton straight after the scan, a union after joins and
  aggregation, possibly empty for rows of the other branch of a union).

Keeping one column per sketched scan (instead of a single global id space) makes the final sketch
per scan a column-wise union and lets a Spark `BaseSide` return plain integer fragment ids.
Rows are turned into hashable Python tuples with `row_values`, which maps every NULL flavour
(pd.NA, NaN, NaT, None) to `None` so that equal SQL values give equal dictionary keys.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import math
import sys
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from advisor.caches import BoundedMemo
from advisor.warehouse.value_kinds import kind_of

M = "__m"
EMPTY: frozenset = frozenset()
_SINGLETONS = BoundedMemo("singleton fragment sets")  # interned: one frozenset per fragment id


def fcol(sid: int) -> str:
    """Name of the annotation column of sketched scan `sid`."""
    return f"__f{sid}"


def singleton(f: int) -> frozenset:
    """A cached frozenset({f}) (scans create one per row, so avoid re-allocating)."""
    s = _SINGLETONS.get(f)
    if s is None:
        s = _SINGLETONS[f] = frozenset((f,))
        _FRAGMENT_OF[id(s)] = f
    return s


_FRAGMENT_OF: dict[int, int] = {id(EMPTY): -1}  # id of a cached singleton (kept alive) -> fragment


def fragment_ids(col) -> np.ndarray | None:
    """Per annotation in `col`, its one fragment (-1 for EMPTY) when every annotation is a cached
    singleton or EMPTY (what scans produce), looked up by object identity; None otherwise."""
    get = _FRAGMENT_OF.get
    ids = np.fromiter((get(id(a), -2) for a in col), dtype=np.int64, count=len(col))
    return None if len(ids) and ids.min() == -2 else ids


_SING_TABLE = np.empty(0, dtype=object)


def singleton_table(top: int) -> np.ndarray:
    """An object array whose slot f holds ``singleton(f)`` for every f < top (at least) and whose
    last slot holds EMPTY: `table[ids]` annotates a whole column of fragment ids in one step."""
    global _SING_TABLE
    if len(_SING_TABLE) < top + 1:
        t = np.empty(max(top, 1024, 2 * (len(_SING_TABLE) - 1)) + 1, dtype=object)
        t[:-1] = [singleton(f) for f in range(len(t) - 1)]
        t[-1] = EMPTY
        _SING_TABLE = t
    return _SING_TABLE


# ---------- NULL and scalar normalisation ----------
def is_null(v: Any) -> bool:
    if v is None or v is pd.NA or v is pd.NaT:
        return True
    if isinstance(v, float) and math.isnan(v):
        return True
    return False


def py_scalar(v: Any) -> Any:
    """A plain hashable Python value: None for NULL, Python numbers instead of numpy scalars."""
    if is_null(v):
        return None
    if isinstance(v, np.generic):
        v = v.item()
        if isinstance(v, float) and math.isnan(v):
            return None
    if isinstance(v, decimal.Decimal):
        return float(v)
    return v


def column_values(s: pd.Series) -> list:
    """The column as a list of normalised Python values.

    Numeric and boolean columns (numpy or nullable) convert in one vectorised step, with NULL and
    NaN set to None afterwards; other columns go value by value through `py_scalar`."""
    d = s.dtype
    kind = _FAST_KINDS.get(str(d)) or (d.kind if isinstance(d, np.dtype) and d.kind in "iufb" else None)
    if kind is None or not len(s):
        return [py_scalar(v) for v in s.tolist()]
    if kind == "f":
        vals = s.to_numpy(dtype=np.float64, na_value=np.nan)
        null = np.isnan(vals)
    else:
        null = s.isna().to_numpy(dtype=bool)
        vals = s.to_numpy(dtype=_FAST_NP[kind], na_value=_FAST_NP[kind](0))
    out = vals.tolist()
    if null.any():
        for i in np.flatnonzero(null).tolist():
            out[i] = None
    return out


_FAST_KINDS = {"Int64": "i", "Int32": "i", "Int16": "i", "Int8": "i", "Float64": "f", "Float32": "f",
               "boolean": "b"}
_FAST_NP = {"i": np.int64, "u": np.uint64, "b": np.bool_}


def row_values(df: pd.DataFrame, cols: Sequence[str]) -> list[tuple]:
    """One tuple of normalised values per row, over `cols` (an empty tuple per row if no cols)."""
    if not cols:
        return [()] * len(df)
    return list(zip(*[column_values(df[c]) for c in cols]))


# ---------- dtype normalisation ----------
def _kind_of_type(t: type) -> str | None:
    """The dtype family of one Python/numpy type ("null" for NULL flavours, None if unknown)."""
    if t is type(None) or t is type(pd.NA) or t is type(pd.NaT):
        return "null"
    if issubclass(t, (bool, np.bool_)):
        return "bool"
    if issubclass(t, (int, np.integer)):
        return "int"
    if issubclass(t, (float, np.floating, decimal.Decimal)):
        return "float"
    if issubclass(t, str):
        return "str"
    if issubclass(t, (dt.date, dt.datetime, pd.Timestamp, np.datetime64)):
        return "date"
    return None


_DTYPE_OF = {frozenset(): "Int64", frozenset({"int"}): "Int64", frozenset({"float"}): "Float64",
             frozenset({"int", "float"}): "Float64", frozenset({"bool"}): "boolean",
             frozenset({"str"}): "string", frozenset({"date"}): "datetime64[ns]"}


def _infer_dtype(vals: list) -> str | None:
    """The nullable dtype for a list of values, decided from the set of their Python types (a
    float NaN is NULL, so a float type only counts when some float is not NaN)."""
    kinds = set()
    for t in {type(v) for v in vals}:
        k = _kind_of_type(t)
        if k is None:
            return None
        if k == "float" and issubclass(t, float) and not any(
                type(v) is t and v == v for v in vals):
            continue  # only NaNs of this type: NULLs
        if k != "null":
            kinds.add(k)
    return _DTYPE_OF.get(frozenset(kinds))


def _plain_numbers(vals: list) -> bool:
    """Only Python ints and non-NaN floats: pandas converts such a list as it is."""
    types = {type(v) for v in vals}
    return types <= {int, float} and (float not in types or not any(v != v for v in vals))


def _fast_numbers(vals: list):
    """Plain Python ints (fitting int64) or floats, with None for NULL, straight into a masked
    array: ~5x cheaper than ``pd.array(list)``, which re-infers every value. None otherwise
    (mixed types, only NULLs, huge ints): the general path decides."""
    types = set(map(type, vals))
    none = type(None) in types
    types.discard(type(None))
    if len(types) != 1 or not vals:
        return None
    t = types.pop()
    if t is not float and t is not int:
        return None
    mask = np.fromiter((v is None for v in vals), dtype=bool, count=len(vals)) if none else None
    src = [0 if v is None else v for v in vals] if none else vals
    if t is float:
        arr = np.array(src, dtype=np.float64)
        nan = np.isnan(arr)
        mask = nan if mask is None else (mask | nan)
        if mask.all():
            return None
        return pd.arrays.FloatingArray(arr, mask)
    try:
        arr = np.array(src, dtype=np.int64)
    except OverflowError:
        return None
    return pd.arrays.IntegerArray(arr, np.zeros(len(vals), dtype=bool) if mask is None else mask)


def from_values(vals: list, index=None) -> pd.Series:
    """A nullable-typed Series from Python values (type inferred from the non-null values)."""
    fast = _fast_numbers(vals)
    if fast is not None:
        return pd.Series(fast, index=index)
    dtype = _infer_dtype(vals)
    if dtype is None:
        return pd.Series([None if is_null(v) else v for v in vals], index=index, dtype=object)
    if dtype in ("Float64", "Int64") and _plain_numbers(vals):
        return pd.Series(pd.array(vals, dtype=dtype), index=index)
    if dtype == "Float64":
        vals = [None if is_null(v) else float(v) for v in vals]
    elif dtype == "datetime64[ns]":
        return pd.Series(pd.to_datetime([None if is_null(v) else v for v in vals]), index=index)
    else:
        vals = [None if is_null(v) else v for v in vals]
    return pd.Series(pd.array(vals, dtype=dtype), index=index)


def normalize_series(s: pd.Series) -> pd.Series:
    """Convert a column to the nullable dtype family the evaluators expect."""
    d = s.dtype
    if isinstance(d, pd.api.extensions.ExtensionDtype):
        if str(d) in ("Int64", "Float64", "boolean", "string") or str(d).startswith("string"):
            return s
        if str(d).startswith(("Int", "UInt")):
            return s.astype("Int64")
        if str(d).startswith("Float"):
            return s.astype("Float64")
        if isinstance(d, pd.DatetimeTZDtype):
            return s.dt.tz_convert("UTC").dt.tz_localize(None).astype("datetime64[ns]")
        return from_values(s.tolist(), s.index)
    if d.kind == "b":
        return s.astype("boolean")
    if d.kind in "iu":
        return s.astype("Int64")
    if d.kind == "f":
        return s.astype("Float64")
    if d.kind == "M":
        return s.astype("datetime64[ns]")
    return from_values(s.tolist(), s.index)


def normalize_frame(df: pd.DataFrame, skip: Iterable[str] = ()) -> pd.DataFrame:
    """Normalise every attribute column (annotation and multiplicity columns are left alone)."""
    skip = set(skip)
    out = {}
    for c in df.columns:
        if c in skip or c == M or c.startswith("__f"):
            out[c] = df[c]
        else:
            out[c] = normalize_series(df[c])
    return pd.DataFrame(out, index=df.index)


def make_frame(data: dict) -> pd.DataFrame:
    """A frame of equally long columns (Series, arrays or lists) in `data`'s order, positionally.

    `pd.DataFrame(data, columns=...)` aligns Series on their indexes and then reindexes by the
    column list: ~0.25 ms even for a handful of rows, paid several times per maintenance step.
    Passing the bare arrays with a RangeIndex costs a fifth of that."""
    arrays = {k: (v.array if isinstance(v, pd.Series) else v) for k, v in data.items()}
    n = len(next(iter(arrays.values()))) if arrays else 0
    return pd.DataFrame(arrays, index=pd.RangeIndex(n), copy=False)


def frame_from_rows(cols: Sequence[str], rows: list[tuple], mults: list[int],
                    sids: Sequence[int], annots: list[tuple]) -> pd.DataFrame:
    """Build an annotated frame from Python rows, multiplicities and per-sid annotation tuples."""
    data: dict[str, Any] = {}
    for i, c in enumerate(cols):
        data[c] = from_values([r[i] for r in rows])
    data[M] = np.asarray(mults, dtype=np.int64)
    for j, sid in enumerate(sids):
        col = np.empty(len(annots), dtype=object)
        col[:] = [a[j] for a in annots]
        data[fcol(sid)] = col
    return make_frame(data)


def empty_frame(cols: Sequence[str], sids: Sequence[int]) -> pd.DataFrame:
    """An annotated frame with no rows (a copy of a cached one: building it costs ~0.3 ms)."""
    key = (tuple(cols), tuple(sids))
    df = _EMPTY_FRAMES.get(key)
    if df is None:
        df = _EMPTY_FRAMES[key] = frame_from_rows(cols, [], [], sids, [])
    return df.copy()


_EMPTY_FRAMES = BoundedMemo("empty frames")  # per column layout


def annotations(df: pd.DataFrame, sids: Sequence[int]) -> list[tuple]:
    """Per row, the tuple of annotation frozensets in `sids` order."""
    if not sids:
        return [()] * len(df)
    return list(zip(*[df[fcol(s)].tolist() for s in sids]))


def consolidate(df: pd.DataFrame, cols: Sequence[str], sids: Sequence[int]) -> pd.DataFrame:
    """Sum multiplicities of equal (tuple, annotation) rows and drop rows whose net is 0."""
    if len(df) == 0:
        return df
    acc: dict[tuple, int] = {}
    for key, m in zip(zip(row_values(df, cols), annotations(df, sids)), df[M].tolist()):
        acc[key] = acc.get(key, 0) + m
    items = [(k, m) for k, m in acc.items() if m != 0]
    return frame_from_rows(cols, [k[0] for k, _ in items], [m for _, m in items], sids,
                           [k[1] for k, _ in items])


# ---------- SQL ordering ----------
def _cmp_values(a: Any, b: Any) -> int:
    if a is None or b is None:
        return (a is not None) - (b is not None)  # NULL sorts first (ascending)
    if a == b:
        return 0
    try:
        return -1 if a < b else 1
    except TypeError:  # incomparable types: order by type name, deterministically
        return -1 if (type(a).__name__, str(a)) < (type(b).__name__, str(b)) else 1


def topk_sort_key(names: Sequence[str], order: Sequence[tuple[str, bool]]):
    """A sort key for (values, annots) entries implementing ir.TopK's total order.

    Order keys first (ASC: NULLS FIRST, DESC: NULLS LAST, Spark's defaults), then every other
    attribute ascending (NULLS FIRST), then the annotation (sorted fragment ids per sketched scan)
    ascending. The last criterion only separates copies of one tuple that come from different
    fragments; it makes the provenance of tied copies deterministic.
    """
    pos = {n: i for i, n in enumerate(names)}
    keyed = [(pos[n], asc) for n, asc in order]
    used = {p for p, _ in keyed}
    rest = [i for i in range(len(names)) if i not in used]

    def cmp(x: tuple, y: tuple) -> int:
        xv, yv = x[0], y[0]
        for p, asc in keyed:
            c = _cmp_values(xv[p], yv[p])
            if c:
                return c if asc else -c
        for p in rest:
            c = _cmp_values(xv[p], yv[p])
            if c:
                return c
        xa = tuple(tuple(sorted(s)) for s in x[1])
        ya = tuple(tuple(sorted(s)) for s in y[1])
        return (xa > ya) - (xa < ya)

    return functools.cmp_to_key(cmp)


class _Desc:
    """A value in descending position of a tuple sort key (strings, dates: no negation)."""
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v

    def __eq__(self, o):
        return self.v == o.v

    def __lt__(self, o):
        return o.v < self.v

    def __gt__(self, o):
        return self.v < o.v

    __hash__ = None


def topk_tuple_key(names: Sequence[str], order: Sequence[tuple[str, bool]]):
    """The order of `topk_sort_key` as a plain tuple key, which Python compares in C: several
    times cheaper than the comparison function. Values of incomparable types make it raise
    TypeError; callers then fall back to `topk_sort_key`, which orders them by type name."""
    pos = {n: i for i, n in enumerate(names)}
    keyed = [(pos[n], asc) for n, asc in order]
    used = {p for p, _ in keyed}
    rest = [i for i in range(len(names)) if i not in used]
    num = (int, float, bool)

    def key(x: tuple) -> tuple:
        xv = x[0]
        out = []
        for p, asc in keyed:
            v = xv[p]
            if asc:
                out.append((0,) if v is None else (1, v))
            else:
                out.append((1,) if v is None else (0, -v if type(v) in num else _Desc(v)))
        for p in rest:
            v = xv[p]
            out.append((0,) if v is None else (1, v))
        out.append(tuple(tuple(sorted(s)) for s in x[1]))
        return tuple(out)

    return key


# ---------- sizes ----------
def deep_size(obj: Any, _seen: set | None = None) -> int:
    """Approximate bytes held by a Python object graph (dicts, lists, sets, tuples, arrays)."""
    seen = _seen if _seen is not None else set()
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return obj.nbytes + 112
    if isinstance(obj, pd.DataFrame):
        return int(obj.memory_usage(deep=True).sum())
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        for k, v in obj.items():
            size += deep_size(k, seen) + deep_size(v, seen)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for v in obj:
            size += deep_size(v, seen)
    elif hasattr(obj, "__slots__") and not isinstance(obj, type):
        for a in obj.__slots__:
            if hasattr(obj, a):
                size += deep_size(getattr(obj, a), seen)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        size += deep_size(vars(obj), seen)
    return size


READY_DTYPES = {"int": "Int64", "float": "Float64", "dec": "Float64", "str": "string", "bool": "boolean",
          "date": "datetime64[ns]", "ts": "datetime64[ns]"}


def coerce_to(s: pd.Series, dtype: str) -> pd.Series:
    """Cast a base-table column to the nullable dtype of its Spark type (ints with NULLs often
    arrive as float64 from pandas/Spark, dates as datetime.date objects)."""

    try:
        k = kind_of(dtype)
    except Exception:  # types we cannot partition on (arrays, ...) are kept as they come
        return normalize_series(s)
    if READY_DTYPES.get(k) == str(s.dtype):  # already converted (`arrow_pandas.to_nullable_pandas`)
        return s
    if k == "int":
        if s.dtype == object:
            s = from_values(s.tolist(), s.index)
        if str(s.dtype) == "Int64":
            return s
        if s.dtype.kind in "iub" or str(s.dtype) in ("boolean",) or str(s.dtype).startswith(("Int", "UInt")):
            return s.astype("Int64")
        return s.astype("Float64").astype("Int64")
    if k in ("float", "dec"):
        if s.dtype == object:
            try:  # Decimal / float / None objects: vectorised; the per-value path is ~20x slower
                return s.astype("Float64")
            except (TypeError, ValueError):
                s = from_values(s.tolist(), s.index)
        return s.astype("Float64")
    if k == "str":
        return s.astype("string")
    if k == "bool":
        return s.astype("boolean")
    if k == "date":
        return pd.to_datetime(s.astype(object), errors="coerce").dt.normalize().astype("datetime64[ns]")
    if k == "ts":
        v = pd.to_datetime(s.astype(object), errors="coerce", utc=True)
        return v.dt.tz_localize(None).astype("datetime64[ns]")
    return normalize_series(s)
