"""Clustered copies of a table for skipping: sorted on one attribute, written as a few large files
of small Parquet row groups (Spark skips row groups by their min/max, and pages by the column
index), with a per-file min/max manifest.  Few files because opening one costs ~10-20 ms per scan:
211 files of 30k rows read in 3.6 s what 4 files read in 2.3 s and the 2 base files in 1.3 s (SF1,
BENCHMARKS.md).

A layout is a snapshot at one table version; reads at a later version add that version's
insert/delete batches on top (catalog.read_on_top; of a Delta table read in place, its net change:
``advisor.warehouse.delta_copies``), so a layout never serves stale rows.  The copy of a Delta table
lives in the advisor's warehouse: the user's table is never written.  Each build
writes a directory of its own (``advisor.warehouse.atomic``): a rebuild never touches the files an
older layout row names, and once the new row is committed the older rows of the same table,
attribute and version are dropped, then their files.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterable
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import functions as F

from advisor.errors import BadInput
from advisor.layout import blocks
from advisor.layout import arrow_copy
from advisor.layout.arrow_copy import key_ranges
from advisor.layout.registry import covers, layout_row
from advisor.layout.skip_prediction import stat_values
from advisor.warehouse import atomic, filesystem
from advisor.warehouse.lock import writer_lock
from advisor.warehouse.table_files import RID
from advisor.warehouse.value_kinds import encode_value, kind_of

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog

# 1 MiB row groups (~7,200 lineitem rows).  Finer groups skip more rows but every scan parses every
# group's footer entry: at TPC-H SF1 (files of 1M rows) 128 KiB groups made the replay's sketched
# runs 2-3x slower than 1 MiB ones over the same rows and filters (0.5-0.9 s vs 0.2-0.35 s), though
# they read 7 % of a demo-size table where 1 MiB read 38 % (BENCHMARKS.md).
ROW_GROUP_BYTES = 1 << 20
# Parquet pages of at most this many rows inside those row groups (None: parquet-mr's default, about
# one page per row group).  Spark's reader skips pages by the column index (their min/max) as well:
# with 1,000-row pages a big_orders sketch of 57 orders at SF1 read 57,000 rows instead of the
# 390,894 of its 57 row groups (BENCHMARKS.md).  parquet-mr cuts the sorted column's
# pages every this many rows from each row group's start (the first after at least 100), which
# ``skipping._page_units`` models as the read units of the layout's own attribute: the predicted
# rows equal Spark's for 1k, 2k and 4k pages at SF1 and in ``tests/layout/test_page_units.py``.  The
# manifest records it per file.
PAGE_ROWS: int | None = 1000
# Copies of local tables small enough are written on the driver (``arrow_copy``), else by Spark.
ARROW_BUILD = True


def build_layout(catalog: Catalog, table: str, attr: str, version: int | None = None,
                 rows_per_file: int = 1_000_000, then: str | None = None,
                 columns: Iterable[str] | None = None) -> dict:
    """Write the clustered copy and its manifest; returns the stored layout row as a dict.  ``then``
    orders rows within each value of ``attr`` (a two-attribute sketch led by ``attr`` then skips on
    both columns' min/max; ``advisor.selection.attribute_pairs``).  With ``columns`` the copy is
    narrow: only those columns (and ``attr``, ``then``), so it costs a fraction of a full layout
    and serves the queries that read no other column (``registry.covers``)."""

    table = catalog.require(table)
    if rows_per_file < 1:
        raise BadInput(f"--rows-per-file must be >= 1, got {rows_per_file}")
    if catalog.is_delta(table) and not catalog.key(table):
        raise BadInput(f"Delta table {table!r} has no declared key: a copy of it could not follow its commits "
                       "(declare one with --key, or cluster the table itself: OPTIMIZE ... ZORDER BY)")
    attr = attr.lower()
    dtype = catalog.column_type(table, attr)
    v = catalog.version(table, version)
    kept = None
    if columns is not None:
        for c in columns:
            catalog.column_type(table, c.lower())  # an unknown column is bad input
        kept = sorted({c.lower() for c in columns} | {attr} | ({then.lower()} if then else set()))
    if then is not None:
        catalog.column_type(table, then.lower())  # an unknown column is bad input
    rows_per_file = max(rows_per_file, -(-v.rows // 200))  # at most ~200 files
    out = catalog.root / table / atomic.unique(f"{'narrow' if kept else 'layout'}_{attr}_v{v.version:06d}")
    tmp = catalog.root / table / atomic.tmp_name("layout")
    try:
        driver = on_driver(catalog, table, attr, v.version, kept)
        if driver:
            manifest = _write_copy_arrow(catalog, table, v.version, kept, attr, dtype, rows_per_file, then, tmp)
        else:
            df = catalog.read(table, v.version, with_rid=True)
            df = df.select(*kept, RID) if kept is not None else df
            manifest = _write_copy(catalog, df, table, attr, dtype, rows_per_file, then, tmp)
        atomic.crash_point("layout.written")
        with writer_lock(catalog.store.warehouse):
            atomic.publish(tmp, out)
            atomic.crash_point("layout.renamed")
            with catalog.store.tx() as c:
                same = "table_name=? AND attr=? AND table_version=?"
                key = (table, attr, v.version)
                new = {"columns": kept}
                replaced = [r for r in c.execute(f"SELECT id, path, columns_json FROM layouts WHERE {same}",
                                                 key).fetchall()
                            if covers(new, json.loads(r["columns_json"]) if r["columns_json"] else None)]
                older = [catalog.store.resolve(r["path"]) for r in replaced]
                c.executemany("DELETE FROM layouts WHERE id=?", [(r["id"],) for r in replaced])
                cur = c.execute("INSERT INTO layouts(table_name, attr, table_version, path, manifest_json, "
                                "created, columns_json) VALUES (?,?,?,?,?,?,?)",
                                (*key, catalog.store.stored(out), json.dumps(manifest), time.time(),
                                 json.dumps(kept) if kept is not None else None))
                lid = cur.lastrowid
            atomic.crash_point("layout.committed")
            for p in older:  # a copied store's rows may name another warehouse's files: those stay
                if str(filesystem.location(p).resolve().parent) == str(out.resolve().parent):
                    atomic.remove(p)
    except BaseException:
        atomic.remove(tmp)
        if catalog.store.one("SELECT 1 FROM layouts WHERE path=?", (catalog.store.stored(out),)) is None:
            atomic.remove(out)
        raise
    return layout_row(catalog.store, catalog.store.one("SELECT * FROM layouts WHERE id=?", (lid,))) | {
        "built_on": "driver" if driver else "spark"}


def on_driver(catalog: Catalog, table: str, attr: str, version: int | None = None, columns=None) -> bool:
    """Whether a copy of ``table`` on ``attr`` (narrow: ``columns``) is written on the driver
    (``arrow_copy``): a local warehouse, a table small enough to hold decoded, an attribute whose
    footer statistics give its manifest, and columns whose types round-trip through Arrow."""
    if not ARROW_BUILD or catalog.store.remote or not filesystem.is_local(str(catalog.root)):
        return False
    if catalog.is_delta(table) and not filesystem.is_local(catalog.source(table)["location"]):
        return False
    if kind_of(catalog.column_type(table, attr)) not in ("int", "dec", "date", "str"):
        return False  # the manifest is read from footers, whose float statistics leave NaN out
    schema = catalog.schema(table)
    cols = sorted(set(columns) | {attr}) if columns is not None else [c for c, _ in schema]
    v = catalog.version(table, version)
    share = len(cols) / max(len(schema), 1)
    return (v.rows <= arrow_copy.MAX_ROWS and v.bytes * share <= arrow_copy.MAX_BYTES
            and arrow_copy.supported(dict(schema), cols))


def _write_copy_arrow(catalog: Catalog, table: str, version: int, kept, attr: str, dtype: str, rows_per_file: int,
                      then: str | None, tmp) -> list[dict]:
    """The driver's build (``arrow_copy``) into ``tmp``: the same sort, blocks and files as
    ``_write_copy``, its pages recorded as read from the files' page index."""
    t = catalog.read_arrow(table, version, kept, with_rid=True)
    order = [attr] + ([then.lower()] if then else []) + [RID]
    page_rows = PAGE_ROWS or blocks.BLOCK_ROWS
    starts = arrow_copy.write_copy(t, attr, dtype, order, rows_per_file, tmp, page_rows,
                                   min(page_rows, max(1, rows_per_file // 4)), ROW_GROUP_BYTES)
    if starts is not None:
        blocks.save_starts(tmp, starts)
    return [{**{k: m[k] for k in m if k != "page_rows"}, "pages": "index"} for m in _footer_manifest(tmp, attr)]


def _write_copy(catalog: Catalog, df, table: str, attr: str, dtype: str, rows_per_file: int, then: str | None,
                tmp) -> list[dict]:
    """Write the sorted copy of ``df`` into the directory ``tmp``; returns its manifest with each
    file's name relative to the directory."""
    # The files are a function of the data alone: one sorted stream cut every `rows_per_file` rows,
    # or, for integer and date attributes, contiguous key ranges of at most `rows_per_file` rows cut
    # at value boundaries from the exact value counts (``key_ranges``) and written in parallel.
    # (repartitionByRange draws its bounds from a sample seeded by the RDD id, so two builds of the
    # same table gave different files -- and different bytes/rows read for the same sketch.)
    order = [attr] + ([then.lower()] if then else []) + [RID]
    starts, parts = None, 1
    if blocks.supported(dtype):
        block_rows = min(PAGE_ROWS or blocks.BLOCK_ROWS, max(1, rows_per_file // 4))
        df, starts, parts = with_blocks(df, attr, dtype, block_rows, rows_per_file)
    sorted_rows = (df.repartition(parts, PART) if parts > 1 else df.repartition(1)).sortWithinPartitions(*order)
    (sorted_rows.drop(PART).write.option("maxRecordsPerFile", rows_per_file)
        .option("parquet.block.size", ROW_GROUP_BYTES)
        .options(**({"parquet.page.row.count.limit": PAGE_ROWS} if PAGE_ROWS else {})).parquet(str(tmp)))
    if starts is not None:
        blocks.save_starts(tmp, starts)
    # footers give what Spark would (floats: NaN is no statistic; timestamps: Spark's naive values)
    if kind_of(dtype) in ("int", "dec", "date", "str") and filesystem.is_local(str(tmp)):
        return _footer_manifest(tmp, attr)
    back = catalog.spark.read.parquet(str(tmp)).withColumn("__file", F.input_file_name())
    col = F.col(attr)
    valid = col.isNotNull()
    if kind_of(dtype) == "float":
        valid = valid & ~F.isnan(col)
    stats = back.groupBy("__file").agg(
        F.min(F.when(valid, col)).alias("mn"), F.max(F.when(valid, col)).alias("mx"),
        F.sum(F.when(valid, 0).otherwise(1)).alias("nulls"), F.count(F.lit(1)).alias("rows")).collect()
    manifest = [{"path": unquote(urlparse(r["__file"]).path).rsplit("/", 1)[-1], "min": encode_value(r["mn"]),
                 "max": encode_value(r["mx"]), "nulls": int(r["nulls"]), "rows": int(r["rows"]),
                 **({"page_rows": PAGE_ROWS} if PAGE_ROWS else {})} for r in stats]
    manifest.sort(key=lambda m: m["path"])
    return manifest


def _footer_manifest(directory, attr: str) -> list[dict]:
    """The manifest from the written files' footers (per file: min, max and NULLs of ``attr`` over
    its row groups, rows), with no second pass over the copy."""
    out = []
    for f in sorted(Path(filesystem.local_path(str(directory))).glob("*.parquet")):
        md = pq.ParquetFile(str(f)).metadata
        idx = next((k for k in range(md.num_columns) if md.schema.column(k).path == attr), None)
        lo = hi = None
        nulls = rows = 0
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            rows += rg.num_rows
            st = rg.column(idx).statistics
            nulls += st.null_count if st is not None and st.has_null_count else 0
            if st is not None and st.has_min_max:
                a, b = stat_values(st)
                lo = a if lo is None or a < lo else lo
                hi = b if hi is None or b > hi else hi
        out.append({"path": f.name, "min": encode_value(lo), "max": encode_value(hi), "nulls": int(nulls),
                    "rows": int(rows), **({"page_rows": PAGE_ROWS} if PAGE_ROWS else {})})
    return out


PART = "__part"   # the hash-partitioning label of a row's key range while the copy is written


def with_blocks(df, attr: str, dtype: str, rows: int, rows_per_file: int | None = None):
    """(``df`` with its value-aligned block id column (``advisor.layout.blocks``), the block starts, the
    number of write partitions).  The starts come from the attribute's value counts (one aggregation,
    collected as Arrow); each distinct key's block id is ``blocks.assign`` of it, the function that
    also numbers later inserts, joined back to the rows as a broadcast key map.  (A Python UDF over
    every row made a TPC-H SF1 lineitem layout 3-4x slower to write than the copy without ids.)
    With ``rows_per_file`` the map also gives each key a partition label (``partition_labels``) such
    that hash-partitioning by it sends key range p, about ``rows_per_file`` rows cut at a value
    boundary, to partition p; otherwise one partition."""

    spark = df.sparkSession
    key = F.expr(blocks.key_sql(f"`{attr}`", dtype))
    counts = df.select(key.alias("k")).where("k IS NOT NULL").groupBy("k").count().toArrow()
    keys = counts.column("k").to_numpy()
    order = np.argsort(keys, kind="stable")
    keys, n = keys[order], counts.column("count").to_numpy()[order]
    starts = blocks.starts_from_counts(keys, n, rows)
    cols = {"__k": pa.array(keys, type=pa.int64()),
            blocks.BLK: pa.array(blocks.assign(starts, keys), type=pa.int32())}
    ranges = key_ranges(n, rows_per_file) if rows_per_file else np.zeros(len(keys), dtype=np.int64)
    parts = int(ranges.max()) + 1 if len(ranges) else 1
    labels = partition_labels(spark, parts)
    cols[PART] = pa.array(labels[ranges], type=pa.int64())
    kmap = spark.createDataFrame(pa.table(cols))
    out = (df.join(F.broadcast(kmap), key == F.col("__k"), "left").drop("__k")
             .withColumn(blocks.BLK, F.coalesce(F.col(blocks.BLK), F.lit(blocks.NULL_BLOCK)))
             .withColumn(PART, F.coalesce(F.col(PART), F.lit(int(labels[0])))))  # NULLs sort first
    return out, starts, parts


def partition_labels(spark, parts: int) -> np.ndarray:
    """For p in 0..parts-1 the smallest bigint whose Spark hash (Murmur3, as ``repartition(n, col)``
    partitions by) falls in partition p: rows labelled so land in exactly that partition."""
    if parts <= 1:
        return np.zeros(1, dtype=np.int64)
    rows = (spark.range(0, 64 * parts).select("id", F.pmod(F.hash("id"), F.lit(parts)).alias("p"))
            .groupBy("p").agg(F.min("id").alias("id")).collect())
    labels = np.full(parts, -1, dtype=np.int64)
    for r in rows:
        labels[int(r["p"])] = int(r["id"])
    if (labels < 0).any():
        raise RuntimeError(f"no hash label found for some of {parts} partitions")
    return labels


def drop_layout(catalog: Catalog, layout_id: int) -> None:
    """Remove a layout's row, then its files (a reader holding the row keeps working until then)."""
    with writer_lock(catalog.store.warehouse):
        r = catalog.store.one("SELECT path FROM layouts WHERE id=?", (layout_id,))
        if r is None:
            return
        with catalog.store.tx() as c:
            c.execute("DELETE FROM layouts WHERE id=?", (layout_id,))
        atomic.remove(catalog.store.resolve(r["path"]))


def layout_bytes(lay: dict) -> int:
    """Bytes a stored layout's Parquet files take."""
    return int(filesystem.for_path(lay["path"]).size(lay["path"]))
