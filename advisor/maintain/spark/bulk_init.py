"""Spark-side bulk initialisation of IMP operator state (the lowest aggregation in one job).

Feeding a whole table through the pandas operators as one insert batch runs at ~100-150k rows/s
on 2 cores (TPC-H SF1 lineitem: ~50-70 s), which made buying operator state rarely pay. The state
that matters is the lowest aggregation's: per group the row count, per aggregate the non-NULL
count and running sum, and per sketched scan the number of input rows in each fragment. That is
one Spark job,

    SELECT keys, frag_1..frag_n, count(1), count(arg_j), sum(arg_j)
    FROM (instrumented subtree) GROUP BY keys, frag_1..frag_n

whose answer has (groups x fragments) rows, far fewer than the input.  Where the aggregation reads
one table of at most 10M rows as it is, pyarrow computes the same numbers on the driver instead
(``bulk_arrow``).  The operators above the aggregation (HAVING, projection, top-k, an outer
aggregation) then take the aggregation's output as an ordinary insert batch, so their state is
exactly what the row path builds.

Supported plans (`supports`): from the root down, unary operators only (Select, Project, TopK,
Aggregate, Distinct) to the lowest Aggregate/Distinct, whose aggregates are COUNT/SUM/AVG without
DISTINCT (MIN/MAX need per-value multisets: the row path is used), over a subtree of scans,
selections, projections, joins and unions. Join operators below it get their bloom filters from
the distinct join keys of each side when there are at most ``BLOOM_MAX_KEYS``; beyond that the
filter is switched off for that join (always correct: it only ever saved a base-side lookup).
Sums of DECIMAL arguments come back exact from Spark and are stored as exact unscaled ints, as the
row path keeps them (``decimals``).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from advisor.maintain.base_side import OLD
from advisor.maintain.decimals import unscaled_exact
from advisor.maintain.frames import normalize_frame, row_values
from advisor.maintain.operators.aggregate_arrays import PlainAggOp
from advisor.maintain.operators.join import JoinOp
from advisor.maintain.spark.bulk_arrow import BLOOM_MAX_KEYS, initialise_on_driver
from advisor.plan import ir
from advisor.plan.to_sql import Gen, esql, gen, q

_BULK_FUNCS = ("count", "sum", "avg")
_BELOW = (ir.Scan, ir.Select, ir.Project, ir.Join, ir.Union)
_ABOVE = (ir.Select, ir.Project, ir.TopK, ir.Aggregate, ir.Distinct)


def lowest_aggregate(root: ir.Node) -> Optional[ir.Node]:
    """The aggregation a bulk initialisation would compute, or None when the plan has no such shape."""
    node, found = root, None
    while isinstance(node, _ABOVE):
        if isinstance(node, (ir.Aggregate, ir.Distinct)):
            found = node
            if all(isinstance(n, _BELOW) for n in node.child.walk()):
                break
        node = node.children[0]
    if found is None or not all(isinstance(n, _BELOW) for n in found.child.walk()):
        return None
    if isinstance(found, ir.Aggregate) and any(a.func not in _BULK_FUNCS or a.distinct for a in found.aggs):
        return None
    return found


def supports(root: ir.Node) -> bool:
    """Can operator state for this plan be initialised by one Spark aggregation?"""
    return lowest_aggregate(root) is not None


def plain_agg_op(state) -> Optional[PlainAggOp]:
    target = lowest_aggregate(state.plan)
    if target is None:
        return None
    return next((op for op in state.root_op.walk() if op.node is target and isinstance(op, PlainAggOp)), None)


def initialise(state, base) -> bool:
    """Fill `state` (fresh, from `MaintState`) for the tables `base` (a `SparkBase`) reads at OLD;
    False when the plan is not supported (the caller uses the row path)."""
    op = plain_agg_op(state)
    if op is None or state.batches:
        return False
    state.init_on_driver = initialise_on_driver(op, base)  # one table of up to 10M rows: ``bulk_arrow``
    if not state.init_on_driver:
        _initialise_on_spark(op, base)
    op.started = True
    op.pending = op.all_outputs()
    state.apply({}, base)  # carries the aggregation's output through the operators above it
    return True


def _initialise_on_spark(op: PlainAggOp, base) -> None:
    """Load ``op`` from the Spark aggregation in the module's docstring, and the blooms of the
    joins below it."""
    spark = base.catalog.spark
    g = Gen(base.source(OLD))
    sql, lams = gen(op.node.child, g)
    lam_of = {g.lams[name]: name for name in lams}          # sid -> Λ column
    items = [q(k) for k in op.keys] + [q(lam_of[s]) for s in op.sids]
    items.append("count(1) AS `__cnt`")
    sums = {}
    for j, a in enumerate(op.aggs):
        if a.arg is not None:
            items.append(f"count({esql(a.arg)}) AS `__nn{j}`")
            if a.func in ("sum", "avg"):
                sums[j] = f"sum({esql(a.arg)})"
    group = [q(k) for k in op.keys] + [q(lam_of[s]) for s in op.sids]
    by = f" GROUP BY {', '.join(group)}" if group else ""
    src = f" FROM ({sql}) _bulk{by}"
    exact = _unscaled_sums(spark, op, sums, src)
    for j, e in sums.items():
        items += _sum_items(j, e, op.dec[j][1]) if j in exact else [f"{e} AS `__s{j}`"]
    df = spark.sql(f"SELECT {', '.join(items)}{src}").toPandas()
    _load_groups(op, df, [lam_of[s] for s in op.sids], exact)
    for join in [o for o in op.children[0].walk() if isinstance(o, JoinOp)]:
        _fill_blooms(join, base)


def _unscaled_sums(spark, op: PlainAggOp, sums: dict[int, str], src: str) -> set[int]:
    """The DECIMAL sums that can come back as their unscaled BIGINT (``_sum_items``): those whose
    Spark result has the scale the operator keeps (``op.dec``), checked on the analysed plan (no
    job).  A Python ``Decimal`` per group, converted one by one, took 9 of a 26 s initialisation of
    SF1's 1.5M ``GROUP BY l_orderkey`` groups (profiled)."""
    dec = {j: e for j, e in sums.items() if j in op.dec}
    if not dec:
        return set()
    schema = spark.sql(f"SELECT {', '.join(f'{e} AS `__s{j}`' for j, e in dec.items())}{src}").schema
    return {j for j in dec if getattr(schema[f"__s{j}"].dataType, "scale", None) == op.dec[j][1]}


def _sum_items(j: int, e: str, scale: int) -> list[str]:
    """A DECIMAL sum as its unscaled value: the decimal's plain text, when it has exactly ``scale``
    digits after the point, without the point, as BIGINT (``__u``; 0 where it does not fit, the text
    is in scientific notation or the sum is NULL), and the sum itself only where ``__u`` does not hold
    it (``__s``)."""
    t = f"cast({e} AS STRING)"
    plain = f"instr({t}, '.') = length({t}) - {scale}" if scale else f"{t} RLIKE '^-?[0-9]+$'"
    u = f"CASE WHEN {plain} THEN try_cast(replace({t}, '.', '') AS BIGINT) END"
    return [f"coalesce({u}, 0) AS `__u{j}`", f"CASE WHEN {u} IS NULL THEN {e} END AS `__s{j}`"]


def _load_groups(op: PlainAggOp, df: pd.DataFrame, frag_cols: list[str], exact: set[int] = frozenset()) -> None:
    """Hand the Spark aggregation's rows to the operator by column (keys in the engine's value
    forms): at SF1's 1.3M (part, line number) rows, key tuples and per-value fragment conversion
    took ~3.5 of an 11 s initialisation (profiled).  Sums in ``exact`` arrive unscaled
    (``_sum_items``)."""
    df = df.reset_index(drop=True)
    keys = normalize_frame(df[op.keys])  # engine's value forms
    nn = {j: df[f"__nn{j}"].to_numpy(dtype=np.int64) for j, a in enumerate(op.aggs) if a.arg is not None}
    sums, unscaled = {}, {}
    for j, a in enumerate(op.aggs):
        if a.arg is None or a.func not in ("sum", "avg"):
            continue
        if j not in exact:
            sums[j] = df[f"__s{j}"].tolist()
            continue
        vals = df[f"__u{j}"].to_numpy(dtype=np.int64).astype(object)   # exact Python ints
        big = df[f"__s{j}"].notna().to_numpy(dtype=bool)
        for i in np.flatnonzero(big):  # beyond BIGINT: the exact Decimal, one by one
            vals[i] = unscaled_exact(df.at[i, f"__s{j}"], op.dec[j][1])
        vals[nn[j] == 0] = None   # SUM over no non-NULL value is NULL
        unscaled[j] = vals
    op.load_bulk(keys, df["__cnt"].to_numpy(dtype=np.int64), nn, sums, [df[c] for c in frag_cols], unscaled)


def _fill_blooms(join, base) -> None:
    if not join.use_bloom:
        return
    for side, cols, bloom in ((join.children[0], join.lkeys, join.bloom_l),
                              (join.children[1], join.rkeys, join.bloom_r)):
        g = Gen(base.source(OLD))
        sql, _ = gen(side.node, g)
        sel = ", ".join(q(c) for c in cols)
        keys = base.catalog.spark.sql(
            f"SELECT DISTINCT {sel} FROM ({sql}) _k LIMIT {BLOOM_MAX_KEYS + 1}").toPandas()
        if len(keys) > BLOOM_MAX_KEYS:
            join.use_bloom = False
            return
        bloom.add(row_values(normalize_frame(keys), cols))
