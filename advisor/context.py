"""Per-command context: warehouse (a directory or a Hadoop file system URI), store, lazily started
Spark session and catalog."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from advisor.engine.session import build_session
from advisor.warehouse.catalog import Catalog
from advisor.warehouse.store import Store


def default_warehouse() -> Path:
    return Path(os.environ.get("ADVISOR_HOME", "./.advisor"))


class Context:
    """Holds what a command needs; Spark starts only when something asks for it."""
    def __init__(self, warehouse: Optional[Path | str] = None, master: Optional[str] = None,
                 conf: Optional[dict] = None, spark=None, log_file: Optional[Path | str] = None,
                 store_dir: Optional[Path | str] = None):
        self.master = master
        self.conf = conf or {}
        self.log_file = log_file  # where the Spark JVM's own output goes (None: the terminal)
        self._spark = spark
        # ``store_dir``: where the store of a warehouse URI lives (default: ``store.store_dir``)
        self.store = Store(warehouse if warehouse else default_warehouse(), local_dir=store_dir)
        # the local directory of the store (and of run directories); the warehouse's files live
        # under ``store.root``, the same directory or a Hadoop file system URI
        self.warehouse = self.store.warehouse
        self._catalog = None

    @property
    def spark(self):
        if self._spark is None:

            self._spark = build_session(self.master, self.conf, log_file=self.log_file)
        return self._spark

    @property
    def catalog(self):
        if self._catalog is None:

            self._catalog = Catalog(self.spark, self.store)
        return self._catalog

    def schema_lookup(self):
        """table -> [(column, type)] for the SQL parser (no Spark needed)."""
        cat = Catalog.offline(self.store)
        return lambda t: cat.schema(t)
