"""A catalog's reads: a table version as a Spark DataFrame, a pyarrow Table or pandas frame, and
the net change between two versions.  One of the three sides ``advisor.warehouse.catalog.Catalog``
combines; a read of the Parquet files unions the newest base with the later inserts and drops the
later deletes on ``_rid``, a Delta table is read at its version in place.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from advisor.errors import BadInput
from advisor.plan import arrow_filter
from advisor.warehouse import delta_copies, delta_source, filesystem
from advisor.warehouse.arrow_to_pandas import to_nullable_pandas
from advisor.warehouse.catalog_versions import TableVersions, Version
from advisor.warehouse.net_delta import delta_files
from advisor.warehouse.table_files import RID, parquet_files, read_columns

FRAMES_KEPT = 512  # DataFrames over unchanged files a catalog keeps (``Catalog.parquet``)


class TableReads(TableVersions):
    """Snapshot reads and deltas; DataFrames over files written once are kept in ``_frames``."""

    _frames: dict

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
