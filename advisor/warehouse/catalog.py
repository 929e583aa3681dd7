"""Versioned tables in the warehouse: a Parquet base plus insert/delete batches keyed by a stable row id,
or a Delta Lake table the warehouse reads in place (``advisor.warehouse.delta_source``).

Version 1 is the loaded base. Each applied batch adds a version with an insert file and a delete
file (the full deleted rows, so maintenance sees their values). Reading version v unions the
newest base <= v with the later inserts and anti-joins the later deletes on `_rid`. Compaction
writes a new base. Files are written under a temporary name of this process, then, holding the
warehouse's writer lock, renamed to a new name of their own and the SQLite row that makes the
version visible is committed (``advisor.warehouse.atomic``): a failed or killed apply leaves the
previous version intact and never touches another writer's files.  A batch or compaction prepared
against a version that another writer has moved past meanwhile is refused ("warehouse busy").

The three sides of a catalog live in their own modules: ``catalog_versions`` (tables and their
versions), ``catalog_reads`` and ``catalog_writes``; ``Catalog`` combines them with Spark.
"""

from __future__ import annotations

import hashlib

from advisor.warehouse import filesystem, ownership, stored_paths
from advisor.warehouse.catalog_writes import TableWrites
from advisor.warehouse.store import Store


class Catalog(TableWrites):
    """Tables, versions, snapshot reads and deltas for one warehouse directory."""
    def __init__(self, spark, store: Store):
        self.spark = spark
        self.store = store
        ownership.claim(store, spark)  # a warehouse URI is written by one store only
        self.root = _tables_root(store)
        self.root.mkdir(parents=True, exist_ok=True)
        self.pins: dict[str, int] = {}
        self._frames: dict = {}  # ``parquet``: DataFrames over unchanged files
        self._sources: dict = {}  # ``source``: where an imported table lives

    @classmethod
    def offline(cls, store: Store) -> "Catalog":
        """A catalog for reading the store's metadata only (tables, versions): no Spark session."""
        cat = cls.__new__(cls)
        cat.spark, cat.store, cat.root, cat.pins, cat._frames = None, store, _tables_root(store), {}, {}
        cat._sources = {}
        return cat

    def pin(self, table: str, version: int) -> None:
        """Make `version` the table's current version for this catalog object: later versions stay
        invisible (replay applies every update batch once up front, then moves the pins forward so
        each strategy sees the same versions in the same order)."""
        self.pins[self.require(table)] = int(version)

    @property
    def view_prefix(self) -> str:
        """Temp-view namespace of this warehouse: one Spark session may serve several warehouses."""
        return "w" + hashlib.sha1(str(self.store.warehouse.resolve()).encode()).hexdigest()[:8]

    def view_name(self, table: str, version: int, suffix: str = "") -> str:
        return f"{self.view_prefix}_{table}__v{version}{suffix}"

    def drop_views(self, table: str | None = None) -> None:
        """Forget cached temp views of a table (after it is dropped or replaced), or with no table
        every view of this warehouse (a throwaway store being deleted)."""
        prefix = f"{self.view_prefix}_{table}__" if table else f"{self.view_prefix}_"
        for t in self.spark.catalog.listTables():
            if t.isTemporary and t.name.startswith(prefix):
                self.spark.catalog.dropTempView(t.name)


def _tables_root(store: Store):
    """The directory of the warehouse's tables: a local ``Path``, or a ``RemotePath`` on a Hadoop
    file system (``advisor.warehouse.filesystem``)."""
    return filesystem.location(stored_paths.join(store.root, "tables"))
