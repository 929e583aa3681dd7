"""Fragment assignment in pandas: the driver-side twin of `advisor.partition.range_partition.assign_column`.

Fragment id = `searchsorted(boundaries, value, side='right')`, i.e. range i is
[b_i, b_{i+1}) with ids 0..m, and NULL (or NaN) goes to `part.null_id` = m+1. Boundaries are
decoded with `advisor.warehouse.value_kinds.decode_value`; dates/timestamps are compared as datetime64,
numbers as numbers, strings and anything else by Python comparison (object searchsorted).
"""

from __future__ import annotations

import datetime as dt
import decimal

import numpy as np
import pandas as pd

from advisor.partition.range_partition import RangePartition
from advisor.warehouse.value_kinds import decode_value, kind_of
from advisor.caches import memoize


def _bounds_array(part: RangePartition, values: pd.Series):
    kind = kind_of(part.dtype)
    if pd.api.types.is_datetime64_any_dtype(values.dtype) or kind in ("date", "ts"):
        how = "dt"
    elif kind in ("int", "bool") and (pd.api.types.is_integer_dtype(values.dtype)
                                      or pd.api.types.is_bool_dtype(values.dtype)):
        how = "int"
    elif kind in ("int", "float", "dec", "bool"):
        how = "float"
    else:
        how = "obj"
    return _decoded(part.dtype, tuple(part.boundaries), how)


@memoize("decoded boundaries for pandas", maxsize=64)
def _decoded(dtype: str, boundaries: tuple, how: str):
    """Boundaries decoded once per (type, boundaries, comparison); maintenance assigns fragments
    to every batch with the same partition, and decoding 1,000 boundaries costs milliseconds."""
    bounds = [decode_value(b, dtype) for b in boundaries]
    if how == "dt":
        arr = np.array([np.datetime64(pd.Timestamp(b), "ns") for b in bounds], dtype="datetime64[ns]")
    elif how == "int" and all(isinstance(b, (int, bool)) for b in bounds):
        arr = np.array([int(b) for b in bounds], dtype=np.int64)
    elif how in ("int", "float"):
        arr, how = np.array([float(b) for b in bounds], dtype=np.float64), "float"
    else:
        arr = np.array(bounds, dtype=object)
    arr.setflags(write=False)
    return arr, how


def assign(values: pd.Series, part: RangePartition) -> np.ndarray:
    """Fragment id (int64) of every value of `values` under partition `part`."""
    values = pd.Series(values)
    n = len(values)
    out = np.full(n, part.null_id, dtype=np.int64)
    if n == 0:
        return out
    if str(values.dtype) == "Int64":  # the common key column: no boolean indexing of a Series
        arr, how = _bounds_array(part, values)
        if how == "int":
            isnull = values.isna().to_numpy(dtype=bool)
            ids = _search(arr, values.to_numpy(dtype=np.int64, na_value=0)) if len(arr) \
                else np.zeros(n, dtype=np.int64)
            return np.where(isnull, out, ids)
    isnull = values.isna().to_numpy(dtype=bool)
    if pd.api.types.is_float_dtype(values.dtype):  # NaN goes with NULL, as Spark's Bucketizer puts it
        isnull |= np.isnan(values.to_numpy(dtype=np.float64, na_value=np.nan))
    ok = ~isnull
    if not ok.any():
        return out
    arr, how = _bounds_array(part, values)
    vals = values[ok]
    if how == "dt" and isinstance(vals.dtype, np.dtype) and vals.dtype.kind == "M":
        v = vals.to_numpy().astype("datetime64[ns]")  # tz-naive datetimes: no per-value objects
    elif how == "dt":
        v = pd.to_datetime(vals.astype(object).map(_to_ts)).to_numpy(dtype="datetime64[ns]")
    elif how == "int":
        v = vals.astype("int64").to_numpy()
    elif how == "float" and pd.api.types.is_numeric_dtype(vals.dtype) and not pd.api.types.is_bool_dtype(vals.dtype):
        v = vals.to_numpy(dtype=np.float64)  # ints/floats (decimals arrive as float64): float(x) each
    elif how == "float":
        v = vals.astype(object).map(float).to_numpy(dtype=np.float64)
    else:
        v = vals.to_numpy(dtype=object)
    out[ok] = _search(arr, v) if len(arr) else 0
    return out


_DAY_NS = 86_400 * 10 ** 9


def _search(arr: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``np.searchsorted(arr, v, side="right")``.  Integers, or dates as whole days of
    ``datetime64[ns]``, of a range narrower than ``v`` is long are looked up in a table of the
    range's fragment ids instead: one gather in place of ~10 random probes a value (16 ms against
    2 ms for 300k sample values of TPC-H's ``l_suppkey`` or ``l_shipdate``); the same ids."""
    if len(v) >= 4096 and v.dtype.kind in "iM" and v.dtype.itemsize == 8 and (v.dtype.kind == "i" or
                                                                              v.dtype == arr.dtype):
        iv = v.view(np.int64)
        step = 1 if v.dtype.kind == "i" else _DAY_NS
        if step == 1 or not (iv % step).any():
            lo, hi = int(iv.min()), int(iv.max())
            if (hi - lo) // step < len(v):
                # not np.arange(lo, hi + 1, step): its length is a float division, one short here
                grid = lo + step * np.arange((hi - lo) // step + 1, dtype=np.int64)
                table = np.searchsorted(arr, grid.view(v.dtype), side="right")
                return table[(iv - lo) // step]
    return np.searchsorted(arr, v, side="right")


def _to_ts(v):
    if isinstance(v, (dt.date, dt.datetime)) and not isinstance(v, pd.Timestamp):
        return pd.Timestamp(v)
    if isinstance(v, decimal.Decimal):
        return float(v)
    return v
