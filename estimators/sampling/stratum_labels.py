"""Spark's stratum labels, ``to_json(struct(strata...))``, computed with pyarrow on the driver.

A sample row's ``_stratum`` is the JSON object of its strata values as Spark's ``to_json`` writes it
(``sampling.stratified_sample``): fields in strata order, NULL fields left out, strings escaped as
Jackson escapes them, dates as ``yyyy-MM-dd`` and timestamps as ``yyyy-MM-dd'T'HH:mm:ss.SSS`` plus
the session zone's offset (``Z`` in UTC, the session's zone).  Samples drawn on the driver and deltas
labelled there must carry the same strings as Spark's, or a stratum would split in two.  Only the
types whose rendering is reproduced exactly are supported: integers, booleans, strings, dates,
UTC timestamps and decimals of scale <= 6 (``BigDecimal.toString`` switches to exponents below
that).  Floating point is not: Java's ``Double.toString`` is not Python's ``repr``.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

_NEEDS_ESCAPE = r'["\\\x00-\x1f]'
_NAMED = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


class LabelsNotReproduced(ValueError):
    """A strata column whose JSON rendering is not reproduced: draw with Spark instead."""


def supported(t) -> bool:
    """Whether labels of an Arrow type are rendered here exactly as Spark renders them."""
    return (pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_string(t)
            or pa.types.is_large_string(t) or pa.types.is_date32(t)
            or (pa.types.is_timestamp(t) and t.tz in (None, "UTC", "+00:00"))
            or (pa.types.is_decimal(t) and 0 <= t.scale <= 6))


def supported_spark_type(simple: str) -> bool:
    """``supported`` for a Spark ``simpleString`` type (the catalog's schema), checked before reading.
    Timestamps are rendered in UTC, the session zone ``advisor.engine.session`` sets."""
    simple = simple.strip().lower()
    if simple.startswith("decimal("):
        return 0 <= int(simple[8:-1].split(",")[1]) <= 6
    return simple in ("tinyint", "smallint", "int", "bigint", "boolean", "string", "date", "timestamp")


def _jackson(s: str) -> str:
    """A JSON string literal as Jackson writes it (uppercase hex for unnamed control characters)."""
    return '"' + re.sub(_NEEDS_ESCAPE, lambda m: _NAMED.get(m.group(), f"\\u{ord(m.group()):04X}"), s) + '"'


def _render(arr):
    """Each value of an Arrow array as its JSON text (NULL stays NULL)."""
    t = arr.type
    if pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t):
        return pc.cast(arr, pa.string())
    if pa.types.is_date32(t):
        return pc.strftime(arr, format='"%Y-%m-%d"')
    if pa.types.is_timestamp(t):
        ms = pc.cast(arr, pa.timestamp("ms", tz=None), safe=False)
        secs = pc.strftime(pc.cast(ms, pa.timestamp("s"), safe=False), format="%Y-%m-%dT%H:%M:%S")
        frac = np.mod(pc.cast(ms, pa.int64()).to_numpy(zero_copy_only=False), 1000)
        text = [None if s is None else f'"{s}.{int(f):03d}Z"' for s, f in zip(secs.to_pylist(), frac)]
        return pa.array(text, pa.string())
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        arr = pc.cast(arr, pa.string())
        odd = pc.fill_null(pc.match_substring_regex(arr, _NEEDS_ESCAPE), False).to_numpy(zero_copy_only=False)
        plain = pc.binary_join_element_wise('"', arr, '"', "")
        if not odd.any():
            return plain
        vals = plain.to_pylist()
        raw = arr.to_pylist()
        for i in np.flatnonzero(odd):
            vals[i] = _jackson(raw[i])
        return pa.array(vals, pa.string())
    raise LabelsNotReproduced(f"strata type {t} is not labelled on the driver")


DENSE_SLACK = 1 << 16  # combined codes up to 4n + this are numbered through a dense array
_CHUNK = 1 << 16  # rows a step when finding each code's first row (the positions stay in cache)


def _value_index(col, n: int) -> tuple[np.ndarray, int, bool]:
    """Per row an index of its value among ``k`` possible ones (NULL one of them), ``k``, and whether
    the indices number the values in order of first appearance.  Integers and dates of a narrow
    range are indexed by their offset from the minimum, with no hashing (a dictionary encoding of
    SF1 lineitem's 6M ``l_suppkey`` values took ~0.3 s); anything else by a dictionary encoding."""

    t = col.type
    narrow = pa.types.is_signed_integer(t) or t in (pa.uint8(), pa.uint16(), pa.uint32()) or pa.types.is_date32(t)
    if narrow and n and col.null_count < n:  # chunk by chunk: no combined copy of the column
        ints = (col.cast(pa.int32()) if pa.types.is_date32(t) else col).cast(pa.int64())
        mm = pc.min_max(ints)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        if hi - lo < 4 * n + DENSE_SLACK:
            idx = np.asarray(pc.fill_null(ints, hi + 1).to_numpy(), dtype=np.int64)
            idx = idx - lo if not idx.flags.writeable else np.subtract(idx, lo, out=idx)
            return idx, hi - lo + 2, False
    if isinstance(col, pa.ChunkedArray):  # one dictionary for all chunks
        col = col.combine_chunks()
    enc = pc.dictionary_encode(col, null_encoding="encode")
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), max(len(enc.dictionary), 1), True


def group_codes(table, strata: list) -> tuple[np.ndarray, np.ndarray]:
    """Per row the index of its stratum (0..G-1, in order of first appearance) and, per stratum, the
    row where it first appears.  NULL is a value of its own, as in Spark's grouping."""

    n = table.num_rows
    gid = None
    card, ordered = 1, len(strata) == 1
    for c in strata:
        idx, k, in_order = _value_index(table.column(c), n)
        ordered &= in_order
        if gid is None:
            gid = idx if idx.flags.writeable else idx.copy()
        else:
            if card * k >= 2 ** 62:
                gid, u = pd.factorize(gid)
                card = len(u)
            gid *= k
            gid += idx
        card *= k
    if gid is None:
        gid = np.zeros(n, dtype=np.int64)
    if ordered:
        # one dictionary-encoded column: its indices already number the values in order of first
        # appearance (NULL included), which is what factorize would return
        codes, ng = gid, (card if n else 0)
    elif n and card <= 4 * n + DENSE_SLACK:
        # few possible combinations: number them in order of first appearance through an array
        # indexed by the combined code, which is what factorize returns, without its hash table
        # (TPC-H SF1, two stratum columns: ~0.1 s less a draw)
        at = np.full(card, n, dtype=np.int64)
        for hi in range(n, 0, -_CHUNK):  # chunks from the last, rows within one from the last:
            lo = max(hi - _CHUNK, 0)     # numpy keeps the last write per code, its first row
            at[gid[lo:hi][::-1]] = np.arange(hi - 1, lo - 1, -1, dtype=np.int64)
        first = np.sort(at[at < n])
        rank = np.empty(card, dtype=np.int64)
        rank[gid[first]] = np.arange(len(first), dtype=np.int64)
        return rank[gid], first
    else:
        codes, uniq = pd.factorize(gid) if n else (np.zeros(0, np.int64), [])
        ng = len(uniq)
    first = np.empty(ng, dtype=np.int64)
    back = np.arange(n - 1, -1, -1, dtype=np.int64)
    first[codes[back]] = back  # numpy keeps the last write per code: its first row
    return codes.astype(np.int64), first


def labels(table, strata: list, rows: np.ndarray) -> list:
    """The ``_stratum`` label of the given rows of ``table`` (Spark's ``to_json(struct(strata))``)."""
    take = pa.array(rows, pa.int64())
    parts = []
    for c in strata:
        col = table.column(c)
        if not supported(col.type):
            raise LabelsNotReproduced(f"column {c!r} of type {col.type} is not labelled on the driver")
        vals = _render(pc.take(col, take))
        if isinstance(vals, pa.ChunkedArray):
            vals = vals.combine_chunks()
        # a NULL field is left out; every other one ends in a comma, and the last comma is cut below
        # (a value's text never ends in a comma).  Not ``null_handling="skip"``: pyarrow 22 drops
        # the rows whose inputs are all NULL from its output.
        parts.append(pc.fill_null(pc.binary_join_element_wise(json.dumps(c) + ":", vals, ",", ""), ""))
    if not parts:
        return ["{}"] * len(rows)
    body = pc.utf8_rtrim(pc.binary_join_element_wise(*parts, ""), characters=",")
    return pc.binary_join_element_wise("{", body, "}", "").to_pylist()
