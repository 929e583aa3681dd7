"""A catalog's writes: a table's first version, a Delta table registered in place, update batches,
compaction and dropping a table.  One of the three sides ``advisor.warehouse.catalog.Catalog``
combines.  Files are staged under a temporary name, published under the writer lock and made
visible by the version's SQLite row (``advisor.warehouse.atomic``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from pyspark.sql import Window, functions as F

from advisor.errors import BadInput
from advisor.warehouse import atomic, delta_source, filesystem
from advisor.warehouse.batches import read_batch
from advisor.warehouse.catalog_reads import TableReads
from advisor.warehouse.catalog_versions import Version
from advisor.warehouse.lock import WarehouseBusy, writer_lock
from advisor.warehouse.sketch_records import latest_versions
from advisor.warehouse.table_files import RID

SMALL_BATCH_ROWS = 100_000  # batches up to this size are written as a single Parquet file


def _dir_bytes(p) -> int:
    if not filesystem.is_local(str(p)):
        return filesystem.for_path(str(p)).size(str(p))
    p = Path(p)
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*.parquet"))


class TableWrites(TableReads):
    """Creating, updating, compacting and dropping tables; ``root`` is the tables' directory."""

    root: object  # a local ``Path`` or a ``RemotePath`` (``advisor.warehouse.filesystem``)

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
