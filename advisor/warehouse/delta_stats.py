"""Column statistics of a Delta table's version from its log: no Spark job.

Every ``add`` action of a Delta commit carries the file's statistics (record count, and per column
min, max and null count; delta-spark writes them for the first 32 columns by default).  The bounds
of a version are the min of the files' minima and the max of their maxima over the files the
snapshot lists; rows a deletion vector removed still count, so the bounds are a superset of the
live values, which keeps the Z3 safety proofs sound (they assume every value lies within them), as
the own store's derived bounds are.  Null counts likewise bound the live NULLs from above, so a
column with none in any file has none.  The log records no distinct counts: a version takes the
NDV stored for the nearest earlier version, and the first version of a table pays the one Spark job
of ``column_stats``.

Delta truncates timestamps in statistics to milliseconds, so a maximum is widened by 1 ms; a string
maximum it truncated ends in a character above every other, so it still bounds the values.  A
column some file has no statistics for, or whose bounds are NaN, is left to the Spark job.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from advisor.warehouse import delta_log
from advisor.warehouse.value_kinds import encode_value, kind_of

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog


def _bound(col: pa.ChunkedArray, kind: str, upper: bool):
    """The min (or max, ``upper``) of the files' bounds in the warehouse's value forms; NaN and
    time zones dealt with as the module says.  None when every file's bound is NULL (all NULL)."""
    v = (pc.max if upper else pc.min)(col).as_py()
    if v is None:
        return None
    if isinstance(v, float) and v != v:
        raise ValueError("NaN bound")
    if kind == "ts":
        if isinstance(v, dt.datetime) and v.tzinfo is not None:
            v = v.astimezone().replace(tzinfo=None)  # local wall time, as Spark's rows come to Python
        if upper:
            v = v + dt.timedelta(milliseconds=1)
    return v


def from_log(catalog: Catalog, table: str, version: int, columns: list[str]) -> dict | None:
    """{column: (min, max, ndv)} of ``columns`` for the Delta ``table`` at ``version`` from the log's
    file statistics, stored in ``colstats``; None (nothing stored) when no earlier version has
    statistics to take the NDV from, or some column's bounds cannot be had from the log."""
    prev = catalog.store.one("SELECT max(version) AS u FROM colstats WHERE table_name=? AND version<?",
                             (table, version))
    if prev is None or prev["u"] is None:
        return None
    ndv = {r["col"]: r["ndv"] for r in catalog.store.query(
        "SELECT col, ndv FROM colstats WHERE table_name=? AND version=?", (table, prev["u"]))}
    loc = catalog.source(table)["location"]
    types = dict(catalog.schema(table))
    try:
        stats = delta_log.file_stats(loc, version)
        spelled = delta_log.names(loc, version)
    except delta_log.Unreadable:
        return None
    names = set(stats.column_names)
    out, nulls = {}, {}
    try:
        records = stats.column("num_records")
        if records.null_count:
            return None
        for c in columns:
            own = spelled.get(c)
            need = [f"{k}.{own}" for k in ("min", "max", "null_count")]
            if own is None or c not in ndv or not all(n in names for n in need):
                return None
            mn, mx, nc = (stats.column(n) for n in need)
            if nc.null_count:
                return None
            # a file's bound is NULL only when all its values are: any other NULL is a missing statistic
            all_null = pc.equal(nc, records)
            if pc.any(pc.and_(pc.is_null(mn), pc.invert(all_null))).as_py() or \
                    pc.any(pc.and_(pc.is_null(mx), pc.invert(all_null))).as_py():
                return None
            kind = kind_of(types[c])
            out[c] = (_bound(mn, kind, False), _bound(mx, kind, True), ndv[c])
            nulls[c] = int(pc.sum(nc).as_py() or 0)
    except (ValueError, TypeError, pa.ArrowException):
        return None
    with catalog.store.tx() as conn:
        for c, (lo, hi, nd) in out.items():
            conn.execute("INSERT OR REPLACE INTO colstats VALUES (?,?,?,?,?,?,?)",
                         (table, version, c, json.dumps(encode_value(lo)), json.dumps(encode_value(hi)), nd,
                          nulls[c]))
    return out
