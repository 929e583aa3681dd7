"""Equi-depth range partitions per (table, attribute, n) and binary-search fragment assignment.

A partition with interior boundaries b_1 < ... < b_m has m+1 half-open ranges
[-inf, b_1), [b_1, b_2), ..., [b_m, +inf) with ids 0..m, plus the NULL fragment with id m+1
(NULL, and NaN for floating columns). Assignment is a binary search: Spark ML's Bucketizer for
numbers, dates and timestamps (mapped exactly to doubles), a vectorised `searchsorted` for
strings and wide decimals. Never a CASE chain.
"""


import json
import struct
import time
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.ml.feature import Bucketizer
from pyspark.sql import DataFrame, functions as F
from pyspark.sql.functions import pandas_udf

from advisor.errors import BadInput
from advisor.warehouse.arrow_to_pandas import decimal_to_float
from advisor.warehouse.column_stats import stored_ndv
from advisor.warehouse.table_files import parquet_files, read_columns
from advisor.warehouse.value_kinds import decode_value, encode_value, kind_of, to_double, uses_bucketizer

if TYPE_CHECKING:  # annotations are strings here: pandas_udf reads real ones
    from advisor.warehouse.catalog import Catalog
    from advisor.warehouse.store import Store

MAX_FRAGMENTS = 32_000  # one Spark bitmap bucket holds 32,768 positions


@dataclass(frozen=True)
class RangePartition:
    """A stored partition: boundaries as JSON-able values of the column's type."""
    id: int
    table: str
    attr: str
    dtype: str
    boundaries: tuple  # interior boundaries, strictly increasing
    sizes: tuple = field(default=())  # rows per fragment id (len = n_fragments)
    table_version: int = 0
    n_target: int = 0

    @property
    def n_ranges(self) -> int:
        return len(self.boundaries) + 1

    @property
    def null_id(self) -> int:
        return len(self.boundaries) + 1

    @property
    def n_fragments(self) -> int:
        return len(self.boundaries) + 2

    def range_of(self, i: int) -> tuple[Any, Any]:
        """(lo, hi) of fragment i as typed Python values; None for an infinite end."""
        lo = self.boundaries[i - 1] if i > 0 else None
        hi = self.boundaries[i] if i < len(self.boundaries) else None
        return decode_value(lo, self.dtype), decode_value(hi, self.dtype)


# ---------- fragment assignment ----------
def assign_column(df, attr: str, part: RangePartition, out: str):
    """Add column `out` (int fragment id) to df by binary search over the partition's boundaries."""
    if uses_bucketizer(part.dtype):
        k = kind_of(part.dtype)
        col = F.col(attr)
        if k == "date":
            num = F.unix_date(col).cast("double")
        elif k == "ts":
            num = F.unix_micros(col.cast("timestamp")).cast("double")
        else:
            num = col.cast("double")
        splits = [float("-inf")] + [to_double(b, part.dtype) for b in part.boundaries] + [float("inf")]
        tmp_in = f"__num_{out}"
        tmp_out = f"__bkt_{out}"
        res = _bucketize(df.withColumn(tmp_in, num), splits, tmp_in, tmp_out)
        # handleInvalid=keep puts NaN into bucket len(splits)-1 == null_id; NULL stays NULL.
        frag = F.coalesce(F.col(tmp_out).cast("int"), F.lit(part.null_id))
        return res.withColumn(out, frag).drop(tmp_in, tmp_out)
    return df.withColumn(out, _searchsorted_udf(part)(F.col(attr)))


def _bucketize(df, splits: list[float], inp: str, out: str):
    """Spark ML's Bucketizer (``handleInvalid=keep``) over ``splits``, built on the JVM directly.

    PySpark's wrapper hands a Python list to the JVM one element per py4j call: 10,002 splits cost
    ~1 s per call on 2 cores (measured; the transform itself takes ~0.1 s).  Here the splits cross
    as one big-endian byte array and are unpacked into a ``double[]`` on the JVM: ~0.04 s.  The
    same Bucketizer runs on the same splits, so ids are identical.  Without a classic (py4j)
    session, e.g. Spark Connect, the wrapper is used."""

    jdf = getattr(df, "_jdf", None)
    spark = df.sparkSession
    sc = getattr(spark, "_sc", None)
    if jdf is None or sc is None:

        return Bucketizer(splits=splits, inputCol=inp, outputCol=out, handleInvalid="keep").transform(df)

    gw = sc._gateway
    arr = gw.new_array(gw.jvm.double, len(splits))
    gw.jvm.java.nio.ByteBuffer.wrap(bytearray(struct.pack(f">{len(splits)}d", *splits))).asDoubleBuffer().get(arr)
    jb = (gw.jvm.org.apache.spark.ml.feature.Bucketizer().setSplits(arr).setInputCol(inp).setOutputCol(out)
          .setHandleInvalid("keep"))
    return DataFrame(jb.transform(jdf), spark)


def _searchsorted_udf(part: RangePartition):
    """pandas_udf doing numpy searchsorted for strings and wide decimals (exact comparisons)."""
    bounds = [decode_value(b, part.dtype) for b in part.boundaries]
    null_id = part.null_id
    arr = np.array(bounds, dtype=object)

    @pandas_udf("int")
    def frag(s: pd.Series) -> pd.Series:
        isnull = s.isna().to_numpy()
        vals = s.to_numpy(dtype=object)
        out = np.full(len(vals), null_id, dtype=np.int32)
        if (~isnull).any():
            out[~isnull] = np.searchsorted(arr, vals[~isnull], side="right").astype(np.int32)
        return pd.Series(out)

    return frag


# ---------- building ----------
SAMPLE_PER_RANGE = 50  # sampled values per range when boundaries come from a sample


def compute_boundaries(df, attr: str, dtype: str, n: int, rows: int | None = None,
                       ndv: int | None = None) -> tuple[list, list | None]:
    """(interior boundaries for about n ranges, fragment sizes or None).

    At most n+1 distinct values: one range per value, from one value-count job that also gives the
    sizes.  Otherwise quantiles of a uniform sample of ~``SAMPLE_PER_RANGE`` values per range,
    sorted on the driver (sizes: None, counted by the caller).  Any boundaries give correct
    sketches; equi-depth only makes fragments even.  The alternative
    (``approx_count_distinct``, then ``percentile_approx`` over 9,999 probabilities, then the
    count) takes 3.1-9.0 s per attribute on TPC-H SF1 lineitem, 3-8 plain scans."""

    if n < 1 or n > MAX_FRAGMENTS:
        raise BadInput(f"--fragments must be between 1 and {MAX_FRAGMENTS}, got {n}")
    k = kind_of(dtype)
    col = F.col(attr)
    if ndv is None:
        ndv = df.agg(F.approx_count_distinct(attr)).first()[0] or 0
    if ndv <= n:
        got = _value_counts(df, attr, k, n)
        if got is not None:
            return got
    nonnull = df.select(attr).where(col.isNotNull())
    if k == "float":
        nonnull = nonnull.where(~F.isnan(col))
    total = rows if rows is not None else nonnull.count()
    frac = min(1.0, SAMPLE_PER_RANGE * n / max(1, total))
    sample = nonnull.sample(False, frac, seed=17) if frac < 1 else nonnull
    if k in ("int", "float"):  # through Arrow and numpy: ~500k values at 10,000 ranges
        vals = np.sort(sample.toPandas()[attr].to_numpy()).tolist()
    else:
        vals = sorted(r[0] for r in sample.collect())
    if not vals:
        return [], None
    picks = [vals[min(len(vals) - 1, int(i / n * len(vals)))] for i in range(1, n)]
    return _clean(picks, dtype), None


def _value_counts(df, attr: str, kind: str, n: int) -> tuple[list, list] | None:
    """One range per distinct value and the sizes, from one job; None above n+1 values."""
    rows = df.groupBy(attr).agg(F.count(F.lit(1)).alias("c")).limit(n + 4).collect()
    nulls = sum(r["c"] for r in rows if r[0] is None or (kind == "float" and r[0] != r[0]))
    vals = sorted((r[0], r["c"]) for r in rows if not (r[0] is None or (kind == "float" and r[0] != r[0])))
    if len(vals) > n + 1:
        return None
    bounds = [encode_value(v) for v, _ in vals]
    if _clean(list(bounds), None if kind != "float" else "double") != bounds:
        return None  # values that collapse to one double: let the caller count by assignment
    return bounds, [0] + [int(c) for _, c in vals] + [int(nulls)]


def _clean(vals: list, dtype: str | None) -> list:
    """Encoded, distinct, sorted boundaries (distinct as doubles where Bucketizer assigns them)."""
    out, seen = [], set()
    for v in vals:
        key = encode_value(v)
        if v is None or key in seen:
            continue
        seen.add(key)
        out.append(key)
    if dtype is None:
        return out
    out.sort(key=lambda x: decode_value(x, dtype))
    if uses_bucketizer(dtype):  # distinct doubles are required by Bucketizer
        dedup, last = [], None
        for b in out:
            d = to_double(b, dtype)
            if last is None or d > last:
                dedup.append(b)
                last = d
        out = dedup
    return out


def driver_boundaries(col, dtype: str, n: int) -> tuple[list, list]:
    """(interior boundaries, fragment sizes) from a whole column (a pyarrow array) on the driver:
    one range per value when at most n+1 distinct values, else exact equi-depth quantiles of the
    sorted values (``compute_boundaries``' rules without its sample).  Values are sorted as Spark
    assigns them -- as doubles where ``assign_column`` uses Bucketizer, exactly otherwise -- so the
    sizes are counts between boundaries in that order, equal to Spark's assignment."""

    if n < 1 or n > MAX_FRAGMENTS:
        raise BadInput(f"--fragments must be between 1 and {MAX_FRAGMENTS}, got {n}")
    k = kind_of(dtype)
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    valid = arr.is_valid()
    if k == "float":
        valid = pc.and_(valid, pc.invert(pc.fill_null(pc.is_nan(arr), True)))
    vals = arr.filter(valid)
    nulls = len(arr) - len(vals)
    m = len(vals)
    where = [min(m - 1, int(i / n * m)) for i in range(1, n)]
    counted = _counted_boundaries(vals, k, dtype, n, where, nulls)
    if counted is not None:
        return counted
    d = _as_doubles(vals, dtype)
    if d is not None:
        if k in ("int", "date", "bool") and (m == 0 or float(np.abs(d).max()) < 2.0 ** 53):
            # values too spread to count (``COUNT_SPAN``), whose doubles are the values exactly:
            # sort them alone and cast the picked ones back.  Mostly sorted values (a table stored
            # in its key's order, plus batches) take a stable sort, which follows their runs;
            # others quicksort (SF1 lineitem, three batches: 0.30-0.34 s for l_shipdate or
            # l_suppkey against the stable argsort's 0.74-0.88 s)
            descents = int(np.count_nonzero(d[1:] < d[:-1])) if m > 1 else 0
            srt = d if descents == 0 else np.sort(d, kind="stable" if descents * 64 < m else "quicksort")
            def pick(idx):
                ints = pa.array(srt[idx].astype(np.int64))
                return (ints.cast(pa.int32()) if pa.types.is_date32(vals.type) else ints).cast(vals.type).to_pylist()
        else:
            order = np.argsort(d, kind="stable")
            srt = d[order]
            def pick(idx):
                return vals.take(pa.array(order[idx], type=pa.int64())).to_pylist()
        starts = np.flatnonzero(np.concatenate([[True], srt[1:] != srt[:-1]])) if m else np.zeros(0, np.int64)
        if len(starts) <= n + 1:
            return [encode_value(v) for v in pick(starts)], [0] + np.diff(np.append(starts, m)).tolist() + [nulls]
        bounds = _clean(pick(np.asarray(where, dtype=np.int64)), dtype)
        cuts = np.searchsorted(srt, [to_double(b, dtype) for b in bounds], side="left")
        return bounds, np.diff(np.concatenate([[0], cuts, [m]])).astype(int).tolist() + [nulls]
    vc = pc.value_counts(vals)  # one hash pass: the distinct count, and the counts when few
    if len(vc) <= n + 1:
        pairs = sorted(zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist()))
        return [encode_value(v) for v, _ in pairs], [0] + [int(c) for _, c in pairs] + [nulls]
    ordered = vals.take(pc.array_sort_indices(vals))
    bounds = _clean(ordered.take(pa.array(where, type=pa.int64())).to_pylist(), dtype)
    cuts = [_first_at_least(ordered, decode_value(b, dtype)) for b in bounds]
    return bounds, [b - a for a, b in zip([0] + cuts, cuts + [m])] + [nulls]


# Integers, dates and booleans whose range spans at most COUNT_SPAN values (and at most
# COUNT_PER_ROW per value read) are counted per value instead of sorted: one bincount and one
# cumulative sum give the same quantiles and sizes.  SF1 lineitem: l_suppkey (10,000 values)
# and l_shipdate (2,526 days) 0.02-0.03 s against 0.30-0.34 s sorted.
COUNT_SPAN = 1 << 24
COUNT_PER_ROW = 4


def _counted_boundaries(vals, kind: str, dtype: str, n: int, where: list, nulls: int):
    """``driver_boundaries``' answer by counting values (``COUNT_SPAN``), or None where the column
    is not a narrow integer, date or boolean one.

    >>> bounds, sizes = _counted_boundaries(pa.array([5, 3, 3, 9, 7, 3]), "int", "bigint", 2, [3], 1)
    >>> [decode_value(b, "bigint") for b in bounds], sizes
    ([5], [3, 3, 1])
    """
    m = len(vals)
    if kind not in ("int", "date", "bool") or m == 0:
        return None
    if kind == "date":
        ints = vals.cast(pa.int32()).to_numpy()
    elif kind == "bool":
        ints = vals.cast(pa.int8()).to_numpy()
    else:
        ints = vals.to_numpy()
    lo, hi = int(ints.min()), int(ints.max())
    span = hi - lo + 1
    if span > min(COUNT_SPAN, COUNT_PER_ROW * m + 1024):
        return None
    counts = np.bincount((ints - lo).astype(np.intp, copy=False), minlength=span)

    def as_values(offsets):
        arr = pa.array(np.asarray(offsets, dtype=np.int64) + lo)
        return (arr.cast(pa.int32()) if kind == "date" else arr).cast(vals.type).to_pylist()

    present = np.flatnonzero(counts)
    if len(present) <= n + 1:
        return [encode_value(v) for v in as_values(present)], [0] + counts[present].tolist() + [nulls]
    cum = np.cumsum(counts)
    picks = np.searchsorted(cum, np.asarray(where, dtype=np.int64), side="right")  # sorted[w]
    bounds = _clean(as_values(picks), dtype)
    below = [int(to_double(b, dtype)) - lo for b in bounds]  # values under each boundary
    cuts = [int(cum[b - 1]) if b > 0 else 0 for b in below]
    return bounds, np.diff(np.concatenate([[0], cuts, [m]])).astype(int).tolist() + [nulls]


def _as_doubles(vals, dtype: str):
    """Non-NULL values as the doubles Bucketizer compares (``to_double``; numpy), or None where
    ``assign_column`` compares exactly (strings, wide decimals)."""


    k = kind_of(dtype)
    if not uses_bucketizer(dtype) or k == "ts":
        return None
    if k == "dec":
        return np.asarray(decimal_to_float(vals), dtype=np.float64)
    if k == "date":
        return vals.cast(pa.int32()).to_numpy().astype(np.float64)
    if k == "bool":
        return vals.cast(pa.int8()).to_numpy().astype(np.float64)
    return vals.to_numpy().astype(np.float64)


def _first_at_least(ordered, x) -> int:
    """Index of the first value >= x in the sorted pyarrow array (Python comparisons, as the
    exact ``searchsorted`` of ``assign_column``)."""

    return bisect_left(range(len(ordered)), x, key=lambda i: ordered[i].as_py())


# columns of tables up to this size are partitioned on the driver; strings and wide decimals
# (sorted by pyarrow, compared in Python) only up to EXACT_DRIVER_MAX_ROWS: at TPC-H SF1 (6M rows)
# l_comment took 6.9 s there against 4.2 s on Spark, numbers 0.3-0.9 s against 1.0-4.9 s
DRIVER_MAX_ROWS = 10_000_000
EXACT_DRIVER_MAX_ROWS = 1_000_000
_DRIVER_KINDS = ("int", "dec", "float", "date", "str", "bool")  # timestamps: Spark's time zone rules


def build_partition(catalog: "Catalog", table: str, attr: str, n: int = 1000, version: int | None = None,
                    on_driver: bool | None = None) -> RangePartition:
    """Compute, size and store an equi-depth partition for table.attr at a table version.

    Tables up to ``DRIVER_MAX_ROWS`` rows (``EXACT_DRIVER_MAX_ROWS`` for strings and wide
    decimals; ``on_driver`` None) are read with pyarrow and partitioned on the driver
    (``driver_boundaries``): exact quantiles and no Spark job, where the Spark path runs two (a
    sample, then a Bucketizer count: 2.4 s for 10,000 ranges over TPC-H SF0.1 lineitem in a fresh
    process; ``workloads.bench.partition_build`` compares them).  Larger tables, and timestamps, take
    the Spark path (the NDV from the stored column statistics when at hand)."""

    table = catalog.require(table)
    attr = attr.lower()
    dtype = catalog.column_type(table, attr)
    k = kind_of(dtype)
    ver = catalog.version(table, version)
    v = ver.version
    if on_driver is None:
        most = DRIVER_MAX_ROWS if uses_bucketizer(dtype) else EXACT_DRIVER_MAX_ROWS
        on_driver = ver.rows <= most and k in _DRIVER_KINDS
    if on_driver:
        bounds, sizes = driver_boundaries(catalog.read_arrow(table, v, [attr]).column(attr), dtype, n)
        return _store_partition(catalog, RangePartition(0, table, attr, dtype, tuple(bounds), (), v, n), sizes)
    df = catalog.read(table, v).select(attr)

    bounds, sizes = compute_boundaries(df, attr, dtype, n, rows=ver.rows, ndv=stored_ndv(catalog, table, attr, v))
    part = RangePartition(0, table, attr, dtype, tuple(bounds), (), v, n)
    if sizes is None:
        counts = assign_column(df, attr, part, "__f").groupBy("__f").count().collect()
        sizes = [0] * part.n_fragments
        for r in counts:
            sizes[r["__f"]] = int(r["count"])
    return _store_partition(catalog, part, sizes)


def _store_partition(catalog: "Catalog", part: RangePartition, sizes: list) -> RangePartition:
    """Insert the partition with its sizes into the store; the stored copy (with its id)."""
    with catalog.store.tx() as c:
        cur = c.execute(
            "INSERT INTO partitions(table_name, attr, n_target, table_version, dtype, boundaries_json,"
            " sizes_json, created) VALUES (?,?,?,?,?,?,?,?)",
            (part.table, part.attr, part.n_target, part.table_version, part.dtype,
             json.dumps(list(part.boundaries)), json.dumps(list(sizes)), time.time()))
        pid = cur.lastrowid
    return RangePartition(pid, part.table, part.attr, part.dtype, part.boundaries, tuple(sizes),
                          part.table_version, part.n_target)


ADVANCE_MAX_CHANGE = 0.1  # batches may change at most this share of rows before boundaries are recomputed


def fragment_ids(values: list, part: RangePartition) -> list[int]:
    """Fragment id of each Python value (NULL/NaN -> the NULL fragment), as ``assign_column`` does:
    fragment i holds [b[i-1], b[i])."""

    bounds = [decode_value(b, part.dtype) for b in part.boundaries]
    out = []
    for x in values:
        if x is None or (isinstance(x, float) and x != x):
            out.append(part.null_id)
        else:
            out.append(bisect_right(bounds, x))
    return out


def advance_partition(catalog: "Catalog", table: str, attr: str, n: int, version: int) -> RangePartition | None:
    """The newest stored partition of table.attr (target n) at an earlier version, carried to
    ``version`` when only small batches lie in between: same boundaries (any boundaries give
    correct sketches), fragment sizes updated exactly from the batch files' inserted and deleted
    rows with pyarrow (no Spark job).  None when a rebuild is due."""

    r = catalog.store.one("SELECT * FROM partitions WHERE table_name=? AND attr=? AND n_target=? AND "
                          "table_version<? ORDER BY table_version DESC, id DESC LIMIT 1", (table, attr, n, version))
    if r is None:
        return None
    old = _from_row(r)
    between = [x for x in catalog.versions(table) if old.table_version < x.version <= version]
    rows = max(1, catalog.version(table, version).rows)
    if any(x.kind != "batch" for x in between) or sum(x.n_ins + x.n_del for x in between) > ADVANCE_MAX_CHANGE * rows:
        return None
    sizes = list(old.sizes) + [0] * (old.n_fragments - len(old.sizes))
    for paths, sign in (([x.ins_path for x in between if x.ins_path], 1), ([x.del_path for x in between if x.del_path], -1)):
        files = parquet_files(paths)  # local or on a Hadoop file system
        if not files:
            continue
        try:
            ids = fragment_ids(read_columns(files, [attr]).column(attr).to_pylist(), old)
        except TypeError:  # values not comparable with the decoded boundaries (e.g. zoned timestamps)
            return None
        for f in ids:
            sizes[f] += sign
    with catalog.store.tx() as c:
        cur = c.execute(
            "INSERT INTO partitions(table_name, attr, n_target, table_version, dtype, boundaries_json,"
            " sizes_json, created) VALUES (?,?,?,?,?,?,?,?)",
            (table, attr, n, version, old.dtype, json.dumps(list(old.boundaries)), json.dumps(sizes), time.time()))
        pid = cur.lastrowid
    return RangePartition(pid, table, attr, old.dtype, old.boundaries, tuple(sizes), version, n)


def load_partition(store: "Store", pid: int) -> RangePartition:
    r = store.one("SELECT * FROM partitions WHERE id=?", (pid,))
    if r is None:
        raise BadInput(f"no partition with id {pid}")
    return _from_row(r)


def find_partition(store: "Store", table: str, attr: str, n: int | None = None) -> RangePartition | None:
    """Newest stored partition for table.attr (optionally with target n)."""
    sql = "SELECT * FROM partitions WHERE table_name=? AND attr=?"
    args: tuple = (table, attr)
    if n is not None:
        sql += " AND n_target=?"
        args += (n,)
    r = store.one(sql + " ORDER BY id DESC LIMIT 1", args)
    return _from_row(r) if r else None


def _from_row(r) -> RangePartition:
    return RangePartition(r["id"], r["table_name"], r["attr"], r["dtype"],
                          tuple(json.loads(r["boundaries_json"])), tuple(json.loads(r["sizes_json"])),
                          r["table_version"], r["n_target"])
