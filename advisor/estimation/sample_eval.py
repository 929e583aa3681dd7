"""The aggregation's input over a cached sample, evaluated on the driver without a Spark job.

Estimation runs the query's filters and projections below the innermost aggregation over the
sample (``estimate.sample_frame``).  Through Spark that is one job per query: ~0.1-0.2 s of fixed
cost against a sample of tens of thousands of rows, which alone put cached estimation above
0.05x of an exhaustive capture on the 0.3-1M-row tables of the advice harness (and ~0.8 s for a
join with TPC-H SF1 orders).  When the subtree is Scan / Select / Project / Join and every
expression is one the maintenance engine evaluates (``maintain.exprs``, Spark's non-ANSI
semantics), it is evaluated here over pandas instead, with the same relational operators the
maintenance engine uses (``maintain.relops``); joined tables are read in full with pyarrow and
cached (``dimension_frame``), as the estimator joins them in full anyway (seed 002, digest C8).
Anything else returns None and the caller takes the Spark path.

Known difference: DECIMAL values are evaluated as doubles (as in ``maintain.exprs``), while Spark
computes decimal arithmetic exactly and casts the result to DOUBLE; an aggregate argument can
differ in its last bits.  Filters compare a decimal column with a literal exactly (both sides
are the nearest double of the same decimal).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Optional

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from sqlglot import exp

from advisor import memory
from advisor.caches import BoundedMemo
from advisor.errors import BadInput, Unsupported
from advisor.estimation import sample_files
from advisor.maintain import exprs, relops
from advisor.maintain.frames import READY_DTYPES, M
from advisor.plan import ir
from advisor.plan.conjuncts import conjuncts
from advisor.warehouse import filesystem
from advisor.warehouse.arrow_to_pandas import to_nullable_pandas
from advisor.warehouse.value_kinds import kind_of

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog

_KEEP = 16  # (sample, columns) entries; a sample is tens of thousands of rows
# (path, mtime, columns) -> sample rows
_SAMPLES = BoundedMemo("sample rows", _KEEP, rank=4)


def _cached(cache: BoundedMemo, key: tuple, make) -> Optional[pd.DataFrame]:
    """``cache[key]``, built by ``make()`` on a miss (a None result is returned, not kept), as the
    most recent entry of the memo."""
    got = cache.pop(key, None)
    if got is None:
        got = make()
        if got is None:
            return None
    cache.put(key, got)
    memory.relieve()
    return got


def _nulls(n: int, spark_type: str) -> pd.Series:
    """A column of ``n`` NULLs, already in the engine's dtype for ``spark_type`` (no conversion)."""
    try:
        dtype = READY_DTYPES.get(kind_of(spark_type), "object")
    except BadInput:  # a type that is never partitioned on (arrays, maps, ...): plain objects
        dtype = "object"
    if dtype == "datetime64[ns]":
        return pd.Series(np.full(n, np.datetime64("NaT"), dtype="datetime64[ns]"))
    return pd.Series(pd.NA, index=pd.RangeIndex(n), dtype=dtype)  # a scalar fill, not an n-item list


_DRAWN_KEEP = 2
# (path, mtime) -> the Arrow table just written there
_DRAWN = BoundedMemo("drawn samples", _DRAWN_KEEP, rank=3)


def prime(path: str, table) -> None:
    """Remember the Arrow ``table`` just written as the sample file under ``path``, so that the
    estimate that drew it reads its rows from memory, not back from the file (~10 ms a query on a
    1M-row table, twice: fragment ids and the query's frame).  Kept only when the file reads back
    with the very same schema, so the rows are the file's rows in the file's types (samples are
    drawn on the driver for local warehouses only: ``sample_store``)."""

    if not filesystem.is_local(path):
        return
    files = sorted(os.listdir(path))
    if len(files) != 1 or not pq.read_schema(os.path.join(path, files[0])).remove_metadata().equals(
            table.schema.remove_metadata()):
        return
    _DRAWN.put((path, sample_files.stamp(path)), table)
    memory.relieve()


def local_rows(path: str, columns: list) -> pd.DataFrame:
    """The sampled rows (not the reserve) of the stored sample at ``path``: ``_rid`` and ``columns``
    in the engine's nullable dtypes, read with pyarrow (or taken from the table just drawn,
    ``prime``) and kept in a small in-process LRU.  A sample on a Hadoop file system is read
    through it (``sample_files``), never from the driver's disk."""


    def read():
        cols = ["_rid"] + sorted(set(columns))
        drawn = _DRAWN.get((path, mtime))
        if drawn is None and not filesystem.is_local(path):
            drawn = sample_files.read(path)
        if drawn is not None:
            rows = drawn.filter(drawn.column("_in")) if "_in" in drawn.column_names else drawn
            return to_nullable_pandas(rows.select(cols))
        d = ds.dataset(path, format="parquet")
        return to_nullable_pandas(d.to_table(columns=cols, filter=pc.field("_in") if "_in" in d.schema.names else None))

    mtime = sample_files.stamp(path)
    return _cached(_SAMPLES, (path, mtime, tuple(sorted(set(columns)))), read)


_DIMS_KEEP = 4
# (table, version, scan columns) -> scan frame
_DIMS = BoundedMemo("joined tables", _DIMS_KEEP, rank=5)
DIM_ROWS_MAX = 3_000_000  # a joined table read in full on the driver; larger ones go through Spark


def dimension_frame(catalog: Catalog, scan: ir.Scan, version: int) -> Optional[pd.DataFrame]:
    """The frame of a scan of a joined (dimension) table at ``version``: all its rows, the scan's
    columns only, read with pyarrow (``Catalog.read_arrow``) and kept in a small LRU, so the joins
    of the estimates are pandas merges, not a Spark job per query (~0.8 s at TPC-H SF1), and the
    1.5M-row frame is not rebuilt per query either.  None above ``DIM_ROWS_MAX`` rows."""

    def read():
        if catalog.version(scan.table, version).rows > DIM_ROWS_MAX:
            return None
        rows = to_nullable_pandas(catalog.read_arrow(scan.table, version, sorted({c.source for c in scan.cols})))
        return relops.scan_frame(scan, rows, 1, {})

    return _cached(_DIMS, (scan.table, version, tuple((c.name, c.source, c.dtype) for c in scan.cols)),
                   read)


def _columns(e: exp.Expression) -> set[str]:
    return {c.name for c in e.find_all(exp.Column)}


def _and(terms: list) -> Optional[exp.Expression]:
    """The conjunction of ``terms`` (None for none)."""
    return (terms[0] if len(terms) == 1 else exp.and_(*terms)) if terms else None


def _semi_reduce(a: pd.DataFrame, b: pd.DataFrame, cond, left_names, right_names) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both join inputs without the rows of the larger one whose equi-join key has no partner in
    the smaller one (an inner join never outputs them): a sample of 300k rows against 1.5M
    joined rows then merges 300k against at most 300k."""

    pairs = relops.equi_keys(cond, set(left_names), set(right_names))
    if not pairs or min(len(a), len(b)) == 0:
        return a, b
    flip = len(a) > len(b)
    small, big = (b, a) if flip else (a, b)
    keep = np.ones(len(big), dtype=bool)
    for l, r in pairs:
        sk, bk = (r, l) if flip else (l, r)
        if str(small[sk].dtype) != str(big[bk].dtype):
            return a, b  # mixed key types: leave the matching to the join's own coercion
        keep &= big[bk].isin(small[sk].dropna().unique()).to_numpy(dtype=bool)
    big = big[keep]
    big.index = pd.RangeIndex(len(big))  # a fresh frame: no second copy of its columns
    return (big, small) if flip else (small, big)


def local_frame(shape, path: str, sid: str, dimension=None) -> Optional[pd.DataFrame]:
    """Keys, aggregate arguments (as float, NaN for NULL) and the sample row id ``sid`` of every row
    reaching the innermost aggregation, or None when the subtree uses an operator or expression the
    engine does not evaluate, or joins a table that ``dimension`` (scan -> its frame, see
    ``dimension_frame``, or None) does not give.  The multiplicity column of ``relops`` carries the
    row id: the sampled table's scan gets its row ids, every other scan multiplicity 1, and joins
    multiply multiplicities.  Frames from ``dimension`` are shared and never modified."""

    child = shape.inner.child
    if any(not isinstance(n, (ir.Scan, ir.Select, ir.Project, ir.Join)) for n in child.walk()):
        return None
    others = {}
    for n in child.walk():
        if isinstance(n, ir.Scan) and n.scan_id != shape.fact.scan_id:
            got = dimension(n) if dimension is not None else None
            if got is None:
                return None
            others[n.scan_id] = got
    read = shape.read_columns()
    rows = local_rows(path, read)
    unread = {c.source: c.dtype for c in shape.fact.cols if c.source not in set(read)}
    if unread:  # nothing below the aggregation reads these, and a narrow sample may lack them: NULLs
        rows = rows.assign(**{c: _nulls(len(rows), t) for c, t in sorted(unread.items())})

    def run(node: ir.Node, pending: tuple = ()) -> pd.DataFrame:
        """``node``'s frame, filtered by the ``pending`` conjuncts of the selections above it.
        Below a comma join (a join without a condition) each is applied as low as its columns
        allow, so the WHERE equalities become the join's keys instead of a filter over the cross
        product; elsewhere selections run where they stand."""
        if isinstance(node, ir.Select) and not any(isinstance(n, ir.Join) and n.cond is None
                                                   for n in node.walk()):
            return relops.select(run(node.child), _and([*pending, node.cond]))
        if isinstance(node, ir.Select):
            return run(node.child, pending + tuple(conjuncts(node.cond)))
        if isinstance(node, ir.Join):
            lnames, rnames = set(node.left.names), set(node.right.names)
            down_l = tuple(c for c in pending if _columns(c) <= lnames)
            down_r = tuple(c for c in pending if c not in down_l and _columns(c) <= rnames)
            cond = _and(([node.cond] if node.cond is not None else [])
                        + [c for c in pending if c not in down_l and c not in down_r])
            a, b = _semi_reduce(run(node.left, down_l), run(node.right, down_r), cond,
                                node.left.names, node.right.names)
            return relops.join(a, b, cond, node.left.names, node.right.names, [], [])
        if isinstance(node, ir.Scan):
            df = others[node.scan_id] if node.scan_id in others else \
                relops.scan_frame(node, rows, rows["_rid"].to_numpy(dtype=np.int64), {})
        else:
            df = relops.project(run(node.child), node.items, [])
        return relops.select(df, _and(list(pending))) if pending else df

    try:
        df = run(child)
        out = {k: df[k] for k in shape.keys}
        for i, a in enumerate(shape.inner.aggs):
            if a.arg is not None:
                v = exprs.evaluate(a.arg, df) if len(df) else pd.Series([], dtype="Float64")
                if not (pd.api.types.is_numeric_dtype(v) or pd.api.types.is_bool_dtype(v)):
                    return None  # CAST(date/string AS DOUBLE) is Spark's business
                out[f"__a{i}"] = v.astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    except Unsupported:
        return None
    out[sid] = df[M].to_numpy(dtype=np.int64)
    return pd.DataFrame(out)
