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

from dataclasses import dataclass
from typing import Optional

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from advisor.maintain import exact_arrow
from advisor.maintain.base_side import OLD
from advisor.maintain.engine import rename_columns
from advisor.maintain import relops
from advisor.maintain.frames import normalize_frame, row_values
from advisor.maintain.operators.aggregate_arrays import PlainAggOp
from advisor.maintain.operators.join import JoinOp
from advisor.partition.assign_pandas import assign
from advisor.plan import ir
from advisor.plan.conjuncts import conjuncts
from advisor.plan.value_lineage import groups_by_value
from advisor.warehouse.arrow_to_pandas import to_nullable_pandas
from advisor.warehouse.value_kinds import kind_of

DRIVER_MAX_ROWS = 10_000_000   # as ``range_partition`` partitions columns on the driver
BLOOM_MAX_KEYS = 200_000       # distinct join keys a side's bloom filter takes (``bulk_init``)
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


@dataclass
class DriverInput:
    """What the lowest aggregation reads, as one table built on the driver: its scans (each with
    internal name -> base column and its filters over base columns), the join's (left, right) key
    pairs (empty for one scan), and for the built table internal name -> column and column -> type
    (one scan: its base columns; a join: the internal names, which differ between its sides)."""
    sides: list
    pairs: list
    src: dict
    types: dict


def driver_input(node: ir.Node) -> Optional[DriverInput]:
    """``node`` as one scan chain (``scan_chain``), or an inner equi-join of two (its condition
    only column equalities) under filters of one side's columns each; else None.

    >>> from advisor.plan.parse import parse_sql
    >>> schema = {"f": [("k", "int"), ("v", "int")], "d": [("k2", "int"), ("r", "string")]}
    >>> q = parse_sql("SELECT r, sum(v) AS s FROM f JOIN d ON k = k2 GROUP BY r", schema.get)
    >>> agg = next(n for n in q.root.walk() if isinstance(n, ir.Aggregate))
    >>> got = driver_input(agg.child)
    >>> len(got.sides), len(got.pairs)
    (2, 1)
    """
    one = scan_chain(node)
    if one is not None:
        return DriverInput([one], [], dict(one[1]), _base_types(one[0]))
    above = []  # filters over the join's output, each pushed into the side whose columns it reads
    while isinstance(node, ir.Select):
        above += conjuncts(node.cond)
        node = node.child
    if not isinstance(node, ir.Join) or node.cond is None:
        return None
    sides = [scan_chain(node.left), scan_chain(node.right)]
    if any(x is None for x in sides):
        return None
    for c in above:
        used = {col.name for col in c.find_all(exp.Column)}
        side = next((x for x in sides if used <= set(x[1])), None)
        if side is None:
            return None
        side[2].append(_renamed(c, side[1]))
    pairs = relops.equi_keys(node.cond, set(node.left.names), set(node.right.names))
    if not pairs or len(conjuncts(node.cond)) != len(pairs):
        return None
    src, types = {}, {}
    for scan, names, _ in sides:
        base = _base_types(scan)
        for name, col in names.items():
            src[name], types[name] = name, base[col]
    if len(src) != sum(len(x[1]) for x in sides):  # an internal name on both sides
        return None
    return DriverInput(sides, pairs, src, types)


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
    inp = driver_input(node.child)
    if inp is None:
        return False
    for scan, _, conds in inp.sides:
        if any(not exact_arrow.supported(c, _base_types(scan), condition=True) for c in conds):
            return False
    src, types = inp.src, inp.types
    dtype = {name: types[col] for name, col in src.items()}
    if any(k not in src or dtype[k].startswith(("float", "double", "timestamp")) for k in node.keys):
        return False
    for lk, rk in inp.pairs:  # join keys compared as the engine compares them: same kind, no floats
        a, b = dtype[lk], dtype[rk]
        if a != b and not (a in _INTS and b in _INTS) or a.startswith(("float", "double", "timestamp")):
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
    """Load ``op`` (a fresh lowest aggregation) from its table, or the equi-join of two, read on
    the driver (``base``: a ``SparkBase`` at OLD); False, with nothing loaded, where the plan or
    the types need Spark.  A join's bloom filters come from its sides' distinct keys, as
    ``bulk_init`` fills them."""
    node = op.node
    if not shape_on_driver(node):
        return False
    inp = driver_input(node.child)
    src, types = inp.src, inp.types
    catalog = base.catalog
    version = {scan.table: base.versions[OLD][scan.table] for scan, _, _ in inp.sides}
    sizes = [catalog.version(scan.table, version[scan.table]).rows for scan, _, _ in inp.sides]
    if max(sizes) > DRIVER_MAX_ROWS:
        return False
    rows = sum(sizes)
    args = {j: _renamed(a.arg, src) for j, a in enumerate(op.aggs) if a.arg is not None}
    sketched = {sid: base.sketched[sid] for sid in op.sids if sid in base.sketched}
    scan_ids = {scan.scan_id for scan, _, _ in inp.sides}
    if len(sketched) != len(op.sids) or any(sid not in scan_ids for sid in sketched):
        return False
    scan_of = {scan.scan_id: scan for scan, _, _ in inp.sides}
    base_attr = {sid: scan_of[sid].col(name).source for sid, (name, _) in sketched.items()}
    # a sketched scan's attribute as a column of the built table: its base column for one scan,
    # for a join a column of its own (a projection above the scan may rename or drop it)
    attrs = base_attr if not inp.pairs else {sid: f"__a{sid}" for sid in sketched}
    if any(kind_of(part.dtype) == "ts" for _, part in sketched.values()):
        return False
    wanted = [src[k] for k in op.keys] + [c for e in args.values() for c in exact_arrow.columns_of(e)]
    wanted = list(dict.fromkeys(wanted + (list(attrs.values()) if not inp.pairs else [])))
    extra = {sid: (attrs[sid], base_attr[sid]) for sid in sketched} if inp.pairs else {}
    try:
        tab, sides = _read_input(catalog, inp, version, wanted, extra)
    except exact_arrow.ArrowUnsupported:
        return False
    if tab is None or not all(_key_ok(tab.column(src[k]).type) for k in op.keys):
        return False
    rows = max(rows, tab.num_rows)  # a join's output may hold more rows than its inputs
    try:
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
    if inp.pairs:
        _fill_blooms(op, sides)
    return True


def _side_table(catalog, scan: ir.Scan, names: dict, conds: list, version: int, wanted: list[str],
                internal: bool, extra: dict | None = None) -> pa.Table:
    """One scan chain's ``wanted`` columns (internal names when ``internal``, else base columns) read
    with pyarrow at ``version``, its filters applied exactly; ``extra``: more columns, name -> base
    column of the scan."""
    base_of = dict(names if internal else {c: c for c in names.values()})
    base_of.update(extra or {})
    wanted = list(wanted) + [w for w in (extra or {}) if w not in wanted]
    cols = [base_of[w] for w in wanted if w in base_of]
    read = list(dict.fromkeys(cols + [c for e in conds for c in exact_arrow.columns_of(e)]))
    tab = catalog.read_arrow(scan.table, version, read)
    if conds:
        kept = np.ones(len(tab), dtype=bool)
        for c in conds:
            kept &= exact_arrow.keep(c, tab, _base_types(scan))
        tab = tab.filter(pa.array(kept))
    present = [w for w in wanted if w in base_of]
    return pa.table({w: tab.column(base_of[w]) for w in present}) if present else tab.select([])


def _read_input(catalog, inp: DriverInput, version: dict, wanted: list[str], extra: dict):
    """(the table the aggregation reads, the join's two side tables or None): one scan's columns,
    or the inner equi-join of both sides (NULL keys never match; keys of two integer types joined
    as int64); (None, None) where the keys' types differ otherwise."""
    if not inp.pairs:
        scan, names, conds = inp.sides[0]
        return _side_table(catalog, scan, names, conds, version[scan.table], wanted, False), None
    keys = [c for pair in inp.pairs for c in pair]
    need = list(dict.fromkeys(wanted + keys))
    (ls, ln, lc), (rs, rn, rc) = inp.sides
    more = {scan.scan_id: {c: b for sid, (c, b) in extra.items() if sid == scan.scan_id} for scan in (ls, rs)}
    lt = _side_table(catalog, ls, ln, lc, version[ls.table], need, True, more[ls.scan_id])
    rt = _side_table(catalog, rs, rn, rc, version[rs.table], need, True, more[rs.scan_id])
    for lk, rk in inp.pairs:
        a, b = lt.schema.field(lk).type, rt.schema.field(rk).type
        if a != b:
            if not (pa.types.is_integer(a) and pa.types.is_integer(b)):
                return None, None
            lt = lt.set_column(lt.schema.get_field_index(lk), lk, lt.column(lk).cast(pa.int64()))
            rt = rt.set_column(rt.schema.get_field_index(rk), rk, rt.column(rk).cast(pa.int64()))
    lt = lt.filter(_no_nulls(lt, [l for l, _ in inp.pairs]))
    rt = rt.filter(_no_nulls(rt, [r for _, r in inp.pairs]))
    joined = lt.join(rt, keys=[l for l, _ in inp.pairs], right_keys=[r for _, r in inp.pairs],
                     join_type="inner", coalesce_keys=False, use_threads=True)
    return joined, (lt, rt)


def _no_nulls(t: pa.Table, cols: list[str]) -> pa.Array:
    ok = pa.array(np.ones(t.num_rows, dtype=bool))
    for c in cols:
        ok = pc.and_(ok, pc.is_valid(t.column(c)))
    return ok


def _fill_blooms(op: PlainAggOp, sides: tuple) -> None:
    """The bloom filters of the join under ``op`` from its sides' distinct keys (switched off beyond
    ``BLOOM_MAX_KEYS``, as ``bulk_init`` does: a filter only ever saves a base-side lookup)."""
    join = next((o for o in op.children[0].walk() if isinstance(o, JoinOp)), None)
    if join is None or not join.use_bloom:
        return
    for t, cols, bloom in ((sides[0], join.lkeys, join.bloom_l), (sides[1], join.rkeys, join.bloom_r)):
        if len(cols) == 1 and pc.count_distinct(t.column(cols[0])).as_py() > BLOOM_MAX_KEYS:
            join.use_bloom = False  # counted without building the distinct table (1.5M order keys)
            return
        distinct = t.select(cols).group_by(cols, use_threads=False).aggregate([])
        if distinct.num_rows > BLOOM_MAX_KEYS:
            join.use_bloom = False
            return
        bloom.add(row_values(normalize_frame(to_nullable_pandas(distinct)), cols))
