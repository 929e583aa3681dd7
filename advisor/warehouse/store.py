"""The embedded SQLite store: catalog metadata, partitions, layouts, sketches, samples, states, runs.

One file `advisor.db` in the warehouse. Every write happens in a transaction (`with store.tx()`),
so an interrupted command leaves the previous state intact.  A new store is created only in a
directory without warehouse data: an empty or damaged `advisor.db`, or table files without one,
is refused (one line, exit code 2) unless the caller asks to initialise.  Opening a store repairs
what an interrupted command left behind (``advisor.warehouse.reconcile``) and says so once.

Where it lives: with a local warehouse, in the warehouse directory.  With a warehouse on a Hadoop
file system (``hdfs://``, ``s3a://``), the table files live there but the store stays on the
driver's local disk, in ``$ADVISOR_STORE_DIR`` or else ``~/.cache/advisor/stores/<host>-<hash of
the URI>``: SQLite needs a file system with POSIX locks and in-place writes, which HDFS and object
stores do not offer.  A second driver on another machine therefore sees an empty store for the
same URI (it knows no tables) and, its lock guarding nothing the first one shares, is refused
there (``advisor.warehouse.ownership``); to move the driver, copy the store directory with the
warehouse, or point ``ADVISOR_STORE_DIR`` at it.  Rows name artefacts by their place below the root
(``advisor.warehouse.stored_paths``), so the same store also serves a copy of the warehouse.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from advisor.errors import BadInput
from advisor.warehouse import atomic, filesystem, stored_paths
from advisor.warehouse.reconcile import reconcile

SCHEMA = """
CREATE TABLE IF NOT EXISTS tables (
  name TEXT PRIMARY KEY, dataset TEXT, created REAL, next_rid INTEGER NOT NULL,
  schema_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sources (
  table_name TEXT PRIMARY KEY, format TEXT NOT NULL, location TEXT NOT NULL, key_json TEXT,
  options_json TEXT, created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS versions (
  table_name TEXT NOT NULL, version INTEGER NOT NULL, kind TEXT NOT NULL,
  base_path TEXT, ins_path TEXT, del_path TEXT,
  rows INTEGER NOT NULL, bytes INTEGER NOT NULL, n_ins INTEGER NOT NULL, n_del INTEGER NOT NULL,
  created REAL NOT NULL, PRIMARY KEY (table_name, version)
);
CREATE TABLE IF NOT EXISTS colstats (
  table_name TEXT NOT NULL, version INTEGER NOT NULL, col TEXT NOT NULL,
  min_json TEXT, max_json TEXT, ndv INTEGER, nulls INTEGER,
  PRIMARY KEY (table_name, version, col)
);
CREATE TABLE IF NOT EXISTS partitions (
  id INTEGER PRIMARY KEY AUTOINCREMENT, table_name TEXT NOT NULL, attr TEXT NOT NULL,
  n_target INTEGER NOT NULL, table_version INTEGER NOT NULL, dtype TEXT NOT NULL,
  boundaries_json TEXT NOT NULL, sizes_json TEXT NOT NULL, created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS layouts (
  id INTEGER PRIMARY KEY AUTOINCREMENT, table_name TEXT NOT NULL, attr TEXT NOT NULL,
  table_version INTEGER NOT NULL, path TEXT NOT NULL, manifest_json TEXT NOT NULL, created REAL NOT NULL,
  columns_json TEXT
);
CREATE TABLE IF NOT EXISTS sketches (
  id INTEGER PRIMARY KEY AUTOINCREMENT, template TEXT NOT NULL, bindings_json TEXT NOT NULL,
  sql TEXT NOT NULL, parts_json TEXT NOT NULL, data_versions_json TEXT NOT NULL,
  parent_id INTEGER, how TEXT NOT NULL, created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS samples (
  id INTEGER PRIMARY KEY AUTOINCREMENT, table_name TEXT NOT NULL, strata_json TEXT NOT NULL,
  theta REAL NOT NULL, seed INTEGER NOT NULL, table_version INTEGER NOT NULL, path TEXT NOT NULL,
  meta_json TEXT NOT NULL, created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS states (
  sketch_id INTEGER PRIMARY KEY, path TEXT NOT NULL, meta_json TEXT NOT NULL, created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS decisions (
  template TEXT NOT NULL, strategy TEXT NOT NULL, table_name TEXT, attr TEXT, partition_id INTEGER,
  go INTEGER NOT NULL, structural INTEGER NOT NULL, reason TEXT NOT NULL, horizon REAL NOT NULL,
  skips INTEGER NOT NULL DEFAULT 0, step TEXT, created REAL NOT NULL, PRIMARY KEY (template, strategy)
);
CREATE TABLE IF NOT EXISTS retired (sketch_id INTEGER PRIMARY KEY, reason TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS maint_rent (
  sketch_id INTEGER PRIMARY KEY, spent REAL NOT NULL, last REAL NOT NULL, created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS policy_state (chain TEXT PRIMARY KEY, spec TEXT NOT NULL, blob BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS net_deltas (
  table_name TEXT NOT NULL, from_version INTEGER NOT NULL, to_version INTEGER NOT NULL,
  ins_path TEXT, del_path TEXT, n_ins INTEGER NOT NULL, n_del INTEGER NOT NULL, created REAL NOT NULL,
  PRIMARY KEY (table_name, from_version, to_version)
);
CREATE TABLE IF NOT EXISTS observed_groups (template TEXT PRIMARY KEY, groups INTEGER NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, sql TEXT, record_json TEXT NOT NULL,
  created REAL NOT NULL
);
"""


# Columns added to tables after stores were first written: (table, column, type).  A store opened
# without one gets it, NULL in its old rows (a layout's NULL columns_json: every column).
ADDED_COLUMNS = (("layouts", "columns_json", "TEXT"),)


def _add_columns(conn) -> None:
    for table, col, typ in ADDED_COLUMNS:
        if col not in {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {col} {typ}")


class Store:
    """Thin wrapper over the warehouse's SQLite file with JSON helpers.  ``initialise``: create a
    new, empty store even where the directory holds warehouse data or a damaged ``advisor.db``
    (which is kept beside it as ``advisor.db.damaged-<time>``)."""

    def __init__(self, warehouse: Path | str, initialise: bool = False, quiet: bool = False,
                 local_dir: Path | str | None = None):
        # ``root``: where the warehouse's files live, what stored places are relative to (``stored``);
        # ``warehouse``: the local directory of the store and its lock (module docstring), for a
        # URI ``local_dir`` when given (a replay keeps each of its stores in its run directory)
        if filesystem.is_local(warehouse):
            self.warehouse = Path(filesystem.local_path(warehouse))
            self.root = str(self.warehouse.absolute())
        else:
            self.root = str(warehouse).rstrip("/")
            self.warehouse = Path(local_dir) if local_dir is not None else store_dir(self.root)
        self.remote = not filesystem.is_local(self.root)
        self.warehouse.mkdir(parents=True, exist_ok=True)
        self.path = self.warehouse / "advisor.db"
        self._check_openable(initialise)
        try:
            self.conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self.conn.row_factory = sqlite3.Row
            self.conn.executescript(SCHEMA)
            _add_columns(self.conn)
            stored_paths.migrate(self.conn, self.root)  # before recovery, which checks the files rows name
        except sqlite3.DatabaseError as e:
            raise BadInput(f"the store {self.path} is damaged or not an advisor store ({e})") from None
        notes = reconcile(self)
        if notes and not quiet:
            print(f"recovered {self.warehouse}: " + "; ".join(notes), file=sys.stderr, flush=True)

    def _check_openable(self, initialise: bool) -> None:
        """Refuse to treat an empty or damaged file, or a directory of table files without its
        store, as a new store (module docstring)."""
        exists = self.path.exists()
        bad = None
        if exists and self.path.stat().st_size == 0:
            bad = f"the store {self.path} is empty (0 bytes)"
        elif exists:
            with open(self.path, "rb") as f:
                if f.read(16) != b"SQLite format 3\x00":
                    bad = f"the store {self.path} is damaged or not an advisor store"
        elif _has_data(self.warehouse):
            bad = f"{self.warehouse} holds warehouse data but no store (advisor.db)"
        if bad is None:
            return
        if not initialise:
            raise BadInput(f"{bad}: refusing to start a new store over it; restore advisor.db, or run "
                           f"`advisor --warehouse {self.warehouse} data init --force` to start afresh")
        if exists:
            self.path.rename(self.path.with_name(f"advisor.db.damaged-{int(time.time())}"))

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """One SQLite transaction: committed on success, rolled back on any exception."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
            atomic.crash_point("store.before-commit")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        else:
            self.conn.execute("COMMIT")
            atomic.crash_point("store.committed")

    def stored(self, path: str | Path | None) -> str | None:
        """What a row records for the artefact at ``path``: its place below the warehouse root
        (``advisor.warehouse.stored_paths``), so the warehouse can be moved or copied."""
        return stored_paths.to_stored(self.root, path)

    def resolve(self, stored: str | None) -> str | None:
        """The path of the artefact a row names (a place joined to this warehouse's root)."""
        return stored_paths.resolve(self.root, stored)

    def resolve_local(self, stored: str | None) -> str | None:
        """The path of a driver-local artefact a row names (operator states live beside the store,
        which is the warehouse directory itself unless the warehouse is a URI)."""
        return stored_paths.resolve(str(self.warehouse.absolute()), stored)

    def query(self, sql: str, args: tuple = ()) -> list[sqlite3.Row]:
        try:
            return self.conn.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as e:
            raise BadInput(f"the store {self.path} is damaged ({e})") from None

    def one(self, sql: str, args: tuple = ()) -> sqlite3.Row | None:
        rows = self.query(sql, args)
        return rows[0] if rows else None

    def log_run(self, kind: str, sql: str | None, record: dict[str, Any]) -> None:
        """Log a run; a plain query run (no sketch, not answered by another job) also records the
        groups its aggregations formed for its template (``observed_groups``)."""
        groups = int((record.get("metrics") or {}).get("groups") or 0)
        plain = kind == "run" and record.get("template") and not record.get("sketch") and not record.get("answered")
        with self.tx() as c:
            c.execute("INSERT INTO runs(kind, sql, record_json, created) VALUES (?,?,?,?)",
                      (kind, sql, json.dumps(record, default=str), time.time()))
            if plain and groups > 0:
                c.execute("INSERT OR REPLACE INTO observed_groups VALUES (?,?,?)",
                          (record["template"], groups, time.time()))

    def observed_groups(self, template: str | None) -> int | None:
        """Groups the newest plain run of ``template`` formed, if one was logged."""
        r = self.one("SELECT groups FROM observed_groups WHERE template=?", (template,)) if template else None
        return int(r["groups"]) if r else None

    def setting(self, key: str, default: str | None = None) -> str | None:
        r = self.one("SELECT value FROM settings WHERE key=?", (key,))
        return r["value"] if r else default

    def set_setting(self, key: str, value: str) -> None:
        with self.tx() as c:
            c.execute("INSERT OR REPLACE INTO settings(key, value) VALUES (?,?)", (key, value))

    def close(self) -> None:
        self.conn.close()


def store_dir(uri: str) -> Path:
    """The local directory of the store of the warehouse at ``uri`` (module docstring).

    >>> os.environ.pop("ADVISOR_STORE_DIR", None) and None; store_dir("hdfs://nn:8020/w").name
    'nn_8020_w-65cf2828'
    """
    if os.environ.get("ADVISOR_STORE_DIR"):
        return Path(os.environ["ADVISOR_STORE_DIR"])
    slug = re.sub(r"[^A-Za-z0-9_.]+", "_", uri.split("://", 1)[-1]).strip("_")[:60]
    return Path.home() / ".cache" / "advisor" / "stores" / f"{slug}-{hashlib.sha1(uri.encode()).hexdigest()[:8]}"


def _has_data(warehouse: Path) -> bool:
    """Whether ``warehouse`` holds table or state files (a store created there would disown them)."""
    for sub in ("tables", "states"):
        d = warehouse / sub
        if d.is_dir() and any(not p.name.startswith(".") for p in d.iterdir()):
            return True
    return False
