"""Value-aligned blocks of a clustered layout, so that a sketch's filter on it is one
``__blk IN (ids)`` whose generated code is the same for every sketch.

Why: a sketch's range filter is new SQL text at every capture and every maintained version, and
Spark compiles one class per text and runs it slowly until the JVM has compiled that class.  A
fresh 256-range filter for big_orders at TPC-H SF1 took 2.6-4.4 s against 1.5-1.7 s plain, the
same text repeated 0.9-1.3 s; as ``__blk IN (745 blocks)`` over the same layout, fresh every run,
0.68-1.31 s (BENCHMARKS.md).  ``IN`` over more than ten values is Spark's InSet: a hash
set the generated code refers to, so the code text does not depend on the ids and is compiled once;
Parquet gets it as an ``in`` predicate and skips pages by the block column's min/max.

A layout's rows, sorted on the attribute, are cut into blocks of about ``BLOCK_ROWS`` rows that
never split a value: block b holds the values in [starts[b], starts[b+1]) (the first block is open
below, the last above; NULLs are block ``NULL_BLOCK``).  The blocks are a range partition on the
attribute, so the blocks a sketch's fragments overlap are a sketch on a safe attribute that holds
the original one: safe (seed 001: attribute safety holds for every range partition; Lemma 5).
Rows inserted after the layout's version get their ids from the same function (``assign``),
written beside each insert file once (``ontop_file``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import math
import os
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from advisor.caches import IdentityMemo, memoize
from advisor.layout.skip_prediction import read_fraction_of
from advisor.partition.fragment_runs import runs
from advisor.plan.to_sql import in_lists
from advisor.warehouse import filesystem
from advisor.warehouse.value_kinds import kind_of

BLK = "__blk"
NULL_BLOCK = -1
BLOCK_ROWS = 1000        # the layout's page size (``layout.PAGE_ROWS``): one block about one page
MAX_IDS = 16384          # above this many ids the SQL text costs more to parse than the filter saves
STARTS_FILE = "_blocks.npy"   # Spark's file listing skips names starting with "_"
ONTOP_DIR = "_ontop"
EPOCH = dt.date(1970, 1, 1)
_BOUNDS = IdentityMemo("layout block bounds", 64)


def supported(dtype: str) -> bool:
    """Integer and date attributes: their values map exactly to int64 keys."""
    return kind_of(dtype) in ("int", "date")


def key_sql(column: str, dtype: str) -> str:
    """Spark SQL computing the int64 key of ``column`` (NULL stays NULL)."""
    return f"unix_date({column})" if kind_of(dtype) == "date" else f"CAST({column} AS BIGINT)"


def starts_from_counts(keys: np.ndarray, counts: np.ndarray, rows: int = BLOCK_ROWS) -> np.ndarray:
    """Block starts from the sorted distinct keys and their row counts: a new block begins at the
    first value whose preceding rows cross the next multiple of ``rows`` (a value holding more rows
    is a block of its own)."""
    keys = np.asarray(keys, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    if keys.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    keys, counts = keys[order], counts[order]
    before = np.cumsum(counts) - counts
    b = before // max(int(rows), 1)
    first = np.concatenate([[True], b[1:] != b[:-1]])
    return keys[first]


def assign(starts: np.ndarray, keys: np.ndarray, nulls: np.ndarray | None = None) -> np.ndarray:
    """Block id of each key (int32); values below the first start fall in block 0, NULLs in ``NULL_BLOCK``."""
    ids = np.searchsorted(starts, np.asarray(keys, dtype=np.int64), side="right") - 1
    ids = np.maximum(ids, 0).astype(np.int32)
    if nulls is not None:
        ids[np.asarray(nulls, dtype=bool)] = NULL_BLOCK
    return ids


def _key(v, dtype: str) -> int:
    """A (decoded) boundary as an int64 key: the smallest key >= v."""
    return (v - EPOCH).days if kind_of(dtype) == "date" else math.ceil(v)


def sketch_blocks(starts: np.ndarray, part, fragments) -> list[int]:
    """The sorted ids of the blocks holding a row of any of the sketch's fragments of ``part``."""
    ids: set[int] = set()
    last = max(len(starts) - 1, 0)
    for i, j in runs(frozenset(fragments), part):
        lo, hi = part.range_of(i)[0], part.range_of(j)[1]
        a = 0 if lo is None else int(assign(starts, [_key(lo, part.dtype)])[0])
        if hi is None:
            b = last
        else:
            b = int(assign(starts, [_key(hi, part.dtype) - 1])[0])  # the largest key < hi
        ids.update(range(a, b + 1))
    if part.null_id in fragments:
        ids.add(NULL_BLOCK)
    return sorted(ids)


def condition(starts: np.ndarray, part, fragments) -> str | None:
    """``__blk IN (...)`` for the sketch (``in_lists``: lists Parquet can take), ``false`` when it holds
    no row, None above ``MAX_IDS`` ids."""
    ids = sketch_blocks(starts, part, fragments)
    return None if len(ids) > MAX_IDS else ids_condition(ids)


def ids_condition(ids) -> str:
    """``__blk IN (ids)`` in lists Parquet can take, ``false`` for no id."""
    return in_lists(BLK, list(map(str, ids))) if ids else "false"


def typed_starts(starts: np.ndarray, dtype: str) -> list:
    """Block starts as the attribute's Python values (dates as dates), comparable with page statistics."""
    if kind_of(dtype) == "date":
        return [EPOCH + dt.timedelta(days=int(k)) for k in starts]
    return [int(k) for k in starts]


def read_fraction(units, starts: np.ndarray, dtype: str, ids) -> float:
    """Rows read / rows of the layout's units (pages of the attribute) under ``__blk IN (ids)``:
    the block partition's interior boundaries are the starts after the first."""

    bounds = _typed_bounds(starts, dtype)
    null_id = len(bounds) + 1  # a partition's NULL fragment follows its ranges
    frags = {null_id if i == NULL_BLOCK else i for i in ids}
    return read_fraction_of(units, bounds, frags, null_id)


def _typed_bounds(starts: np.ndarray, dtype: str) -> tuple:
    """The block partition's interior boundaries (starts after the first) as a tuple, the same
    tuple for the same (cached, read-only) starts, so read fractions convert them once."""

    return _BOUNDS.of(starts, lambda s: tuple(typed_starts(s, dtype)[1:]), name=f"_typed_bounds|{dtype}")


def load_starts(layout_path: str) -> np.ndarray | None:
    """The layout's block starts (read-only), or None for a layout written without blocks.  Cached
    per file and modification time: layouts are written under a temporary name and renamed whole."""
    p = f"{str(layout_path).rstrip('/')}/{STARTS_FILE}"
    if not filesystem.is_local(p):  # a layout on a Hadoop file system (``advisor.warehouse.filesystem``)
        if not filesystem.exists(p):
            return None
        return _load_starts(p, *filesystem.for_path(p).stamp(p))
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return None
    return _load_starts(p, st.st_mtime_ns, st.st_size)


@memoize("layout block starts", maxsize=32)
def _load_starts(path: str, mtime_ns: int, size: int) -> np.ndarray:
    arr = np.load(path if filesystem.is_local(path) else io.BytesIO(filesystem.for_path(path).read_bytes(path)),
                  allow_pickle=False)
    arr.setflags(write=False)
    return arr


def save_starts(directory: Path, starts: np.ndarray) -> None:
    """Write the starts into a layout directory still under its temporary name (renamed whole)."""
    buf = io.BytesIO()
    np.save(buf, np.asarray(starts, dtype=np.int64), allow_pickle=False)
    p = f"{str(directory).rstrip('/')}/{STARTS_FILE}"
    filesystem.for_path(p).write_bytes(p, buf.getvalue())


def arrow_keys(col, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(int64 keys with NULLs as 0, null mask) of a pyarrow column."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    nulls = col.is_null().to_numpy(zero_copy_only=False)
    if kind_of(dtype) == "date":
        col = col.cast(pa.int32())
    keys = pc.fill_null(col.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    return keys, nulls


def with_block_ids(t: pa.Table, attr: str, dtype: str, starts: np.ndarray) -> pa.Table:
    """Rows (an Arrow table) with their block ids (``assign``) as the ``BLK`` column."""
    keys, nulls = arrow_keys(t.column(attr), dtype)
    return t.append_column(BLK, pa.array(assign(starts, keys, nulls), type=pa.int32()))


def ontop_file(layout: dict, ins_path: str, attr: str, dtype: str, starts: np.ndarray) -> str:
    """A copy of one insert file with its rows' block ids, kept under the layout (insert files
    never change, so one copy per file and layout serves every later read)."""

    fs = filesystem.for_path(ins_path)  # local, or a Hadoop file system (``advisor.warehouse.filesystem``)
    stamp = fs.stamp(ins_path)
    name = str(Path(ins_path).resolve()) if filesystem.is_local(ins_path) else ins_path
    tag = hashlib.sha1(f"{name}|{stamp[1]}|{stamp[0]}".encode()).hexdigest()[:20]
    d = filesystem.location(layout["path"]) / ONTOP_DIR
    out = d / f"{tag}.parquet"
    if out.is_file():
        return str(out)
    d.mkdir(exist_ok=True)
    pf = filesystem.parquet_file(ins_path)
    t = with_block_ids(pf.read(), attr, dtype, starts)
    meta = pf.metadata.schema
    int96 = any(meta.column(i).physical_type == "INT96" for i in range(len(meta)))  # keep Spark's types
    tmp = d / f".{uuid.uuid4().hex}.tmp"
    filesystem.write_parquet(t, str(tmp), use_deprecated_int96_timestamps=int96)
    if filesystem.is_local(str(out)):
        tmp.replace(out)
    else:
        filesystem.for_path(str(out)).rename(str(tmp), str(out))
    return str(out)
