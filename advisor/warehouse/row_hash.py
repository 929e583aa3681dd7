"""Spark's ``xxhash64`` of key columns, computed with numpy on the driver.

A Delta table imported with a declared key gets its row id (``_rid``) from Spark as
``xxhash64(key...)`` (``delta_source.snapshot``).  Samples drawn on the driver from the files the
log lists (``delta_source.read_arrow``) need the very same ids, since a sample drawn by Spark is
later widened with columns read on the driver and matched by ``_rid``.  Spark's hash of integers,
dates and decimals of up to 18 digits is XXH64 of the value's 4 or 8 bytes with the previous
column's hash as seed (42 for the first; a NULL leaves it unchanged), a handful of 64-bit
multiplications and rotations that numpy does a column at a time; other key types are ``supports``
= False and their row ids come from Spark.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SEED = 42
P1 = np.uint64(0x9E3779B185EBCA87)
P2 = np.uint64(0xC2B2AE3D27D4EB4F)
P3 = np.uint64(0x165667B19E3779F9)
P4 = np.uint64(0x85EBCA77C2B2AE63)
P5 = np.uint64(0x27D4EB2F165667C5)
_INT4 = ("int8", "int16", "int32", "date32[day]", "bool")
_INT8 = ("int64",)


def _four_bytes(t: str) -> bool | None:
    """Whether Spark hashes a value of pyarrow type ``t`` as 4 bytes (True), as 8 (False), or
    neither (None: not reproduced here)."""
    if t in _INT4:
        return True
    if t in _INT8:
        return False
    if t.startswith("decimal128(") and int(t[len("decimal128("):].split(",")[0]) <= 18:
        return False
    return None


def supports(key: list | None, types: dict[str, str]) -> bool:
    """Whether ``xxhash64`` reproduces Spark's hash of the ``key`` columns (``types``: column ->
    pyarrow type string)."""
    return bool(key) and all(k in types and _four_bytes(types[k]) is not None for k in key)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _fmix(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(33))
    h = h * P2
    h = h ^ (h >> np.uint64(29))
    h = h * P3
    return h ^ (h >> np.uint64(32))


def _values(col: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(the values as uint64 bit patterns, the non-NULL mask) of an integer, date, boolean or
    DECIMAL column (decimals by their unscaled 64-bit integer)."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    t = arr.type
    if pa.types.is_decimal(t):
        words = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=2 * (arr.offset + len(arr)))[2 * arr.offset:]
        ints = words[0::2].copy()
    elif pa.types.is_date32(t):
        ints = arr.view(pa.int32()).fill_null(0).to_numpy().astype(np.int64)
    elif pa.types.is_boolean(t):
        ints = pc.cast(arr, pa.int32()).fill_null(0).to_numpy().astype(np.int64)
    else:
        ints = arr.fill_null(0).to_numpy().astype(np.int64)
    return ints.view(np.uint64), valid


def xxhash64(columns: list) -> pa.Array:
    """Spark's ``xxhash64(c1, c2, ...)`` of equal-length columns, as an int64 array."""
    n = len(columns[0]) if columns else 0
    h = np.full(n, SEED, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for col in columns:
            four = _four_bytes(str(col.type))
            if four is None:
                raise TypeError(f"xxhash64 of {col.type} is not reproduced on the driver")
            v, valid = _values(col)
            if four:
                x = h + P5 + np.uint64(4)
                x = x ^ ((v & np.uint64(0xFFFFFFFF)) * P1)
                x = _rotl(x, 23) * P2 + P3
            else:
                x = h + P5 + np.uint64(8)
                x = x ^ (_rotl(v * P2, 31) * P1)
                x = _rotl(x, 27) * P1 + P4
            h = np.where(valid, _fmix(x), h)
    return pa.array(h.view(np.int64), type=pa.int64())
