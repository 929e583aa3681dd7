"""The Parquet page index of a file as stored: per page of one column, its rows and min / max.

Spark 4's Parquet reader (parquet-mr's column-index filter) skips pages whose column-index bounds
miss a filter, and reads the other columns only for the row ranges of the pages kept.  A table
whose files keep some attribute in order (TPC-H written by ``l_orderkey``, ingest by time) is
therefore skippable on that attribute page by page with no layout at all, while its row groups
(often one per file) span the whole key range.  pyarrow reads no page index, so this module
decodes the footer (Thrift compact protocol) and the column and offset indexes it points to: a
few kilobytes per file, no data pages, no Spark job.  Read from the footers rather than measured
by a probe scan because the footers say exactly what the reader will prune, for every sketch at
once, at the cost of reading bytes already cached by the file system.

>>> _varint(b"\\x96\\x01", 0)
(150, 2)
>>> _zigzag(3), _zigzag(4)
(-2, 2)
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from dataclasses import dataclass
from typing import Any, Optional

# Thrift compact protocol types
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)
# Parquet physical types
_BOOLEAN, _INT32, _INT64, _INT96, _FLOAT, _DOUBLE_T, _BYTE_ARRAY, _FLBA = range(8)
_EPOCH = dt.date(1970, 1, 1)
_UTC = dt.timezone.utc


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, pos
        shift += 7


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _value(buf: bytes, pos: int, t: int) -> tuple[Any, int]:
    """One value of compact type ``t`` at ``pos``: ints, bytes, lists and structs ({field id: value})."""
    if t in (_I16, _I32, _I64):
        n, pos = _varint(buf, pos)
        return _zigzag(n), pos
    if t == _BINARY:
        n, pos = _varint(buf, pos)
        return bytes(buf[pos:pos + n]), pos + n
    if t == _STRUCT:
        return _struct(buf, pos)
    if t in (_LIST, _SET):
        head = buf[pos]
        pos += 1
        size, et = head >> 4, head & 0x0F
        if size == 15:
            size, pos = _varint(buf, pos)
        out = []
        for _ in range(size):
            if et in (_TRUE, _FALSE):  # booleans in a list are one byte each
                out.append(buf[pos] == 1)
                pos += 1
            else:
                v, pos = _value(buf, pos, et)
                out.append(v)
        return out, pos
    if t == _BYTE:
        return struct.unpack_from("b", buf, pos)[0], pos + 1
    if t == _DOUBLE:
        return struct.unpack_from("<d", buf, pos)[0], pos + 8
    if t == _MAP:
        size, pos = _varint(buf, pos)
        if size == 0:
            return {}, pos
        kt, vt = buf[pos] >> 4, buf[pos] & 0x0F
        pos += 1
        out = {}
        for _ in range(size):
            k, pos = _value(buf, pos, kt)
            out[k], pos = _value(buf, pos, vt)
        return out, pos
    raise ValueError(f"unknown thrift compact type {t}")


def _struct(buf: bytes, pos: int) -> tuple[dict, int]:
    out: dict = {}
    last = 0
    while True:
        head = buf[pos]
        pos += 1
        t = head & 0x0F
        if t == _STOP:
            return out, pos
        delta = head >> 4
        if delta:
            fid = last + delta
        else:
            n, pos = _varint(buf, pos)
            fid = _zigzag(n)
        last = fid
        if t in (_TRUE, _FALSE):
            out[fid] = t == _TRUE
        else:
            out[fid], pos = _value(buf, pos, t)


def decode_struct(buf: bytes) -> dict:
    """A Thrift compact struct as {field id: value} (nested structs alike).

    >>> decode_struct(bytes([0x15, 0x04, 0x18, 0x02]) + b"hi" + bytes([0x00]))
    {1: 2, 2: b'hi'}"""
    return _struct(buf, 0)[0]


@dataclass(frozen=True)
class ColumnType:
    """What decoding a column's statistics needs: physical type and logical kind (``int``,
    ``date``, ``ts``, ``dec``, ``float``, ``str``, ``bool``, ``raw``) with a decimal's scale and
    a timestamp's units per second."""
    physical: int
    kind: str
    scale: int = 0
    per_second: int = 1_000_000


def _column_type(el: dict) -> ColumnType:
    """``ColumnType`` of a SchemaElement (field 1 type, 6 converted type, 7 scale, 10 logical type)."""
    phys, conv, logical = el.get(1), el.get(6), el.get(10) or {}
    if 5 in logical or conv == 5:
        scale = (logical.get(5) or {}).get(1, el.get(7, 0)) if 5 in logical else el.get(7, 0)
        return ColumnType(phys, "dec", int(scale or 0))
    if 6 in logical or conv == 6:
        return ColumnType(phys, "date")
    if 8 in logical or conv in (9, 10):
        unit = (logical.get(8) or {}).get(2, {}) if 8 in logical else ({1: {}} if conv == 9 else {2: {}})
        per = 1_000 if 1 in unit else 1_000_000_000 if 3 in unit else 1_000_000
        return ColumnType(phys, "ts", per_second=per)
    if phys in (_INT32, _INT64):
        return ColumnType(phys, "int")
    if phys in (_FLOAT, _DOUBLE_T):
        return ColumnType(phys, "float")
    if phys == _BOOLEAN:
        return ColumnType(phys, "bool")
    if phys == _BYTE_ARRAY and (1 in logical or conv == 0):
        return ColumnType(phys, "str")
    return ColumnType(phys, "raw")


def decode_stat(raw: bytes, ct: ColumnType) -> Any:
    """A plain-encoded min or max as the Python value pyarrow's statistics give for that type.

    >>> decode_stat((19000).to_bytes(4, "little"), ColumnType(_INT32, "date"))
    datetime.date(2022, 1, 8)
    >>> decode_stat((12345).to_bytes(8, "little", signed=True), ColumnType(_INT64, "dec", 2))
    Decimal('123.45')"""
    p = ct.physical
    if p == _INT32:
        n = struct.unpack("<i", raw[:4])[0]
    elif p == _INT64:
        n = struct.unpack("<q", raw[:8])[0]
    elif p == _FLBA:  # decimals as big-endian two's complement
        n = int.from_bytes(raw, "big", signed=True)
    elif p == _FLOAT:
        return struct.unpack("<f", raw[:4])[0]
    elif p == _DOUBLE_T:
        return struct.unpack("<d", raw[:8])[0]
    elif p == _BOOLEAN:
        return bool(raw[0])
    elif p == _BYTE_ARRAY:
        if ct.kind == "dec":
            n = int.from_bytes(raw, "big", signed=True)
        else:
            return raw.decode("utf-8", "replace") if ct.kind == "str" else raw
    else:
        return None  # INT96 carries no order-preserving statistics
    if ct.kind == "dec":
        return decimal.Decimal(n).scaleb(-ct.scale)
    if ct.kind == "date":
        return _EPOCH + dt.timedelta(days=n)
    if ct.kind == "ts":
        sec, frac = divmod(n, ct.per_second)
        return dt.datetime.fromtimestamp(sec, _UTC) + dt.timedelta(microseconds=frac * 1_000_000 // ct.per_second)
    return n


@dataclass(frozen=True)
class PageStats:
    """The pages of one column chunk (a row group's column): rows, NULLs and bounds per page
    (``lo``/``hi`` None for an all-NULL page)."""
    rows: tuple
    nulls: tuple
    lo: tuple
    hi: tuple


def _leaf_types(schema: list) -> dict:
    """Dotted leaf path -> ``ColumnType`` for the schema elements of a FileMetaData."""
    out: dict = {}

    def walk(i: int, prefix: tuple) -> int:
        el = schema[i]
        children = el.get(5, 0)
        name = el.get(4, b"").decode()
        path = prefix + (name,) if i else prefix
        i += 1
        if not children:
            out[".".join(path)] = _column_type(el)
            return i
        for _ in range(children):
            i = walk(i, path)
        return i

    if schema:
        walk(0, ())
    return out


def footer(read_tail, size: int) -> dict:
    """The FileMetaData of a Parquet file of ``size`` bytes; ``read_tail(offset, length)`` reads bytes."""
    tail = read_tail(size - 8, 8)
    if tail[4:] != b"PAR1":
        raise ValueError("not a Parquet file")
    n = int.from_bytes(tail[:4], "little")
    return decode_struct(read_tail(size - 8 - n, n))


def column_pages(read_at, size: int, column: str) -> Optional[list[PageStats]]:
    """Per row group, the pages of ``column`` (dotted path) with their bounds, from the file's
    column and offset indexes; None when the file has no page index for it (or no such column).
    ``read_at(offset, length)`` reads bytes of the file."""
    meta = footer(read_at, size)
    ctype = _leaf_types(meta.get(2, [])).get(column)
    if ctype is None:
        return None
    out = []
    for rg in meta.get(4, []):
        rg_rows = rg.get(3, 0)
        chunk = next((c for c in rg.get(1, []) if ".".join(p.decode() for p in c.get(3, {}).get(3, [])) == column), None)
        if chunk is None or 6 not in chunk or 4 not in chunk:
            return None
        ci = decode_struct(read_at(chunk[6], chunk[7]))
        oi = decode_struct(read_at(chunk[4], chunk[5]))
        firsts = [loc.get(3, 0) for loc in oi.get(1, [])]
        if not firsts or len(firsts) != len(ci.get(1, [])):
            return None
        rows = tuple(b - a for a, b in zip(firsts, firsts[1:] + [rg_rows]))
        null_pages = ci.get(1, [])
        counts = ci.get(5) or [None] * len(rows)
        lo = tuple(None if np_ else decode_stat(v, ctype) for np_, v in zip(null_pages, ci.get(2, [])))
        hi = tuple(None if np_ else decode_stat(v, ctype) for np_, v in zip(null_pages, ci.get(3, [])))
        # a page without a NULL count may hold NULLs: counted as one, so a NULL fragment keeps it
        nulls = tuple(r if np_ else (1 if c is None else int(c)) for r, np_, c in zip(rows, null_pages, counts))
        out.append(PageStats(rows, nulls, lo, hi))
    return out
