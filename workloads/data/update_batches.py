"""Update batches for a table: inserts copied from existing rows (new row ids on apply) and
deletes of distinct existing row ids, deterministic per seed. Written as a Parquet batch file
in the format `advisor data apply` reads (an `op` column, `_rid` for deletes)."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from advisor.errors import BadInput

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog


def batch_frames(catalog: Catalog, table: str, inserts: int, deletes: int, seed: int = 0):
    """(insert rows without _rid, delete ids) as Spark DataFrames; not yet applied."""
    table = catalog.require(table)
    if inserts < 0 or deletes < 0:
        raise BadInput("--inserts and --deletes must be >= 0")
    cur = catalog.read(table, with_rid=True)
    rows = catalog.version(table).rows
    if deletes > rows:
        raise BadInput(f"cannot delete {deletes} rows from {table} ({rows} rows)")
    cols = [c for c, _ in catalog.schema(table)]

    def pick(n: int, s: int):
        frac = min(1.0, 3.0 * n / max(1, rows) + 0.001)
        return cur.sample(False, frac, seed=s).orderBy(F.rand(s)).limit(n)

    # materialized once: applying a batch counts, checks and writes each frame, and every action on
    # a lazy sample re-read the whole table
    ins = pick(inserts, seed).select(*cols).localCheckpoint() if inserts else None
    dels = pick(deletes, seed + 7919).select("_rid").localCheckpoint() if deletes else None
    return ins, dels


def make_batch(catalog: Catalog, table: str, inserts: int, deletes: int, out: str, seed: int = 0) -> str:
    """Write a batch file to `out` (a Parquet directory), atomically; returns its path."""
    ins, dels = batch_frames(catalog, table, inserts, deletes, seed)
    cols = [c for c, _ in catalog.schema(table)]
    schema = dict(catalog.schema(table))
    parts = []
    if ins is not None:
        parts.append(ins.select(F.lit("insert").alias("op"), F.lit(None).cast("long").alias("_rid"), *cols))
    if dels is not None:
        parts.append(dels.select(F.lit("delete").alias("op"), "_rid",
                                 *[F.lit(None).cast(schema[c]).alias(c) for c in cols]))
    if not parts:
        raise BadInput("a batch needs at least one insert or delete")
    df = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    dst = Path(out)
    tmp = dst.with_name(f".tmp-{uuid.uuid4().hex}")
    df.coalesce(1).write.parquet(str(tmp))
    if dst.exists():
        shutil.rmtree(dst)
    tmp.rename(dst)
    return str(dst)
