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
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import Window, functions as F

from advisor.errors import BadInput
from advisor.plan import arrow_filter
from advisor.warehouse import atomic, delta_copies, delta_source, filesystem, ownership, stored_paths
from advisor.warehouse.arrow_to_pandas import to_nullable_pandas
from advisor.warehouse.batches import read_batch
from advisor.warehouse.lock import WarehouseBusy, writer_lock
from advisor.warehouse.net_delta import delta_files
from advisor.warehouse.sketch_records import latest_versions
from advisor.warehouse.store import Store
from advisor.warehouse.table_files import RID, parquet_files, read_columns

FRAMES_KEPT = 512  # DataFrames over unchanged files a catalog keeps (``Catalog.parquet``)
SMALL_BATCH_ROWS = 100_000  # batches up to this size are written as a single Parquet file
OP = "op"
INSERT_OPS = {"i", "insert", "+"}
DELETE_OPS = {"d", "delete", "-"}


@dataclass(frozen=True)
class Version:
    table: str
    version: int
    kind: str
    base_path: str | None
    ins_path: str | None
    del_path: str | None
    rows: int
    bytes: int
    n_ins: int
    n_del: int


def _dir_bytes(p) -> int:
    if not filesystem.is_local(str(p)):
        return filesystem.for_path(str(p)).size(str(p))
    p = Path(p)
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*.parquet"))


class Catalog:
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

    # ---------- metadata ----------
    def tables(self) -> list[str]:
        return [r["name"] for r in self.store.query("SELECT name FROM tables ORDER BY name")]

    def exists(self, name: str) -> bool:
        return self.store.one("SELECT 1 FROM tables WHERE name=?", (name.lower(),)) is not None

    def require(self, name: str) -> str:
        n = name.lower()
        if not self.exists(n):
            known = ", ".join(self.tables()) or "none loaded"
            raise BadInput(f"unknown table {name!r} (known: {known})")
        return n

    def schema(self, name: str) -> list[tuple[str, str]]:
        """User-visible columns as (name, spark simpleString type), without the row id."""
        r = self.store.one("SELECT schema_json FROM tables WHERE name=?", (self.require(name),))
        return [tuple(x) for x in json.loads(r["schema_json"])]

    def column_type(self, table: str, col: str) -> str:
        for c, t in self.schema(table):
            if c == col.lower():
                return t
        raise BadInput(f"unknown column {col!r} in table {table!r}")

    def source(self, name: str) -> dict | None:
        """Where an imported table lives (format, location, declared key), or None for a table
        the warehouse stores itself."""
        name = name.lower()
        if name not in self._sources:
            r = self.store.one("SELECT * FROM sources WHERE table_name=?", (name,))
            self._sources[name] = None if r is None else {
                "format": r["format"], "location": r["location"], "key": json.loads(r["key_json"] or "null"),
                "options": json.loads(r["options_json"] or "{}")}
        return self._sources[name]

    def is_delta(self, name: str) -> bool:
        """Whether ``name`` is a Delta table read in place (its versions are Delta versions)."""
        s = self.source(name)
        return s is not None and s["format"] == "delta"

    def key(self, name: str) -> list[str] | None:
        """The table's declared key columns, if any."""
        s = self.source(name)
        return None if s is None else s["key"]

    def sync(self, name: str) -> None:
        """Record the commits other writers made to a Delta table since the newest known version
        (a listing of its transaction log; a Spark job only when there are new commits)."""
        src = self.source(name)
        if src is None or src["format"] != "delta" or self.spark is None:
            return
        latest = delta_source.latest_version(src["location"])
        if latest is None:
            raise BadInput(f"table {name!r}: {src['location']} is no longer a Delta table")
        r = self.store.one("SELECT * FROM versions WHERE table_name=? ORDER BY version DESC LIMIT 1", (name,))
        if r is None or latest <= r["version"]:
            return
        new = delta_source.commits(src["location"], r["version"], latest)
        rows = delta_source.rows_at(self.spark, src["location"], latest)
        size = delta_source.size_at(self.spark, src["location"], latest)
        running = r["rows"]
        with self.store.tx() as c:
            for cm in new:
                running = rows if cm.version == latest else max(0, running + cm.n_ins - cm.n_del)
                c.execute("INSERT OR IGNORE INTO versions VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                          (name, cm.version, "delta", src["location"], None, None, running,
                           size if cm.version == latest else r["bytes"], cm.n_ins, cm.n_del, time.time()))

    def current_version(self, name: str) -> int:
        name = self.require(name)
        self.sync(name)
        r = self.store.one("SELECT max(version) v FROM versions WHERE table_name=?", (name,))
        return min(int(r["v"]), self.pins.get(name, int(r["v"])))

    def versions(self, name: str, after: int | None = None, upto: int | None = None) -> list[Version]:
        """Versions of ``name`` in order, optionally only those with ``after < version <= upto``
        (a range query: a long-lived table has one row per batch)."""
        name = self.require(name)
        self.sync(name)
        hi = self.pins.get(name, 1 << 62) if upto is None else min(upto, self.pins.get(name, 1 << 62))
        rows = self.store.query("SELECT * FROM versions WHERE table_name=? AND version>? AND version<=? "
                                "ORDER BY version", (name, -1 if after is None else after, hi))
        return [_version(r, self.store) for r in rows]

    def version(self, name: str, version: int | None = None) -> Version:
        name = self.require(name)
        self.sync(name)
        pin = self.pins.get(name, 1 << 62)
        if version is None:
            rows = self.store.query("SELECT * FROM versions WHERE table_name=? AND version<=? "
                                    "ORDER BY version DESC LIMIT 1", (name, pin))
        else:
            rows = self.store.query("SELECT * FROM versions WHERE table_name=? AND version=? AND version<=?",
                                    (name, version, pin))
        if rows:
            return _version(rows[0], self.store)
        latest = self.version(name) if version is not None else None
        raise BadInput(f"table {name!r} has no version {version} (latest is "
                       f"{latest.version if latest else 'none'})")

    # ---------- create ----------
    def create_table(self, name: str, df, dataset: str = "", replace: bool = True) -> Version:
        """Write `df` (Spark DataFrame) as version 1 of table `name`, adding a stable `_rid`."""
        name = name.lower()
        df = df.toDF(*[c.lower() for c in df.columns])
        if RID in df.columns:
            df = df.drop(RID)
        # Stable row ids: dense 0..n-1 in the order of the source files (zipWithIndex semantics).
        df = df.withColumn(RID, F.monotonically_increasing_id())
        tdir = self.root / name
        final = tdir / atomic.unique(f"v{1:06d}_base")
        # staged beside the table directories, not in this one: replacing a table removes its directory
        tmp = self.root / atomic.tmp_name(name)
        tmp.parent.mkdir(parents=True, exist_ok=True)
        try:
            df.write.mode("overwrite").parquet(str(tmp))
            written = self.spark.read.parquet(str(tmp))
            rows = written.count()
            max_rid = written.agg(F.max(RID)).first()[0]
            next_rid = 0 if max_rid is None else int(max_rid) + 1  # a one-row table's max is 0, not "none"
            schema = [(f.name, f.dataType.simpleString()) for f in written.schema.fields if f.name != RID]
            with writer_lock(self.store.warehouse):
                if self.exists(name):
                    if not replace:
                        raise BadInput(f"table {name!r} already exists")
                    self.drop(name)
                tdir.mkdir(parents=True, exist_ok=True)
                atomic.publish(tmp, final)
                atomic.crash_point("load.renamed")
                with self.store.tx() as c:
                    c.execute("INSERT INTO tables(name, dataset, created, next_rid, schema_json) "
                              "VALUES (?,?,?,?,?)", (name, dataset, time.time(), next_rid, json.dumps(schema)))
                    c.execute("INSERT INTO versions VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                              (name, 1, "base", self.store.stored(final), None, None, rows, _dir_bytes(final),
                               rows, 0,
                               time.time()))
        finally:
            atomic.remove(tmp)
        return self.version(name, 1)

    def register_delta(self, name: str, location: str, version: int, key: list | None = None,
                       replace: bool = True) -> Version:
        """Make the Delta table at ``location`` the warehouse table ``name``, read in place from
        ``version`` on; later commits become versions as they appear (``sync``)."""
        name = name.lower()
        df = delta_source.snapshot(self.spark, location, version)
        schema = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
        rows = delta_source.rows_at(self.spark, location, version)
        size = delta_source.size_at(self.spark, location, version)
        with writer_lock(self.store.warehouse):
            if self.exists(name):
                if not replace:
                    raise BadInput(f"table {name!r} already exists")
                self.drop(name)
            with self.store.tx() as c:
                c.execute("INSERT INTO tables(name, dataset, created, next_rid, schema_json) "
                          "VALUES (?,?,?,?,?)", (name, f"delta:{location}", time.time(), 0, json.dumps(schema)))
                c.execute("INSERT INTO sources VALUES (?,?,?,?,?,?)",
                          (name, "delta", location, json.dumps(key) if key else None, None, time.time()))
                c.execute("INSERT INTO versions VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                          (name, int(version), "delta", location, None, None, rows, size, rows, 0,
                           time.time()))
        self._sources.pop(name, None)
        return self.version(name, int(version))

    def record_source(self, name: str, fmt: str, location: str, key: list | None, options: dict | None = None) -> None:
        """Remember where an imported table came from (its format, files and declared key)."""
        with self.store.tx() as c:
            c.execute("INSERT OR REPLACE INTO sources VALUES (?,?,?,?,?,?)",
                      (name.lower(), fmt, location, json.dumps(key) if key else None,
                       json.dumps(options) if options else None, time.time()))
        self._sources.pop(name.lower(), None)

    def drop(self, name: str) -> None:
        """Forget a table and its files.  Sketches that read it are retired and decisions on it
        forgotten: a table created again under the name starts at version 1, which an old sketch's
        data version would otherwise match (wrong fragments, and partitions that no longer exist)."""

        name = self.require(name)
        readers = [s.id for s in latest_versions(self.store)
                   if name in s.data_versions or any(p.table == name for p in s.parts)]
        with self.store.tx() as c:
            for t in ("versions", "colstats", "partitions", "layouts", "samples", "net_deltas"):
                c.execute(f"DELETE FROM {t} WHERE table_name=?", (name,))
            c.execute("DELETE FROM decisions WHERE table_name=?", (name,))
            c.execute("DELETE FROM sources WHERE table_name=?", (name,))
            c.executemany("INSERT OR IGNORE INTO retired(sketch_id, reason, created) VALUES (?,?,?)",
                          [(i, f"table {name} was dropped", time.time()) for i in readers])
            c.execute("DELETE FROM tables WHERE name=?", (name,))
        self._sources.pop(name, None)
        if getattr(self, "spark", None) is not None:
            self.drop_views(name)
        atomic.remove(self.root / name)

    # ---------- reads ----------
    def parquet(self, *paths: str, schema=None):
        """``spark.read.parquet`` of ``paths`` (with ``schema`` if given), built once per catalog
        while the paths are unchanged.  Bases, layouts and batch files are written once and renamed
        into place, so their DataFrame (and the file listing and schema inference behind it, ~40 ms
        a read at SF1) serves every version's view; a replaced path has a new inode and is read anew."""

        key = (tuple((p, *filesystem.for_path(p, self.spark).stamp(p)) for p in map(str, paths)),
               schema.json() if schema is not None else None)
        if key not in self._frames:
            if len(self._frames) >= FRAMES_KEPT:
                self._frames.pop(next(iter(self._frames)))  # the oldest
            reader = self.spark.read if schema is None else self.spark.read.schema(schema)
            self._frames[key] = reader.parquet(*paths)
        return self._frames[key]

    def parquet_of(self, directory: str, paths: tuple[str, ...], schema):
        """``spark.read.parquet`` of ``paths``, files of ``directory``, with ``schema``, built once
        per catalog while the directory is unchanged (a layout's files are written once, into a
        directory of their own).  Stats the directory, not each file."""

        stamp = filesystem.for_path(directory, self.spark).stamp(directory)
        key = ("files", str(directory), *stamp, tuple(paths), schema.json())
        if key not in self._frames:
            if len(self._frames) >= FRAMES_KEPT:
                self._frames.pop(next(iter(self._frames)))  # the oldest
            self._frames[key] = self.spark.read.schema(schema).parquet(*paths)
        return self._frames[key]

    def read(self, name: str, version: int | None = None, with_rid: bool = False):
        """Snapshot of `name` at `version` (default latest) as a Spark DataFrame."""
        name = self.require(name)
        v = self.version(name, version)
        if v.kind == "delta":
            key = ("delta", name, v.version, with_rid)
            if key not in self._frames:
                self._frames[key] = delta_source.snapshot(self.spark, v.base_path, v.version,
                                                          self.key(name), with_rid)
            return self._frames[key]
        vs = [x for x in self.versions(name) if x.version <= v.version]
        base = max((x for x in vs if x.kind == "base"), key=lambda x: x.version)
        later = [x for x in vs if x.version > base.version]
        return self._assemble(self.parquet(base.base_path), name, base.version, later, with_rid)

    def data_files(self, name: str, version: int | None = None) -> list[str]:
        """The Parquet files a scan of a Delta table at ``version`` reads (before any skipping)."""
        v = self.version(name, version)
        key = ("files", v.table, v.version)
        if key not in self._frames:
            self._frames[key] = delta_source.data_files(self.spark, v.base_path, v.version)
        return self._frames[key]

    def read_pandas(self, name: str, version: int | None = None):
        """Snapshot of `name` at `version` as a pandas frame (no `_rid`), read with pyarrow straight
        from the base and batch files: no Spark job and no JVM-to-Python transfer, the fast path
        for initialising maintenance state."""
        return self.read_arrow(name, version).to_pandas()

    def read_arrow(self, name: str, version: int | None = None, columns: list | None = None,
                   with_rid: bool = False):
        """Snapshot of `name` at `version` as a pyarrow Table of ``columns`` (default all; `_rid`
        last with ``with_rid``): the base files plus the batches' inserts, minus their deletes."""

        name = self.require(name)
        v = self.version(name, version)
        if v.kind == "delta":
            cols = list(columns) if columns is not None else [c for c, _ in self.schema(name)]
            return delta_source.read_arrow(self.spark, v.base_path, v.version, cols, self.key(name), with_rid)
        vs = [x for x in self.versions(name) if x.version <= v.version]
        base = max((x for x in vs if x.kind == "base"), key=lambda x: x.version)
        later = [x for x in vs if x.version > base.version]
        cols = [RID] + (list(columns) if columns is not None else [c for c, _ in self.schema(name)])

        parts = [read_columns(parquet_files([base.base_path]), cols)]
        ins = parquet_files([b.ins_path for b in later])
        if ins:
            parts.append(read_columns(ins, cols).cast(parts[0].schema))
        tab = pa.concat_tables(parts)
        dels = parquet_files([b.del_path for b in later])
        if dels:
            d = read_columns(dels, [RID]).column(RID)
            tab = tab.filter(pc.invert(pc.is_in(tab.column(RID), value_set=d)))
        return tab.select(cols[1:] + [RID]) if with_rid else tab.drop_columns([RID])

    def _assemble(self, base_df, name: str, start: int, batches: list[Version], with_rid: bool,
                  map_ins=None):
        """``base_df`` (the table at version ``start``) plus the inserts of ``batches`` minus their
        deletes, with runs of batches read as net blocks (``advisor.warehouse.net_delta``).  ``map_ins`` turns
        each insert file into the file to read instead (a layout's copy with its block ids)."""

        df = base_df
        ins, dels = delta_files(self, name, start, [b for b in batches if b.kind == "batch"])
        if ins and map_ins is not None:
            ins = [map_ins(f) for f in ins]
        if ins:
            df = df.unionByName(self.parquet(*ins, schema=base_df.schema))  # the schema's column order
        if dels:
            d = self.parquet(*dels, schema=base_df.select(RID).schema)
            df = df.join(d, on=RID, how="left_anti")
        return df if with_rid else df.drop(RID)

    def read_on_top(self, base_df, name: str, from_version: int, to_version: int | None = None,
                    with_rid: bool = False, map_ins=None, map_rows=None):
        """`base_df` is a snapshot at `from_version` (e.g. a clustered layout copy); bring it to
        `to_version` (``map_ins``: see ``_assemble``; for a Delta table ``map_rows`` maps the
        inserted rows, an Arrow table, instead: ``delta_copies``)."""
        name = self.require(name)
        to = self.version(name, to_version).version
        if self.is_delta(name):
            return delta_copies.bring_forward(self, base_df, name, from_version, to, with_rid, map_rows)
        later = [x for x in self.versions(name) if from_version < x.version <= to]
        return self._assemble(base_df, name, from_version, later, with_rid, map_ins)

    def delta(self, name: str, v_from: int, v_to: int | None = None):
        """Net change between two versions: (inserted rows, deleted rows), both with `_rid`."""
        name = self.require(name)
        to = self.version(name, v_to).version
        if v_from > to:
            raise BadInput(f"delta from version {v_from} to {to} goes backwards")
        if self.is_delta(name):  # net rows without row ids (``delta_source.net_changes``)
            cols = [c for c, _ in self.schema(name)]
            ins, dels = delta_source.net_changes(self.spark, self.source(name)["location"], v_from, to, cols)
            return self.spark.createDataFrame(ins), self.spark.createDataFrame(dels)
        batches = [x for x in self.versions(name) if v_from < x.version <= to]
        cols = [RID] + [c for c, _ in self.schema(name)]
        ins_p = [b.ins_path for b in batches if b.ins_path]
        del_p = [b.del_path for b in batches if b.del_path]
        empty = self.read(name, to, with_rid=True).select(*cols).limit(0)
        ins = self.spark.read.parquet(*ins_p).select(*cols) if ins_p else empty
        dels = self.spark.read.parquet(*del_p).select(*cols) if del_p else empty
        if ins_p and del_p:
            net_ins = ins.join(dels.select(RID), RID, "left_anti")
            net_del = dels.join(ins.select(RID), RID, "left_anti")
            return net_ins, net_del
        return ins, dels

    def delta_pandas(self, name: str, v_from: int, v_to: int | None = None, columns: list | None = None,
                     where=None, seen: list | None = None):
        """Same as `delta`, read straight from the batch files with pyarrow (no Spark job): the
        fast path for maintenance, whose deltas are small. Returns pandas frames without `_rid`;
        ``columns`` keeps only those (a pruned maintenance plan reads a few of the table's columns).
        ``where`` (a sqlglot predicate over the table's columns) drops, after netting, rows it
        certainly rejects (`arrow_filter`: a superset is kept; the caller still applies it);
        ``seen``, if given, receives the number of netted delta rows before that filter.
        Columns come in the engine's nullable dtypes (`arrow_pandas`), decimals as floats."""


        name = self.require(name)
        to = self.version(name, v_to).version
        batches = self.versions(name, after=v_from, upto=to)
        cols = [c for c, _ in self.schema(name)]
        if columns is not None:
            unknown = set(columns) - set(cols)
            if unknown:
                raise BadInput(f"table {name!r} has no column(s) {', '.join(sorted(unknown))}")
            cols = [c for c in cols if c in set(columns)]
        if self.is_delta(name):
            ins, dels = delta_source.net_changes(self.spark, self.source(name)["location"], v_from, to, cols)
            if seen is not None:
                seen.append(ins.num_rows + dels.num_rows)
            out = []
            for t in (ins, dels):
                if t.num_rows and where is not None and t.num_rows >= arrow_filter.MIN_ROWS:
                    t = arrow_filter.apply(t, where)
                out.append(to_nullable_pandas(t) if t.num_rows else None)
            return out[0], out[1]

        def load(paths):
            if not paths:
                return None
            files = parquet_files(paths)
            if not files:
                return None
            # file by file on this thread: for a few small batch files this is ~6x faster than a
            # dataset scan, whose thread pool costs more than the reading
            parts = []
            for f in files:
                if not filesystem.is_local(f):
                    parts.append(filesystem.read_parquet(f, self.spark, columns=[RID] + cols))
                    continue
                with pq.ParquetFile(f) as pf:
                    parts.append(pf.read(columns=[RID] + cols, use_threads=False))
            return parts[0] if len(parts) == 1 else pa.concat_tables(parts, promote_options="permissive")

        ins = load([b.ins_path for b in batches if b.ins_path])
        dels = load([b.del_path for b in batches if b.del_path])
        if ins is not None and dels is not None:

            i_ids, d_ids = ins.column(RID), dels.column(RID)
            ins, dels = (ins.filter(pc.invert(pc.is_in(i_ids, value_set=d_ids))),
                         dels.filter(pc.invert(pc.is_in(d_ids, value_set=i_ids))))
        out = []
        if seen is not None:
            seen.append(sum(t.num_rows for t in (ins, dels) if t is not None))
        for t in (ins, dels):
            if t is not None and where is not None and t.num_rows >= arrow_filter.MIN_ROWS:
                t = arrow_filter.apply(t, where)
            out.append(None if t is None or t.num_rows == 0 else to_nullable_pandas(t.drop_columns([RID])))
        return out[0], out[1]

    # ---------- batches ----------
    def apply_batch(self, name: str, path: str) -> Version:
        """Apply an insert/delete batch file (Parquet, or CSV with header) as a new version."""
        name = self.require(name)
        self._not_delta(name)
        cur = self.version(name)
        schema = self.schema(name)
        ins_df, del_ids = read_batch(self.spark, path, schema)
        return self._commit_batch(name, cur, ins_df, del_ids)

    def apply_frames(self, name: str, ins_df, del_ids_df) -> Version:
        """Apply an already-validated batch given as DataFrames (inserts without _rid, delete ids)."""
        name = self.require(name)
        return self._commit_batch(name, self.version(name), ins_df, del_ids_df)

    def _not_delta(self, name: str) -> None:
        if self.is_delta(name):
            raise BadInput(f"table {name!r} is a Delta table ({self.source(name)['location']}): commit changes to "
                           "it with Spark (INSERT, DELETE, MERGE); the advisor reads them from its change feed")

    def _commit_batch(self, name: str, cur: Version, ins_df, del_ids) -> Version:
        self._not_delta(name)
        if name in self.pins:
            raise BadInput(f"table {name!r} is pinned to version {self.pins[name]}: batches cannot be applied")

        current = self.read(name, cur.version, with_rid=True)
        cols = [c for c, _ in self.schema(name)]
        n_del_req = del_ids.count() if del_ids is not None else 0
        deleted = None
        if n_del_req:
            dup = del_ids.groupBy(RID).count().filter("count > 1").limit(1).count()
            if dup:
                raise BadInput("the batch deletes the same row id more than once")
            deleted = current.join(F.broadcast(del_ids.select(RID)) if n_del_req < 1_000_000
                                   else del_ids.select(RID), RID, "left_semi").select(RID, *cols)
            if n_del_req <= SMALL_BATCH_ROWS:  # counted, then written: one scan of the table, not two
                deleted = deleted.localCheckpoint()
            found = deleted.count()
            if found != n_del_req:
                raise BadInput(f"the batch deletes {n_del_req - found} row id(s) that are not in "
                               f"{name} version {cur.version}")
        n_ins = ins_df.count() if ins_df is not None else 0
        next_rid = self.store.one("SELECT next_rid FROM tables WHERE name=?", (name,))["next_rid"]
        new_v = cur.version + 1
        tdir = self.root / name
        staged: list[tuple[Path, Path]] = []
        ins_path = del_path = None
        try:
            if n_ins:
                w = Window.orderBy(F.monotonically_increasing_id())
                ins_rows = ins_df.select(*cols).withColumn(RID, F.row_number().over(w) + F.lit(next_rid - 1))
                ins_rows = ins_rows.select(RID, *cols)
                tmp = tdir / atomic.tmp_name("ins")
                staged.append((tmp, tdir / atomic.unique(f"v{new_v:06d}_ins")))
                (ins_rows.coalesce(1) if n_ins <= SMALL_BATCH_ROWS else ins_rows).write.parquet(str(tmp))
                ins_path = str(staged[-1][1])
            if deleted is not None:
                tmp = tdir / atomic.tmp_name("del")
                staged.append((tmp, tdir / atomic.unique(f"v{new_v:06d}_del")))
                # a small batch as one file: later reads (maintenance, snapshots) open fewer files
                (deleted.coalesce(1) if found <= SMALL_BATCH_ROWS else deleted).write.parquet(str(tmp))
                del_path = str(staged[-1][1])
            atomic.crash_point("apply.written")
            with writer_lock(self.store.warehouse):
                self._still_current(name, cur, "the batch")
                for tmp, final in staged:
                    atomic.publish(tmp, final)
                atomic.crash_point("apply.renamed")
                new_rows = cur.rows + n_ins - n_del_req
                size = sum(_dir_bytes(p) for p in (ins_path, del_path) if p)
                with self.store.tx() as c:
                    c.execute("INSERT INTO versions VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                              (name, new_v, "batch", None, self.store.stored(ins_path),
                               self.store.stored(del_path), new_rows, cur.bytes + size,
                               n_ins, n_del_req, time.time()))
                    c.execute("UPDATE tables SET next_rid=? WHERE name=?", (next_rid + n_ins, name))
                atomic.crash_point("apply.committed")
        except BaseException:
            # only this writer's own files: temporaries and the new names nothing committed
            if self.store.one("SELECT 1 FROM versions WHERE table_name=? AND version=? AND "
                              "(ins_path IS ? AND del_path IS ?)",
                              (name, new_v, self.store.stored(ins_path), self.store.stored(del_path))) is None:
                for tmp, final in staged:
                    atomic.remove(tmp)
                    atomic.remove(final)
            raise
        return self.version(name, new_v)

    def _still_current(self, name: str, cur: Version, what: str) -> None:
        """Refuse to commit ``what``, prepared against ``cur``, if another writer committed a newer
        version of ``name`` meanwhile (call holding the writer lock)."""
        r = self.store.one("SELECT max(version) v FROM versions WHERE table_name=?", (name,))
        if r is None or r["v"] is None:
            raise BadInput(f"table {name!r} was dropped while {what} was being written")
        if int(r["v"]) != cur.version:
            raise WarehouseBusy(f"warehouse busy: another writer committed {name} version {r['v']} while "
                                f"{what} was being prepared against version {cur.version}; nothing was changed, "
                                "run the command again")

    def compact(self, name: str) -> Version:
        """Fold all batches into a new base version (same rows, same row ids)."""
        name = self.require(name)
        self._not_delta(name)
        cur = self.version(name)
        df = self.read(name, cur.version, with_rid=True)
        new_v = cur.version + 1
        final = self.root / name / atomic.unique(f"v{new_v:06d}_base")
        tmp = self.root / name / atomic.tmp_name("base")
        try:
            df.write.parquet(str(tmp))
            atomic.crash_point("compact.written")
            with writer_lock(self.store.warehouse):
                self._still_current(name, cur, "the compaction")
                atomic.publish(tmp, final)
                atomic.crash_point("compact.renamed")
                with self.store.tx() as c:
                    c.execute("INSERT INTO versions VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                              (name, new_v, "base", self.store.stored(final), None, None, cur.rows,
                               _dir_bytes(final), 0, 0,
                               time.time()))
                atomic.crash_point("compact.committed")
        except BaseException:
            atomic.remove(tmp)
            if self.store.one("SELECT 1 FROM versions WHERE table_name=? AND base_path=?",
                              (name, self.store.stored(final))) is None:
                atomic.remove(final)
            raise
        return self.version(name, new_v)


def _tables_root(store: Store):
    """The directory of the warehouse's tables: a local ``Path``, or a ``RemotePath`` on a Hadoop
    file system (``advisor.warehouse.filesystem``)."""
    return filesystem.location(stored_paths.join(store.root, "tables"))


def _version(r, store: Store) -> Version:
    """A version row with its files' paths resolved against the warehouse root (rows record places
    below it: ``advisor.warehouse.stored_paths``)."""
    return Version(r["table_name"], r["version"], r["kind"], store.resolve(r["base_path"]),
                   store.resolve(r["ins_path"]), store.resolve(r["del_path"]), r["rows"], r["bytes"],
                   r["n_ins"], r["n_del"])
