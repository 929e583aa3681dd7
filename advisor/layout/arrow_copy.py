"""Sorted copies written on the driver with pyarrow: the same files a Spark build writes (sorted on
the attribute, cut into value-aligned blocks and key-range files), without a shuffle.

Why: a copy's Spark build counts the keys, joins the block ids back, shuffles by key range and
sorts: 4-8 plain scans of a TPC-H SF1 query reading two lineitem columns.  Read as Arrow (the
table's own files plus its batches, ``Catalog.read_arrow``), sorted with numpy and written by two
threads, the copy costs about one read and one write of its columns.  The files carry a Parquet
page index (column index + offset index) with pages of ``page_rows`` rows, which Spark's reader
skips by, and ``skip_prediction`` reads the same index back to predict what a sketch reads.

>>> import pyarrow as pa
>>> t = pa.table({"k": [3, 1, None, 2, 1], "v": [30, 10, 0, 20, 11], "_rid": [0, 1, 2, 3, 4]})
>>> sorted_order(t, ["k", "_rid"]).tolist()      # NULLs first, as Spark sorts ascending
[2, 1, 4, 3, 0]
>>> sorted_order(t.take([4, 3, 2, 1, 0]), ["k", "_rid"]).tolist()   # row ids not ascending: Arrow's sort
[2, 3, 0, 1, 4]
>>> import datetime as dt
>>> d = pa.table({"d": [dt.date(2020, 1, 3), None, dt.date(2020, 1, 1)], "_rid": [0, 1, 2]})
>>> sorted_order(d, ["d", "_rid"]).tolist()
[1, 2, 0]
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from advisor.layout import blocks
from advisor.warehouse import filesystem
from advisor.warehouse.value_kinds import kind_of

# Column kinds whose Arrow round trip gives Spark the same types it wrote (timestamps stay with the
# Spark build: a zone-less Arrow timestamp would come back as TIMESTAMP_NTZ).
KINDS = ("int", "dec", "float", "date", "str", "bool")
WRITERS = 2
# Tables copied on the driver when they are this small (the decoded columns take ~5x their bytes).
MAX_ROWS = 12_000_000
MAX_BYTES = 768 << 20


def supported(types: dict, columns) -> bool:
    """Whether every one of ``columns`` (``{column: Spark type}``) round-trips through Arrow unchanged."""
    return all(kind_of(types[c]) in KINDS for c in columns)


def sorted_order(t: pa.Table, order: list) -> np.ndarray:
    """Row indices sorting ``t`` ascending on ``order`` (first key first), NULLs first."""
    fast = _stable_order(t, order)
    if fast is not None:
        return fast
    return pc.sort_indices(t, sort_keys=[(c, "ascending") for c in order], null_placement="at_start").to_numpy()


def _stable_order(t: pa.Table, order: list) -> np.ndarray | None:
    """The same order by one stable numpy sort, for an integer or date key followed by a row id the
    rows already ascend in (a table read in its files' order): Arrow's two-key sort of TPC-H SF1's
    lineitem on (l_suppkey, _rid) took 3x numpy's, and a key spanning fewer than 2^16 values sorts
    by radix.  None when the table is not of that form."""
    if len(order) != 2 or t.num_rows < 2:
        return None
    col = t.column(order[0])
    if not (pa.types.is_integer(col.type) or pa.types.is_date32(col.type)):
        return None
    rid = t.column(order[1]).to_numpy()
    if not (rid[1:] > rid[:-1]).all():
        return None
    col = col.combine_chunks()
    if pa.types.is_date32(col.type):
        col = col.cast(pa.int32())
    nulls = col.is_null().to_numpy(zero_copy_only=False)
    keys = pc.fill_null(col.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    live = np.flatnonzero(~nulls)
    k = keys[live]
    if k.size:
        span = int(k.max()) - int(k.min())
        k = (k - k.min()).astype(np.uint16 if span < 1 << 16 else np.uint32 if span < 1 << 32 else np.int64)
    return np.concatenate([np.flatnonzero(nulls), live[np.argsort(k, kind="stable")]])


def key_ranges(counts: np.ndarray, rows_per_file: int) -> np.ndarray:
    """The key range (0, 1, ...) of each sorted distinct key with ``counts`` rows: consecutive keys
    packed greedily into ranges of at most ``rows_per_file`` rows (a value holding more is a range of
    its own, whose files the writer cuts every ``rows_per_file`` rows); a value never spans two ranges.

    >>> key_ranges(np.array([3, 3, 3, 3, 3, 2, 3]), 10).tolist()
    [0, 0, 0, 1, 1, 1, 2]
    >>> key_ranges(np.array([400, 20, 40, 400, 1]), 100).tolist()   # values larger than a file
    [0, 1, 1, 2, 3]
    """
    counts = np.asarray(counts, dtype=np.int64)
    out = np.zeros(len(counts), dtype=np.int64)
    ends = np.cumsum(counts)
    r, i, p = max(int(rows_per_file), 1), 0, 0
    while i < len(counts):  # one step per range: the last key whose rows still fit
        before = ends[i] - counts[i]
        j = max(i, int(np.searchsorted(ends, before + r, side="right")) - 1)
        out[i:j + 1] = p
        i, p = j + 1, p + 1
    return out


def file_cuts(counts: np.ndarray | None, nulls: int, rows: int, rows_per_file: int) -> list[tuple[int, int]]:
    """(start, end) row slices of the sorted copy's files: the NULL rows (first) and then contiguous
    key ranges of at most ``rows_per_file`` rows cut at value boundaries (``counts``: rows per
    sorted distinct key), or cuts every ``rows_per_file`` rows when there are no counts.

    >>> file_cuts(np.array([3, 3, 3, 3]), 0, 12, 7)
    [(0, 6), (6, 12)]
    >>> file_cuts(None, 0, 10, 4)
    [(0, 4), (4, 8), (8, 10)]
    """
    if counts is None:
        return [(a, min(a + rows_per_file, rows)) for a in range(0, rows, max(rows_per_file, 1))]
    cuts = []
    if nulls:
        cuts.append((0, nulls))
    if len(counts):
        ranges = key_ranges(counts, rows_per_file)
        ends = np.cumsum(counts) + nulls
        last = np.flatnonzero(np.append(ranges[1:] != ranges[:-1], True))
        start = nulls
        for i in last.tolist():
            end = int(ends[i])
            while end - start > rows_per_file:  # a value larger than a file: cut every rows_per_file rows
                cuts.append((start, start + rows_per_file))
                start += rows_per_file
            cuts.append((start, end))
            start = end
    return cuts


def write_copy(t: pa.Table, attr: str, dtype: str, order: list, rows_per_file: int, out,
               page_rows: int, block_rows: int, group_bytes: int) -> np.ndarray | None:
    """Write ``t`` sorted on ``order`` into the directory ``out`` as Parquet files of at most
    ``rows_per_file`` rows with pages of ``page_rows`` rows and row groups of about ``group_bytes``;
    returns the block starts (integer and date attributes, whose ``blocks.BLK`` column of blocks
    of about ``block_rows`` rows is added) or None."""

    # the source files' Spark schema metadata would name columns the copy lacks: Spark reads it first
    t = t.take(pa.array(sorted_order(t, order))).replace_schema_metadata(None)
    n = t.num_rows
    starts = counts = None
    nulls = int(t.column(attr).null_count)
    if blocks.supported(dtype):
        keys, null_mask = blocks.arrow_keys(t.column(attr), dtype)
        vals = keys[nulls:]
        edge = np.flatnonzero(np.diff(vals)) + 1 if len(vals) else np.zeros(0, np.int64)
        first = np.concatenate([[0], edge]).astype(np.int64) if len(vals) else np.zeros(0, np.int64)
        counts = np.diff(np.append(first, len(vals)))
        starts = blocks.starts_from_counts(vals[first], counts, block_rows)
        t = t.append_column(blocks.BLK, pa.array(blocks.assign(starts, keys, null_mask), type=pa.int32()))
    cuts = file_cuts(counts, nulls, n, rows_per_file) if n else []
    per_row = max(t.nbytes / max(n, 1), 1.0)
    group_rows = max(page_rows, int(group_bytes / per_row) // page_rows * page_rows)
    Path(filesystem.local_path(str(out))).mkdir(parents=True, exist_ok=True)

    def one(k: int) -> None:
        a, b = cuts[k]
        pq.write_table(t.slice(a, b - a), f"{filesystem.local_path(str(out))}/part-{k:05d}.parquet",
                       row_group_size=group_rows, write_page_index=True, data_page_size=1,
                       write_batch_size=page_rows, store_decimal_as_integer=True, compression="snappy")

    with ThreadPoolExecutor(WRITERS) as pool:
        list(pool.map(one, range(len(cuts))))
    return starts
