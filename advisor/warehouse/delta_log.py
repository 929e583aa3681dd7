"""A Delta table's transaction log read on the driver with delta-rs (the ``deltalake`` package): no
Spark job.

What maintenance and the catalog need from a Delta table is small next to what a Spark job costs
(a Spark read of the Change Data Feed takes seconds for a one-row commit, mostly job and snapshot
set-up; the driver reads a small commit in milliseconds):

* ``snapshot``: the log replayed to a version, one ``DeltaTable`` per (location, version) kept for
  the process (``_stamp`` of the version's commit file guards against a table re-created at the
  same path), so every query of a process reuses it;
* ``changes``: the commits ``after < v <= upto`` of the Change Data Feed, as one pyarrow table
  with ``_change_type``: the ``_change_data`` files a commit names, else its added and removed
  data files under the deletion vectors they had (pyarrow over the files; delta-rs's own
  ``load_cdf`` reads a removed file without its deletion vector, so rows deleted earlier would
  be deleted twice);
* ``files``: the snapshot's data files with size, record count and, where a deletion vector marks
  rows deleted, the keep mask (built once per snapshot; the masks only when asked for, since
  materialising them costs about a second for an SF1 table);
* ``file_stats``: the ``add`` actions' statistics (per file min / max / nullCount per column);
* ``read``: the snapshot's columns read with pyarrow from the files the log lists, deletion vectors
  applied: the same path the own store's tables take on the driver.

delta-rs refuses to scan a table whose readers need deletion vectors (its reader does not list the
feature), but lists the files and materialises their deletion vectors, so ``read`` scans the files
itself.  Tables it cannot read that way (partition columns, column mapping) are ``unsupported`` and
their callers use Spark, as do tables on a Hadoop file system or object store (Spark holds their
configuration and credentials).
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

SNAPSHOTS_KEPT = 64      # (location, version) snapshots a process keeps
COLUMN_MAPPING = "delta.columnMapping.mode"

_lock = threading.Lock()
_snapshots: OrderedDict = OrderedDict()
_files: OrderedDict = OrderedDict()
_metas: OrderedDict = OrderedDict()
_movers: dict = {}


class Unreadable(Exception):
    """delta-rs cannot read what was asked (a version cleaned up, an unknown protocol feature):
    the caller answers with Spark or, for changes, recaptures."""


@dataclass(frozen=True)
class DataFile:
    """One data file of a snapshot: its local path (or URI), bytes, records written and, when a
    deletion vector marks some deleted, the keep mask over its rows (True = live)."""
    path: str
    size: int
    records: int | None
    keep: np.ndarray | None

    @property
    def live(self) -> int | None:
        if self.records is None:
            return None
        return self.records if self.keep is None else int(self.records - (len(self.keep) - self.keep.sum()))


def _uri(location: str) -> str:
    return location if "://" in location else "file://" + os.path.abspath(location)


def local(uri: str) -> str:
    """A ``file:`` URI as a local path; other URIs unchanged."""
    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri


def _stamp(location: str, version: int):
    """What identifies the commit file of ``version``: its mtime and size (a table deleted and
    written anew at the same path has new commit files), or None where it cannot be stat'ed (an
    object store, a version only in a checkpoint)."""
    if "://" in location and not location.startswith("file:"):
        return None
    try:
        st = os.stat(os.path.join(local(location), "_delta_log", f"{int(version):020d}.json"))
        return (st.st_mtime_ns, st.st_size)
    except OSError:
        return None


def snapshot(location: str, version: int):
    """The ``DeltaTable`` of ``location`` at ``version``, built once per process and version."""
    # start-up time: delta-rs loads when a Delta table is first read
    from deltalake import DeltaTable

    if "://" in location and not location.startswith("file:"):
        # a Hadoop file system or object store: Spark holds its configuration and credentials
        raise Unreadable(f"{location} is read through Spark")
    key = (location, int(version), _stamp(location, version))
    with _lock:
        if key in _snapshots:
            _snapshots.move_to_end(key)
            return _snapshots[key]
    try:
        dt = DeltaTable(_uri(location), version=int(version))
    except Exception as e:  # a missing version, a corrupt log, a feature delta-rs does not know
        raise Unreadable(_first_line(e)) from None
    with _lock:
        _snapshots[key] = dt
        while len(_snapshots) > SNAPSHOTS_KEPT:
            _snapshots.popitem(last=False)
    return dt


def forget(location: str) -> None:
    """Drop the cached snapshots of ``location`` (a table replaced or removed)."""
    with _lock:
        for cache in (_snapshots, _files, _metas):
            for k in [k for k in cache if k[0] == location]:
                del cache[k]
        _movers.pop(location, None)


def _first_line(e: Exception) -> str:
    s = str(e).strip()
    return s.splitlines()[0][:200] if s else type(e).__name__


@dataclass(frozen=True)
class Meta:
    """A version's table metadata: properties, schema (plain arrow types) and partition columns."""
    configuration: dict
    schema: pa.Schema
    partition_columns: tuple


def _meta_of(dt) -> Meta:
    md = dt.metadata()
    schema = _plain_types(pa.schema(dt.schema().to_arrow()).empty_table()).schema
    return Meta(dict(md.configuration or {}), schema, tuple(md.partition_columns or ()))


def metadata(location: str, version: int) -> Meta:
    """The metadata in force at ``version``: from the snapshot when the process holds it, else from
    one ``DeltaTable`` per location moved forward commit by commit (``load_as_version`` replays only
    the new commits, where opening a snapshot at a new version replays the log from its last
    checkpoint: about 0.2 s for an SF1 table, which a batch's net change need not pay)."""
    stamp = _stamp(location, version)
    key = (location, int(version), stamp)
    with _lock:
        if key in _metas:
            return _metas[key]
        if key in _snapshots:
            _metas[key] = _meta_of(_snapshots[key])
            return _metas[key]
        mover = _movers.get(location)
    if mover is None or mover[0].version() > int(version) or _stamp(location, mover[0].version()) != mover[1]:
        # start-up time: delta-rs loads when a Delta table is first read
        from deltalake import DeltaTable

        snapshot(location, version)  # refuses what delta-rs is not to read (a URI Spark reads)
        try:  # an object of its own: the cached snapshots never move
            dt = DeltaTable(_uri(location), version=int(version))
        except Exception as e:
            raise Unreadable(_first_line(e)) from None
        meta = _meta_of(dt)
        with _lock:
            _movers[location] = (dt, stamp)
    else:
        try:
            mover[0].load_as_version(int(version))
            meta = _meta_of(mover[0])
        except Exception as e:
            raise Unreadable(_first_line(e)) from None
        with _lock:
            _movers[location] = (mover[0], stamp)
    with _lock:
        _metas[key] = meta
        while len(_metas) > SNAPSHOTS_KEPT:
            _metas.popitem(last=False)
    return meta


def configuration(location: str, version: int) -> dict[str, str]:
    """The table properties in force at ``version``."""
    return dict(metadata(location, version).configuration)


def unsupported(location: str, version: int) -> str | None:
    """Why ``read`` cannot read the snapshot with pyarrow (None when it can)."""
    md = metadata(location, version)
    if md.partition_columns:
        return "partitioned table"
    if md.configuration.get(COLUMN_MAPPING, "none") != "none":
        return "column mapping"
    return None


def reader_features(location: str, version: int) -> tuple[str, ...]:
    """The reader features the table's protocol names at ``version`` (none below reader version 3)."""
    try:
        return tuple(snapshot(location, version).protocol().reader_features or ())
    except Unreadable:
        raise
    except Exception as e:  # a protocol delta-rs cannot state
        raise Unreadable(_first_line(e)) from None


def names(location: str, version: int) -> dict[str, str]:
    """lower-case column name -> the table's own spelling."""
    return {f.name.lower(): f.name for f in metadata(location, version).schema}


def _keep_masks(dt) -> dict[str, np.ndarray]:
    """Path -> keep mask of every file with a deletion vector, taken from the arrow buffers (a
    Python list of an SF1 table's masks took seconds)."""
    t = pa.table(dt.deletion_vectors())
    if not t.num_rows:
        return {}
    sel = t.column("selection_vector").combine_chunks()
    flat = np.asarray(pc.list_flatten(sel).to_numpy(zero_copy_only=False), dtype=bool)
    offs = sel.offsets.to_numpy()
    offs = offs - offs[0]
    return {local(p): flat[offs[k]:offs[k + 1]] for k, p in enumerate(t.column("filepath").to_pylist())}


def files(location: str, version: int, masks: bool = True) -> list[DataFile]:
    """The data files of the snapshot at ``version``, with (``masks``) their deletion vectors'
    keep masks; built once per snapshot."""
    key = (location, int(version), _stamp(location, version), masks)
    with _lock:
        if key in _files:
            return _files[key]
    dt = snapshot(location, version)
    try:
        adds = pa.table(dt.get_add_actions(flatten=False)).select(["path", "size_bytes", "num_records"])
        keep = _keep_masks(dt) if masks else {}
    except Exception as e:
        raise Unreadable(_first_line(e)) from None
    base = local(_uri(location)).rstrip("/")
    out = []
    for p, size, n in zip(*(adds.column(c).to_pylist() for c in ("path", "size_bytes", "num_records"))):
        path = local(p) if "://" in p else f"{base}/{unquote(p)}"
        out.append(DataFile(path, int(size), None if n is None else int(n), keep.get(path)))
    with _lock:
        _files[key] = out
        while len(_files) > SNAPSHOTS_KEPT:
            _files.popitem(last=False)
    return out


def file_stats(location: str, version: int) -> pa.Table:
    """The ``add`` actions' statistics: a row per data file, columns ``num_records`` and
    ``null_count.C`` / ``min.C`` / ``max.C`` per column C with statistics (the table's spelling)."""
    try:
        return pa.table(snapshot(location, version).get_add_actions(flatten=True))
    except Exception as e:
        raise Unreadable(_first_line(e)) from None


def _plain_types(t: pa.Table) -> pa.Table:
    """String and binary views (delta-rs's reader returns them) as the plain types pyarrow's
    kernels and the rest of the warehouse expect."""
    fields = []
    for f in t.schema:
        if pa.types.is_string_view(f.type):
            f = f.with_type(pa.string())
        elif pa.types.is_binary_view(f.type):
            f = f.with_type(pa.binary())
        fields.append(f)
    schema = pa.schema(fields)
    return t if schema == t.schema else t.cast(schema)


def _actions(location: str, version: int) -> list[dict]:
    """The actions of the commit file of ``version`` (one JSON object a line)."""
    try:
        with open(os.path.join(local(location), "_delta_log", f"{int(version):020d}.json"), encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        raise Unreadable(f"commit {version} of {location}: {_first_line(e)}") from None


def _file_rows(path: str, columns: list[str], keep: np.ndarray | None, types: pa.Schema) -> pa.Table:
    """``columns`` of one data file, the rows ``keep`` marks deleted dropped (missing columns NULL)."""
    with pq.ParquetFile(path) as pf:
        have = set(pf.schema_arrow.names)
        t = pf.read(columns=[c for c in columns if c in have], use_threads=False)
    for c in columns:
        if c not in have:
            t = t.append_column(c, pa.nulls(t.num_rows, types.field(c).type))
    t = t.select(columns)
    if keep is not None:
        t = t.filter(pa.array(_padded(keep, t.num_rows)))
    return t


def _padded(keep: np.ndarray | None, n: int) -> np.ndarray:
    """A file's keep mask over its ``n`` rows: a vector's mask may stop before the file's last
    rows, which it keeps; None keeps every row."""
    if keep is None:
        return np.ones(n, dtype=bool)
    keep = np.asarray(keep, dtype=bool)[:n]
    return keep if len(keep) == n else np.concatenate([keep, np.ones(n - len(keep), dtype=bool)])


def _flipped(path: str, columns: list[str], old: np.ndarray | None, new: np.ndarray | None,
             types: pa.Schema) -> list[pa.Table]:
    """The change of one file re-added with another deletion vector: the rows the old mask kept and
    the new one drops as deletes, the reverse (none, as Delta writes vectors) as inserts."""
    t = _file_rows(path, columns, None, types)
    o, w = _padded(old, t.num_rows), _padded(new, t.num_rows)
    out = []
    for kind, mask in (("delete", o & ~w), ("insert", w & ~o)):
        if mask.any():
            rows = _plain_types(t.filter(pa.array(mask)))
            out.append(rows.append_column("_change_type", pa.array([kind] * rows.num_rows, pa.string())))
    return out


def changes(location: str, after: int, upto: int, columns: list[str]) -> pa.Table:
    """The Change Data Feed rows of the commits ``after < version <= upto``: ``columns`` (the
    table's spelling) and ``_change_type``, as Delta defines the feed.  A commit that wrote
    ``_change_data`` files is those files; any other commit's data-changing ``add`` actions are
    inserts and its ``remove`` actions deletes, each file read with the deletion vector it had at
    that point (the rows a vector had already removed are not deleted again: delta-rs's
    ``load_cdf`` reads a removed file whole, which counts them twice).  A file re-added with a new
    vector reads as its old rows deleted and its new rows inserted, which ``net`` cancels down to
    the rows the vector removed."""
    why = unsupported(location, upto)
    if why:
        raise Unreadable(why)
    base = local(_uri(location)).rstrip("/")
    types = metadata(location, upto).schema
    parts = []

    def path_of(p: str) -> str:
        return local(p) if "://" in p else f"{base}/{unquote(p)}"

    for v in range(int(after) + 1, int(upto) + 1):
        acts = _actions(location, v)
        cdc = [a["cdc"] for a in acts if "cdc" in a]
        if cdc:
            for a in cdc:
                t = _file_rows(path_of(a["path"]), list(columns) + ["_change_type"], None,
                               types.append(pa.field("_change_type", pa.string())))
                parts.append(_plain_types(t))
            continue
        adds = [a["add"] for a in acts if "add" in a and a["add"].get("dataChange", True)]
        removes = [a["remove"] for a in acts if "remove" in a and a["remove"].get("dataChange", True)]
        # a file removed and re-added in one commit with a new deletion vector (DELETE, UPDATE and
        # MERGE with vectors on): its change is the rows whose mask flipped, read once, rather than
        # its old rows deleted and new ones inserted for ``net`` to cancel (at SF1 a DELETE of a
        # few thousand rows read and grouped millions: 11 s against a fraction of a second)
        again = {a["path"] for a in adds} & {r["path"] for r in removes}
        if again:
            before = {f.path: f.keep for f in files(location, v - 1, masks=True)}
            after_ = {f.path: f.keep for f in files(location, v, masks=True)}
            for rel in sorted(again):
                parts += _flipped(path_of(rel), list(columns), before.get(path_of(rel)), after_.get(path_of(rel)), types)
            adds = [a for a in adds if a["path"] not in again]
            removes = [r for r in removes if r["path"] not in again]
        for kind, acts_, at in (("insert", adds, v), ("delete", removes, v - 1)):
            if not acts_:
                continue
            # an add or remove action names the deletion vector its file has (had): without one the
            # file is read whole and no masks are materialised
            need = any(a.get("deletionVector") for a in acts_)
            keep = {f.path: f.keep for f in files(location, at, masks=True)} if need else {}
            for a in acts_:
                p = path_of(a["path"])
                t = _file_rows(p, list(columns), keep.get(p), types)
                parts.append(_plain_types(t).append_column("_change_type", pa.array([kind] * t.num_rows, pa.string())))
    want = pa.schema([types.field(c) for c in columns] + [pa.field("_change_type", pa.string())])
    if not parts:
        return want.empty_table()
    return pa.concat_tables(parts, promote_options="permissive").select(list(columns) + ["_change_type"])


def net(feed: pa.Table, columns: list[str]) -> tuple[pa.Table, pa.Table]:
    """(net inserted rows, net deleted rows) of ``feed`` (``changes``) netted as a multiset: inserts
    and update post-images count +1, deletes and pre-images -1; a row inserted and deleted in
    between (or updated back to its values) cancels out.  Without deletes (or without inserts)
    there is nothing to cancel and no grouping is done."""
    ct = feed.column("_change_type")
    plus = pc.is_in(ct, value_set=pa.array(["insert", "update_postimage"]))
    body = feed.select(columns)
    ins, dels = body.filter(plus), body.filter(pc.invert(plus))
    if not ins.num_rows or not dels.num_rows:
        return ins, dels
    sign = pa.array(np.where(np.asarray(plus.to_numpy(zero_copy_only=False)), 1, -1).astype(np.int64))
    g = body.append_column("__n", sign).group_by(columns, use_threads=False).aggregate([("__n", "sum")])
    n = g.column("__n_sum").to_numpy(zero_copy_only=False)
    rows = g.select(columns).cast(body.schema)
    pos, neg = np.flatnonzero(n > 0), np.flatnonzero(n < 0)
    return rows.take(pa.array(np.repeat(pos, n[pos]))), rows.take(pa.array(np.repeat(neg, -n[neg])))


def read(location: str, version: int, columns: list[str]) -> pa.Table:
    """``columns`` (the table's spelling) of the snapshot at ``version``, read file by file with
    pyarrow from the files the log lists, rows deleted by a deletion vector dropped, values in the
    files' own types (as the own store's files are read).  A file written before a column was added
    reads it as NULLs.  Raises ``Unreadable`` where ``unsupported``."""
    why = unsupported(location, version)
    if why:
        raise Unreadable(why)
    schema = metadata(location, version).schema
    want = pa.schema([schema.field(c) for c in columns])
    parts = [_file_rows(f.path, list(columns), f.keep, schema) for f in files(location, version)]
    if not parts:
        return want.empty_table()
    return parts[0] if len(parts) == 1 else pa.concat_tables(parts, promote_options="permissive")
