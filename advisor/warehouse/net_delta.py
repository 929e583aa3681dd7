"""Net deltas: runs of update batches folded into one insert file and one delete file, so a read
brought from a base or layout version to a later one opens a few files instead of two per batch.

A snapshot is its base (or a clustered layout) plus every later batch's inserts, minus every later
batch's deletes (``catalog._assemble``).  After 40 batches that is 80 small files per scan; at TPC-H
SF1 a sketched big_orders run over a layout took 0.85-1.29 s with them and 0.51-0.79 s with one
merged pair, a plain run 1.76-2.25 s against 1.44-1.50 s (BENCHMARKS.md).

Which runs: the versions after ``from`` are cut like a binary counter into aligned blocks of
1, 2, 4, ... batches counted from ``from`` (40 batches: a block of 32 and one of 8), so a block,
once written, serves every later read from the same version and is never rewritten: storage grows
as n log n in the batches, and a read opens two delta files per set bit of n (a single batch
written as several files, more).

A block is net: its inserts minus the rows deleted later in the block, and its deletes minus those
of rows it inserted.  Reading blocks side by side (union of inserts, anti-join on all deletes) is
exact because row ids only grow: a later block never deletes a row it did not see, and an earlier
block never deletes a later block's inserts.  Blocks are written with pyarrow (~0.07 s for 40k rows,
no Spark job), keeping the batch files' Parquet schema and Spark's row metadata, so Spark reads the
same column types.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.compute as pc

from advisor.warehouse import atomic, filesystem
from advisor.warehouse.lock import writer_lock
from advisor.warehouse.table_files import RID, parquet_files, read_columns

SPARK_META = b"org.apache.spark.sql.parquet.row.metadata"


def blocks(start: int, end: int) -> list[tuple[int, int]]:
    """Cut the versions (start, end] into aligned power-of-two blocks counted from ``start``,
    largest first: (1, 41] -> (1, 33], (33, 41]."""
    out, lo = [], start
    while lo < end:
        size = 1
        while (lo - start) % (size * 2) == 0 and lo + size * 2 <= end:
            size *= 2
        out.append((lo, lo + size))
        lo += size
    return out


def _files(path: str | None) -> list[str]:
    return parquet_files([path])


def delta_files(catalog, name: str, start: int, batches: list) -> tuple[list[str], list[str]]:
    """(insert files, delete files) bringing ``name`` from version ``start`` over ``batches`` (its
    versions after ``start``, in order): single batches as written, longer aligned runs as their
    net block (written on first use).  ``catalog`` is the table's ``Catalog``, which imports this
    module."""
    if not batches:
        return [], []
    by_version = {b.version: b for b in batches}
    ins, dels = [], []
    for lo, hi in blocks(start, batches[-1].version):
        run = [by_version[v] for v in range(lo + 1, hi + 1) if v in by_version]
        if len(run) == 1:
            ins += _files(run[0].ins_path)
            dels += _files(run[0].del_path)
        elif run:
            i, d = _block(catalog, name, lo, hi, run)
            ins += _files(i)
            dels += _files(d)
    return ins, dels


def _block(catalog, name: str, lo: int, hi: int, run: list) -> tuple[str | None, str | None]:
    """The stored net block (lo, hi] of ``name``, written now if missing."""
    store = catalog.store
    found = _stored_block(store, name, lo, hi)
    if found is not None:
        return found
    ins_tab, del_ids, meta = _net(run)
    final = catalog.root / name / atomic.unique(f"net_v{lo:06d}_v{hi:06d}")
    tmp = catalog.root / name / atomic.tmp_name("net")
    tmp.mkdir(parents=True)
    try:
        ins_path = _write(ins_tab, tmp / "ins", meta) if ins_tab is not None and ins_tab.num_rows else None
        del_path = _write(del_ids, tmp / "del", None) if del_ids is not None and del_ids.num_rows else None
        ins_path = str(final / "ins") if ins_path else None
        del_path = str(final / "del") if del_path else None
        with writer_lock(store.warehouse):
            found = _stored_block(store, name, lo, hi)
            if found is not None:
                return found  # another writer stored the block meanwhile
            atomic.publish(tmp, final)
            with store.tx() as c:
                c.execute("INSERT OR REPLACE INTO net_deltas VALUES (?,?,?,?,?,?,?,?)",
                          (name, lo, hi, store.stored(ins_path), store.stored(del_path), 0 if ins_tab is None else ins_tab.num_rows,
                           0 if del_ids is None else del_ids.num_rows, time.time()))
    finally:
        atomic.remove(tmp)
    return ins_path, del_path


def _stored_block(store, name: str, lo: int, hi: int) -> tuple[str | None, str | None] | None:
    """(insert dir, delete dir) of the stored net block (lo, hi] of ``name`` if its files are there."""
    r = store.one("SELECT ins_path, del_path FROM net_deltas WHERE table_name=? AND from_version=? "
                  "AND to_version=?", (name, lo, hi))
    if r is None:
        return None
    paths = store.resolve(r["ins_path"]), store.resolve(r["del_path"])
    return paths if all(p is None or filesystem.exists(p) for p in paths) else None


def _net(run: list):
    """(net inserts, net delete ids, the insert files' schema metadata plus whether they hold INT96
    timestamps) of consecutive batches."""

    ins_files = [f for b in run for f in _files(b.ins_path)]
    del_files = [f for b in run for f in _files(b.del_path)]
    ins = read_columns(ins_files, None) if ins_files else None
    dels = read_columns(del_files, [RID]).column(RID).combine_chunks() if del_files else None
    meta = None
    if ins_files:
        first = filesystem.parquet_file(ins_files[0])
        pschema = first.metadata.schema
        meta = dict(first.schema_arrow.metadata or {})
        meta[b"int96"] = b"1" if any(pschema.column(i).physical_type == "INT96" for i in range(len(pschema))) else b""
    if ins is not None and dels is not None:
        gone = pc.is_in(ins.column(RID), value_set=dels)
        dels = pc.filter(dels, pc.invert(pc.is_in(dels, value_set=ins.column(RID))))
        ins = ins.filter(pc.invert(gone))
    return ins, (pa.table({RID: dels}) if dels is not None else None), meta


def _write(tab, directory, meta) -> str:
    """One Parquet file of ``tab`` in ``directory``, in the batch files' physical types (INT96
    timestamps stay INT96) and with Spark's row metadata, so Spark reads back the same schema."""

    directory.mkdir()
    if meta:
        tab = tab.replace_schema_metadata({k: v for k, v in meta.items() if k == SPARK_META})
    int96 = bool(meta and meta.get(b"int96"))
    filesystem.write_parquet(tab, str(directory / "part-0.parquet"), use_deprecated_int96_timestamps=int96)
    return str(directory)

