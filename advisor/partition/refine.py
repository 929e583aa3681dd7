"""Partitions at other granularities: the stored fine partition for a table version, coarser ones
derived from it, and storing a derived one so a sketch can refer to it."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import numpy as np

from advisor.partition.range_partition import (
    RangePartition,
    advance_partition,
    build_partition,
    load_partition,
)

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog


# ---------------- partitions per granularity ----------------
def fine_partition(catalog: Catalog, table: str, attr: str, n: int, version: int) -> RangePartition:
    """The stored partition with target ``n`` for this table version: stored, carried forward from an
    earlier version over small batches (``advance_partition``), or built."""
    r = catalog.store.one("SELECT id FROM partitions WHERE table_name=? AND attr=? AND n_target=? AND "
                          "table_version=? ORDER BY id DESC LIMIT 1", (table, attr, n, version))
    if r is not None:
        return load_partition(catalog.store, r["id"])
    return advance_partition(catalog, table, attr, n, version) or build_partition(catalog, table, attr, n, version)


def derive_partition(fine: RangePartition, n: int) -> RangePartition:
    """About ``n`` ranges from a finer partition: every k-th boundary, fragment sizes summed (id 0)."""
    m = len(fine.boundaries)
    if m + 1 <= n:
        return fine
    idx = sorted({int(round(j * (m + 1) / n)) - 1 for j in range(1, n)} & set(range(m)))
    cum = np.concatenate([[0], np.cumsum(fine.sizes[: m + 1])])
    starts, ends = [0] + [i + 1 for i in idx], idx + [m]
    sizes = [int(cum[e + 1] - cum[s]) for s, e in zip(starts, ends)] + [int(fine.sizes[m + 1])]
    return RangePartition(0, fine.table, fine.attr, fine.dtype, tuple(fine.boundaries[i] for i in idx),
                          tuple(sizes), fine.table_version, n)


def store_partition(catalog: Catalog, part: RangePartition) -> RangePartition:
    """Persist a derived partition (so a captured sketch can refer to it); stored ones pass through."""
    if part.id:
        return part
    with catalog.store.tx() as c:
        cur = c.execute("INSERT INTO partitions(table_name, attr, n_target, table_version, dtype, "
                        "boundaries_json, sizes_json, created) VALUES (?,?,?,?,?,?,?,?)",
                        (part.table, part.attr, part.n_target, part.table_version, part.dtype,
                         json.dumps(list(part.boundaries)), json.dumps(list(part.sizes)), time.time()))
        pid = cur.lastrowid
    return RangePartition(pid, part.table, part.attr, part.dtype, part.boundaries, part.sizes,
                          part.table_version, part.n_target)
