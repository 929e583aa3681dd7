"""Column value kinds and their encodings: the type family of a Spark column, JSON-able boundary
values and back, the order-preserving double Spark's Bucketizer compares, and SQL literals.

Shared by range partitions, layouts, statistics and sketch filters, which all store or print values
of arbitrary column types.
"""

import datetime as dt
import decimal
from typing import Any

from advisor.errors import BadInput


def kind_of(dtype: str) -> str:
    """Coarse family of a Spark simpleString type: int, dec, float, date, ts, str (or unsupported).

    >>> [kind_of(t) for t in ("bigint", "decimal(12,2)", "double", "date", "timestamp", "string")]
    ['int', 'dec', 'float', 'date', 'ts', 'str']"""
    d = dtype.lower()
    if d in ("tinyint", "smallint", "int", "bigint", "byte", "short", "integer", "long"):
        return "int"
    if d.startswith("decimal"):
        return "dec"
    if d in ("float", "double", "real"):
        return "float"
    if d == "date":
        return "date"
    if d.startswith("timestamp"):
        return "ts"
    if d == "string" or d.startswith("varchar") or d.startswith("char"):
        return "str"
    if d == "boolean":
        return "bool"
    raise BadInput(f"cannot range-partition a column of type {dtype}")


def decimal_precision(dtype: str) -> int:
    inner = dtype[dtype.index("(") + 1: dtype.index(")")] if "(" in dtype else "10,0"
    return int(inner.split(",")[0])


def encode_value(v: Any) -> Any:
    """Python value -> JSON-able value (dates/timestamps as ISO strings, decimals as strings)."""
    if v is None:
        return None
    if isinstance(v, dt.datetime):
        return v.isoformat()
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, bool):
        return int(v)
    return v


def decode_value(v: Any, dtype: str) -> Any:
    if v is None:
        return None
    k = kind_of(dtype)
    if k == "date":
        return dt.date.fromisoformat(v)
    if k == "ts":
        return dt.datetime.fromisoformat(v)
    if k == "dec":
        return decimal.Decimal(v)
    return v


def to_double(v: Any, dtype: str) -> float:
    """The order-preserving double used by Bucketizer for int/dec/float/date/ts values."""
    k = kind_of(dtype)
    v = decode_value(v, dtype)
    if k == "date":
        return float((v - dt.date(1970, 1, 1)).days)
    if k == "ts":
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.timezone.utc)
        delta = v - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
        return float((delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds)
    return float(v)


def uses_bucketizer(dtype: str) -> bool:
    k = kind_of(dtype)
    return k in ("int", "float", "date", "ts", "bool") or (k == "dec" and decimal_precision(dtype) <= 15)


def sql_literal(v: Any, dtype: str) -> str:
    """A Spark SQL literal for a boundary value of type dtype."""
    k = kind_of(dtype)
    v = decode_value(v, dtype)
    if k == "date":
        return f"DATE '{v.isoformat()}'"
    if k == "ts":
        return f"TIMESTAMP '{v.isoformat(sep=' ')}'"
    if k == "str":
        return "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'"
    if k == "dec":
        return f"CAST('{v}' AS {dtype})"
    if k == "float":
        return f"CAST({float(v)!r} AS DOUBLE)"
    if k == "bool":
        return "true" if v else "false"
    return str(int(v))
