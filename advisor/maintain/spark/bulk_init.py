"""Spark-side bulk initialisation of IMP operator state (the lowest aggregation in one job).

Feeding a whole table through the pandas operators as one insert batch runs at ~100-150k rows/s
on 2 cores (TPC-H SF1 lineitem: ~50-70 s), which made buying operator state rarely pay. The state
that matters is the lowest aggregation's: per group the row count, per aggregate the non-NULL
count and running sum, and per sketched scan the number of input rows in each fragment. That is
one Spark job,

    SELECT keys, frag_1..frag_n, count(1), count(arg_j), sum(arg_j)
    FROM (instrumented subtree) GROUP BY keys, frag_1..frag_n

whose answer has (groups x fragments) rows, far fewer than the input. The operators above the
aggregation (HAVING, projection, top-k, an outer aggregation) then take the aggregation's output
as an ordinary insert batch, so their state is exactly what the row path builds.

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
from advisor.maintain.frames import normalize_frame, row_values
from advisor.maintain.operators.aggregate_arrays import PlainAggOp
from advisor.maintain.operators.join import JoinOp
from advisor.plan import ir
from advisor.plan.to_sql import Gen, esql, gen, q

BLOOM_MAX_KEYS = 200_000
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
    spark = base.catalog.spark
    g = Gen(base.source(OLD))
    sql, lams = gen(op.node.child, g)
    lam_of = {g.lams[name]: name for name in lams}          # sid -> Λ column
    items = [q(k) for k in op.keys] + [q(lam_of[s]) for s in op.sids]
    items.append("count(1) AS `__cnt`")
    for j, a in enumerate(op.aggs):
        if a.arg is not None:
            items.append(f"count({esql(a.arg)}) AS `__nn{j}`")
            if a.func in ("sum", "avg"):
                items.append(f"sum({esql(a.arg)}) AS `__s{j}`")
    group = [q(k) for k in op.keys] + [q(lam_of[s]) for s in op.sids]
    by = f" GROUP BY {', '.join(group)}" if group else ""
    df = spark.sql(f"SELECT {', '.join(items)} FROM ({sql}) _bulk{by}").toPandas()
    _load_groups(op, df, [lam_of[s] for s in op.sids])
    for join in [o for o in op.children[0].walk() if isinstance(o, JoinOp)]:
        _fill_blooms(join, base)
    op.started = True
    op.pending = op.all_outputs()
    state.apply({}, base)  # carries the aggregation's output through the operators above it
    return True


def _load_groups(op: PlainAggOp, df: pd.DataFrame, frag_cols: list[str]) -> None:
    """Hand the Spark aggregation's rows to the operator by column (keys in the engine's value
    forms): at SF1's 1.3M (part, line number) rows, key tuples and per-value fragment conversion
    took ~3.5 of an 11 s initialisation (profiled)."""
    df = df.reset_index(drop=True)
    keys = normalize_frame(df[op.keys])  # engine's value forms
    nn = {j: df[f"__nn{j}"].to_numpy(dtype=np.int64) for j, a in enumerate(op.aggs) if a.arg is not None}
    sums = {j: df[f"__s{j}"].tolist() for j, a in enumerate(op.aggs)
            if a.arg is not None and a.func in ("sum", "avg")}
    op.load_bulk(keys, df["__cnt"].to_numpy(dtype=np.int64), nn, sums, [df[c] for c in frag_cols])


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
