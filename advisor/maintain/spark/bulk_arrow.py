"""Bulk initialisation of the lowest aggregation on the driver, with pyarrow: no Spark job.

``bulk_init`` computes the state that matters (per group the row count, per aggregate the non-NULL
count and sum, per sketched scan the rows in each fragment) with one Spark aggregation whose answer
has a row per (group, fragment).  Where that aggregation reads one table of at most
``DRIVER_MAX_ROWS`` rows through filters and projections of plain columns, the same numbers come
from reading the columns with pyarrow and grouping them on the driver: at TPC-H SF1, ``GROUP BY
l_orderkey`` with ``sum(l_quantity)`` (1.5M groups) read in 0.27 s and grouped in 0.35 s, where the
Spark job and the transfer of its 1.5M rows took 2.5-4.7 s.  Filters and the aggregates'
arithmetic are evaluated exactly by ``exact_arrow`` (Q3's revenue sums under its ship-date filter:
1.2-1.4 s against 3.3-4.8 s).  Keys are converted as the maintenance engine converts batch rows
(``to_nullable_pandas``), so later batches find their groups.

Sums are exact as the Spark path's: DECIMAL arguments of at most 18 digits (a sum of up to 10M of
them fits arrow's 38 digits) arrive as their unscaled integers, as do +, - and * over them;
integer arguments only when no sum can pass 2**63; floating-point arguments, timestamps and float
keys are left to Spark (summation order, time zones and NaN grouping differ).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from advisor.maintain import exact_arrow
from advisor.maintain.base_side import OLD
from advisor.maintain.engine import rename_columns
from advisor.maintain.frames import normalize_frame
from advisor.maintain.operators.aggregate_arrays import PlainAggOp
from advisor.partition.assign_pandas import assign
from advisor.plan import ir
from advisor.plan.value_lineage import groups_by_value
from advisor.warehouse.arrow_to_pandas import to_nullable_pandas
from advisor.warehouse.value_kinds import kind_of

DRIVER_MAX_ROWS = 10_000_000   # as ``range_partition`` partitions columns on the driver
_DEC_DIGITS = 18               # 10M sums of 18-digit decimals stay within decimal128's 38 digits


def scan_chain(node: ir.Node) -> Optional[tuple[ir.Scan, dict[str, str], list[exp.Expression]]]:
    """(the scan, internal name -> base column, the filters' conditions over base columns) when
    ``node`` is one table's scan under filters and projections of plain columns; else None."""
    chain = []
    while isinstance(node, (ir.Select, ir.Project)):
        chain.append(node)
        node = node.child
    if not isinstance(node, ir.Scan):
        return None
    names = {c.name: c.source for c in node.cols}
    conds = []
    for m in reversed(chain):
        if isinstance(m, ir.Select):
            cond = _renamed(m.cond, names)
            if cond is None:
                return None
            conds.append(cond)
            continue
        out = {}
        for e, c in m.items:
            if not isinstance(e, exp.Column) or e.name not in names:
                return None
            out[c.name] = names[e.name]
        names = out
    return node, names, conds


def _renamed(e: exp.Expression, names: dict[str, str]) -> Optional[exp.Expression]:
    """``e`` with its columns named by ``names`` (None when one is not there)."""
    if any(c.name not in names for c in e.find_all(exp.Column)):
        return None
    return rename_columns(e, names)


_INTS = ("tinyint", "smallint", "int", "bigint")


def shape_on_driver(node: Optional[ir.Node]) -> bool:
    """The plan-level half of ``initialise_on_driver``'s test (no data read): ``node``, a lowest
    aggregation, has keys, reads one table, and aggregates plain columns with COUNT, or
    SUM/AVG of integers or decimals of at most 18 digits, or of +, - and * over them
    (``exact_arrow``), under filters ``exact_arrow`` evaluates; no key is a float or a timestamp.  What
    prices an initialisation before it runs (``state_rental.predict_init``).

    >>> from advisor.plan.parse import parse_sql
    >>> from advisor.maintain.spark.bulk_init import lowest_aggregate
    >>> schema = {"t": [("k", "int"), ("d", "decimal(15,2)"), ("x", "double")]}
    >>> q = lambda sql: lowest_aggregate(parse_sql(sql, schema.get).root)
    >>> shape_on_driver(q("SELECT k, sum(d) AS s FROM t GROUP BY k HAVING sum(d) > 5"))
    True
    >>> shape_on_driver(q("SELECT k, sum(x) AS s FROM t GROUP BY k HAVING sum(x) > 5"))
    False
    >>> shape_on_driver(q("SELECT k, count(*) AS n FROM t WHERE d > 1 GROUP BY k HAVING count(*) > 5"))
    True
    >>> shape_on_driver(q("SELECT k, sum(d * (1 - d)) AS s FROM t GROUP BY k ORDER BY s DESC LIMIT 3"))
    True
    >>> shape_on_driver(q("SELECT k, count(*) AS n FROM t WHERE x > 1 GROUP BY k HAVING count(*) > 5"))
    False
    """
    if not isinstance(node, ir.Aggregate) or not node.keys:
        return False
    got = scan_chain(node.child)
    if got is None:
        return False
    scan, src, conds = got
    types = _base_types(scan)
    if any(not exact_arrow.supported(c, types, condition=True) for c in conds):
        return False
    dtype = {name: types[base] for name, base in src.items()}
    if any(k not in src or dtype[k].startswith(("float", "double", "timestamp")) for k in node.keys):
        return False
    for a in node.aggs:
        if a.func not in ("count", "sum", "avg") or a.distinct:
            return False
        if a.arg is None:
            continue
        if not isinstance(a.arg, exp.Column):  # an expression: exact integer or DECIMAL arithmetic
            arg = _renamed(a.arg, src)
            if arg is None or not exact_arrow.supported(arg, types, condition=False):
                return False
            continue
        if a.arg.name not in src:
            return False
        t = dtype[a.arg.name]
        if a.func != "count" and not (t in _INTS or (t.startswith("decimal") and _digits(t) <= _DEC_DIGITS)):
            return False
    return True


def _base_types(scan: ir.Scan) -> dict[str, str]:
    """Base column -> its type (lower case) of the scanned table."""
    return {c.source: c.dtype.lower() for c in scan.cols}


def _digits(dtype: str) -> int:
    """The precision of a ``decimal(p,s)`` type string."""
    inner = dtype[dtype.index("(") + 1:dtype.index(")")] if "(" in dtype else "10,0"
    return int(inner.split(",")[0])


def _key_ok(t: pa.DataType) -> bool:
    return (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
            or pa.types.is_date32(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t))


def _sum_ok(op: PlainAggOp, j: int, col, rows: int, computed: bool = False) -> bool:
    """A sum of ``col`` computed here is exact and in the form the operator keeps.  A
    ``computed`` DECIMAL column (``_computed``: 64-bit unscaled values) sums exactly whatever its
    declared precision."""
    t = col.type
    if pa.types.is_decimal(t):
        return j in op.dec and (computed or t.precision <= _DEC_DIGITS) and t.scale == op.dec[j][1]
    if pa.types.is_integer(t) and j not in op.dec:
        mm = pc.min_max(col)
        most = max(abs(mm["min"].as_py() or 0), abs(mm["max"].as_py() or 0))
        return most * max(rows, 1) < 2 ** 63
    return False


def _computed(e: exp.Expression, tab: pa.Table, types: dict) -> pa.Array:
    """An aggregate's argument expression per row (``exact_arrow.number``): DECIMAL results as
    decimal128 of their scale, integer ones as int64; NULL where an operand is."""
    num = exact_arrow.number(e, tab, types)
    ints = pa.array(num.values, type=pa.int64(), mask=~num.valid)
    return ints.cast(pa.decimal128(38, 0)).view(pa.decimal128(38, num.scale)) if num.decimal else ints


def unscaled_ints(arr: pa.Array) -> np.ndarray:
    """A decimal128 array's unscaled integers as an object array of exact Python ints (None for
    NULL): the 64-bit ones straight from the buffer, the rest from both words.

    >>> import decimal
    >>> a = pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("-1e17")], pa.decimal128(38, 2))
    >>> unscaled_ints(a).tolist()
    [125, None, -10000000000000000000]
    """
    n = len(arr)
    out = np.empty(n, dtype=object)
    if n == 0:
        return out
    words = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=2 * (arr.offset + n))[2 * arr.offset:]
    lo, hi = words[0::2], words[1::2]
    fits = hi == (lo >> 63)
    out[:] = lo.tolist()
    for i in np.flatnonzero(~fits):
        out[i] = (int(hi[i]) << 64) | (int(lo[i]) & 0xFFFFFFFFFFFFFFFF)
    if arr.null_count:
        out[np.asarray(arr.is_null())] = None
    return out


def _engine_values(col: pa.ChunkedArray) -> pd.Series:
    """A column in the maintenance engine's value forms, as batch rows arrive in it."""
    return normalize_frame(to_nullable_pandas(pa.table({"v": col})))["v"]


def initialise_on_driver(op: PlainAggOp, base) -> bool:
    """Load ``op`` (a fresh lowest aggregation) from its table read on the driver (``base``: a
    ``SparkBase`` at OLD); False, with nothing loaded, where the plan or the types need Spark."""
    node = op.node
    if not shape_on_driver(node):
        return False
    scan, src, conds = scan_chain(node.child)
    types = _base_types(scan)
    catalog, version = base.catalog, base.versions[OLD][scan.table]
    rows = catalog.version(scan.table, version).rows
    if rows > DRIVER_MAX_ROWS:
        return False
    args = {j: _renamed(a.arg, src) for j, a in enumerate(op.aggs) if a.arg is not None}
    sketched = {sid: base.sketched[sid] for sid in op.sids if sid in base.sketched}
    if len(sketched) != len(op.sids) or any(sid != scan.scan_id for sid in sketched):
        return False
    attrs = {sid: scan.col(name).source for sid, (name, _) in sketched.items()}
    if any(kind_of(part.dtype) == "ts" for _, part in sketched.values()):
        return False
    read = [src[k] for k in op.keys] + [c for e in list(args.values()) + conds for c in exact_arrow.columns_of(e)]
    tab = catalog.read_arrow(scan.table, version, list(dict.fromkeys(read + list(attrs.values()))))
    if not all(_key_ok(tab.column(src[k]).type) for k in op.keys):
        return False
    try:
        if conds:
            kept = np.ones(len(tab), dtype=bool)
            for c in conds:
                kept &= exact_arrow.keep(c, tab, types)
            tab = tab.filter(pa.array(kept))
        values = {j: (tab.column(e.name) if isinstance(e, exp.Column) else _computed(e, tab, types))
                  for j, e in args.items()}
    except exact_arrow.ArrowUnsupported:
        return False
    sums = [j for j, a in enumerate(op.aggs) if a.arg is not None and a.func in ("sum", "avg")]
    if not all(_sum_ok(op, j, values[j], rows, not isinstance(args[j], exp.Column)) for j in sums):
        return False

    key_of = {sid: next((k for k in op.keys if src[k] == attrs[sid]), None) for sid in op.sids}
    by_value = (all(k is not None for k in key_of.values())
                and groups_by_value(node, {sid: name for sid, (name, _) in sketched.items()}))
    data = {f"k{i}": tab.column(src[k]) for i, k in enumerate(op.keys)}
    data.update({f"a{j}": v for j, v in values.items()})
    frag_keys = []
    if not by_value:   # a fragment per row, grouped with the keys
        for s, sid in enumerate(op.sids):
            vals = _engine_values(tab.column(attrs[sid]))
            data[f"f{s}"] = pa.array(assign(vals, sketched[sid][1]), type=pa.int64())
            frag_keys.append(f"f{s}")
    del tab
    aggs = [([], "count_all")] + [(f"a{j}", "count") for j in args] + [(f"a{j}", "sum") for j in sums]
    g = pa.table(data).group_by([f"k{i}" for i in range(len(op.keys))] + frag_keys,
                                use_threads=True).aggregate(aggs)

    keys = normalize_frame(to_nullable_pandas(g.select([f"k{i}" for i in range(len(op.keys))])
                                              .rename_columns(list(op.keys))))
    nn = {j: g.column(f"a{j}_count").to_numpy() for j in args}
    plain, unscaled = {}, {}
    for j in sums:
        col = g.column(f"a{j}_sum").combine_chunks()
        if pa.types.is_decimal(col.type):
            unscaled[j] = unscaled_ints(col)
        else:
            plain[j] = col.to_pylist()
    if by_value:   # each group's fragment is its attribute value's
        frags = [pd.Series(assign(keys[key_of[sid]], sketched[sid][1])) for sid in op.sids]
    else:
        frags = [pd.Series(g.column(f).to_numpy()) for f in frag_keys]
    op.load_bulk(keys, g.column("count_all").to_numpy(), nn, plain, frags, unscaled)
    return True
