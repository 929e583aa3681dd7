"""Delta Lake tables as the warehouse's versioned tables: versions are Delta versions, changes come
from the table's Change Data Feed.

The advisor never writes a user's Delta table; other writers commit to it (INSERT, DELETE, UPDATE,
MERGE) and the catalog sees each commit as a new version (``latest_version`` lists the transaction
log).  A snapshot for a query is Delta time travel in Spark; everything else is read on the driver
from the log and the files it names (``advisor.warehouse.delta_log``, delta-rs): the change between
two versions is the Change Data Feed netted as a multiset (inserts and update post-images count +1,
deletes and pre-images -1, and the rows whose count is not zero are the net inserts and deletes),
row counts, sizes and file lists come from the ``add`` actions, and the columns maintenance state
is built from are read with pyarrow.  Spark answers only where delta-rs cannot (a protocol feature
it does not know, a partitioned table's columns).  Maintenance needs values, not row identities, so
no row id is read from the feed (Delta does not expose one there); a snapshot's row id (``_rid``,
for samples) is Delta's row-tracking id or a hash of the declared key.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
from pyspark.sql import functions as F

from advisor.errors import BadInput
from advisor.warehouse import delta_log, delta_parquet, row_hash

RID = "_rid"
LOG = "_delta_log"
_COMMIT = re.compile(r"^(\d{20})\.json$")
CDF = "delta.enableChangeDataFeed"
ROW_TRACKING = "delta.enableRowTracking"
DELETION_VECTORS = "delta.enableDeletionVectors"


@dataclass(frozen=True)
class Commit:
    """One Delta commit as the catalog records it: rows inserted and deleted per its metrics."""
    version: int
    operation: str
    n_ins: int
    n_del: int
    timestamp: float


def _fs(location: str):
    fs, path = pafs.FileSystem.from_uri(location if "://" in location or location.startswith("file:")
                                        else "file://" + location)
    return fs, path.rstrip("/")


def is_delta(location: str) -> bool:
    """Whether ``location`` holds a Delta table (a transaction log with at least one commit)."""
    try:
        return latest_version(location) is not None
    except (OSError, ValueError):
        return False


def latest_version(location: str) -> int | None:
    """The newest committed version, from a listing of the transaction log (no Spark job)."""
    fs, path = _fs(location)
    try:
        infos = fs.get_file_info(pafs.FileSelector(f"{path}/{LOG}", allow_not_found=True))
    except (OSError, ValueError):
        return None
    vs = [int(m.group(1)) for i in infos if (m := _COMMIT.match(i.base_name))]
    return max(vs) if vs else None


def commits(location: str, after: int, upto: int) -> list[Commit]:
    """The commits ``after < version <= upto`` with their operation and row metrics, read from the
    log's JSON files (metrics Delta did not record count as 0)."""
    fs, path = _fs(location)
    out = []
    for v in range(after + 1, upto + 1):
        info = {}
        try:
            with fs.open_input_stream(f"{path}/{LOG}/{v:020d}.json") as f:
                for line in f.read().decode().splitlines():
                    if '"commitInfo"' in line:
                        info = json.loads(line)["commitInfo"]
                        break
        except (OSError, ValueError):
            info = {}  # a commit file cleaned up by log retention: its metrics count as 0
        m = {k: int(x) for k, x in (info.get("operationMetrics") or {}).items() if str(x).isdigit()}
        n_ins = m.get("numOutputRows", 0) if info.get("operation") in ("WRITE", "CREATE TABLE AS SELECT",
                                                                       "STREAMING UPDATE") else 0
        n_ins += m.get("numTargetRowsInserted", 0) + m.get("numTargetRowsUpdated", 0) + m.get("numUpdatedRows", 0)
        n_del = (m.get("numDeletedRows", 0) + m.get("numTargetRowsDeleted", 0) + m.get("numTargetRowsUpdated", 0)
                 + m.get("numUpdatedRows", 0))
        out.append(Commit(v, str(info.get("operation", "")), n_ins, n_del, float(info.get("timestamp", 0)) / 1000))
    return out


def checksum(location: str, version: int) -> dict | None:
    """The commit's checksum file (``NNN.crc``: size, file count and, for tables with few files,
    every file with its statistics and deletion-vector cardinality), or None when Delta wrote none."""
    fs, path = _fs(location)
    try:
        with fs.open_input_stream(f"{path}/{LOG}/{int(version):020d}.crc") as f:
            return json.loads(f.read().decode())
    except (OSError, ValueError):
        return None


def _crc_files(location: str, version: int) -> list[dict] | None:
    crc = checksum(location, version)
    files = (crc or {}).get("allFiles")
    return files if isinstance(files, list) else None


def properties(spark, location: str) -> dict[str, str]:
    """The table's properties at its newest version: from the checksum file or the log replayed on
    the driver (a first Delta command in a Spark session costs seconds), else ``DESCRIBE DETAIL``."""
    latest = latest_version(location)
    crc = checksum(location, latest) if latest is not None else None
    if crc and isinstance(crc.get("metadata"), dict):
        return dict(crc["metadata"].get("configuration") or {})
    if latest is not None:
        try:
            return delta_log.configuration(location, latest)
        except delta_log.Unreadable:  # not readable by delta-rs: Spark below
            pass
    r = spark.sql(f"DESCRIBE DETAIL delta.`{location}`").first()
    return dict(r["properties"] or {})


def feed_covers(location: str, after: int, upto: int) -> bool:
    """Whether the Change Data Feed was on for every commit ``after < version <= upto``: on at
    ``after`` and not switched off by a later commit's ``metaData`` before ``upto`` (a commit file
    cleaned up by log retention leaves a gap too)."""
    try:
        on = delta_log.configuration(location, after).get(CDF, "false").lower() == "true"
    except delta_log.Unreadable:
        return False
    fs, path = _fs(location)
    for v in range(after + 1, upto + 1):
        try:
            with fs.open_input_stream(f"{path}/{LOG}/{v:020d}.json") as f:
                lines = f.read().decode().splitlines()
        except (OSError, ValueError):
            return False
        for line in lines:
            if line.startswith('{"metaData"'):
                conf = json.loads(line)["metaData"].get("configuration") or {}
                on = str(conf.get(CDF, "false")).lower() == "true"
        if not on:
            return False
    return True


def snapshot(spark, location: str, version: int, key: list | None = None, with_rid: bool = False):
    """The table at ``version`` (time travel); with ``with_rid`` a stable ``_rid`` last: the row
    tracking id, or a 64-bit hash of the ``key`` columns.  Read as the files the log lists where
    that reads the same rows (``delta_parquet``; row tracking ids need Delta's reader)."""
    df = None if with_rid and not key else delta_parquet.frame(spark, location, version)
    if df is None:
        df = spark.read.format("delta").option("versionAsOf", int(version)).load(location)
    df = df.toDF(*[c.lower() for c in df.columns])
    if not with_rid:
        return df
    if key:
        return df.withColumn(RID, F.xxhash64(*[F.col(k) for k in key]))
    return df.select("*", F.col("_metadata.row_id").alias(RID))


def check_readable(spark, location: str, version: int) -> None:
    """Raise BadInput when time travel to ``version`` fails (e.g. its files were vacuumed)."""
    try:
        spark.read.format("delta").option("versionAsOf", int(version)).load(location).schema
    except Exception as e:  # AnalysisException / VersionNotFound: one line for the user
        raise BadInput(f"Delta table {location} cannot be read at version {version}: "
                       f"{str(e).splitlines()[0][:200]}") from None


def net_changes(spark, location: str, v_from: int, v_to: int, columns: list[str]) -> tuple[pa.Table, pa.Table]:
    """(net inserted rows, net deleted rows) of ``columns`` (lower case) between two versions: the
    Change Data Feed read and netted on the driver (``delta_log.changes``, ``delta_log.net``: a
    small commit in milliseconds), or by one Spark job where delta-rs cannot read it.  A row
    inserted and deleted in between (or updated back to its values) cancels out.  Raises
    ``ChangeFeedGap`` when the feed does not cover the versions."""
    if v_to <= v_from:
        t = read_arrow(spark, location, v_from, columns, limit=0)
        return t, t
    try:
        delta_log.metadata(location, v_to)
    except delta_log.Unreadable:  # not readable by delta-rs: Spark reads the feed and finds any gap
        return _net_changes_on_spark(spark, location, v_from, v_to, columns)
    if not feed_covers(location, v_from, v_to):
        raise ChangeFeedGap(f"no change feed for {location} versions {v_from + 1}..{v_to}: "
                            "it was off for some of them, or their commits were cleaned up")
    try:
        spelled = delta_log.names(location, v_to)
        own = [spelled[c] for c in columns]
        ins, dels = delta_log.net(delta_log.changes(location, v_from, v_to, own), own)
        return ins.rename_columns(columns), dels.rename_columns(columns)
    except (delta_log.Unreadable, KeyError):
        return _net_changes_on_spark(spark, location, v_from, v_to, columns)


def _net_changes_on_spark(spark, location: str, v_from: int, v_to: int, columns: list[str]):
    """``net_changes`` as one Spark job over the Change Data Feed."""
    try:
        cdf = (spark.read.format("delta").option("readChangeFeed", "true")
               .option("startingVersion", int(v_from) + 1).option("endingVersion", int(v_to)).load(location))
    except Exception as e:
        raise ChangeFeedGap(f"no change feed for {location} versions {v_from + 1}..{v_to}: "
                            f"{str(e).splitlines()[0][:200]}") from None
    cdf = cdf.toDF(*[c.lower() if not c.startswith("_") else c for c in cdf.columns])
    sign = F.when(F.col("_change_type").isin("insert", "update_postimage"), 1).otherwise(-1)
    g = (cdf.select(*[F.col(c) for c in columns], sign.alias("_n"))
         .groupBy(*columns).agg(F.sum("_n").alias("_n")).where("_n != 0"))
    try:
        t = g.toArrow()
    except Exception as e:
        raise ChangeFeedGap(f"no change feed for {location} versions {v_from + 1}..{v_to}: "
                            f"{str(e).splitlines()[0][:200]}") from None
    n = t.column("_n").to_numpy(zero_copy_only=False)
    body = t.drop_columns(["_n"])
    pos = np.flatnonzero(n > 0)
    neg = np.flatnonzero(n < 0)
    return body.take(pa.array(np.repeat(pos, n[pos]))), body.take(pa.array(np.repeat(neg, -n[neg])))


def read_arrow(spark, location: str, version: int, columns: list[str], key: list | None = None,
               with_rid: bool = False, limit: int | None = None) -> pa.Table:
    """``columns`` (lower case) of the table at ``version`` as a pyarrow table, with ``with_rid`` the
    row id ``snapshot`` gives last: read on the driver from the files the log lists
    (``delta_log.read``; the row id where ``row_hash`` reproduces Spark's hash of the key), else
    through Spark."""
    try:
        if with_rid and not row_hash.supports(key, dict(spark_types(location, version))):
            raise delta_log.Unreadable("row id")
        spelled = delta_log.names(location, version)
        want = list(dict.fromkeys(list(columns) + (list(key) if with_rid else [])))
        t = delta_log.read(location, version, [spelled[c] for c in want]).rename_columns(want)
        if limit is not None:
            t = t.slice(0, limit)
        out = t.select(list(columns))
        return out.append_column(RID, row_hash.xxhash64([t.column(k) for k in key])) if with_rid else out
    except (delta_log.Unreadable, KeyError):
        df = snapshot(spark, location, version, key, with_rid).select(*columns, *([RID] if with_rid else []))
        return (df.limit(limit) if limit is not None else df).toArrow()


def spark_types(location: str, version: int) -> list[tuple[str, str]]:
    """(lower-case column, pyarrow type string) of the snapshot's schema, as delta-rs reads it."""
    schema = delta_log.metadata(location, version).schema
    return [(f.name.lower(), str(f.type)) for f in schema]


def rows_at(spark, location: str, version: int) -> int:
    """Rows of the table at ``version``: the files' record counts minus their deletion vectors'
    cardinalities, from the checksum file or the log (``delta_log.files``), else a count Delta
    answers from its statistics."""
    files = _crc_files(location, version)
    try:
        if files is not None:
            return sum(int(json.loads(f["stats"])["numRecords"]) - int((f.get("deletionVector") or {}).get("cardinality", 0))
                       for f in files)
    except (KeyError, TypeError, ValueError):
        files = None  # a file without statistics: the log, else Delta counts instead
    try:
        live = [f.live for f in delta_log.files(location, version)]
        if all(n is not None for n in live):
            return int(sum(live))
    except delta_log.Unreadable:  # not readable by delta-rs: Spark below
        pass
    return int(spark.read.format("delta").option("versionAsOf", int(version)).load(location).count())


def size_at(spark, location: str, version: int) -> int:
    """Bytes of the data files of the table at ``version``: the commit's checksum file says it when
    Delta wrote one, else the log's ``add`` actions do."""
    crc = checksum(location, version)
    if crc and isinstance(crc.get("tableSizeBytes"), int):
        return int(crc["tableSizeBytes"])
    return int(sum(data_file_sizes(spark, location, version)))


def data_files(spark, location: str, version: int) -> list[str]:
    """The Parquet files of the snapshot at ``version`` (local paths for a local table): from the
    checksum file when it lists them, else from the log (``delta_log.files``), else from a scan's
    input files."""
    files = _crc_files(location, version)
    if files is not None and all("path" in f for f in files):
        base = location.rstrip("/")
        return sorted(_local(unquote(f["path"])) if "://" in f["path"] else f"{_local(base)}/{unquote(f['path'])}"
                      for f in files)
    try:
        return sorted(f.path for f in delta_log.files(location, version, masks=False))
    except delta_log.Unreadable:  # not readable by delta-rs: Spark below
        pass
    df = spark.read.format("delta").option("versionAsOf", int(version)).load(location)
    return sorted(_local(f) for f in df.inputFiles())


def data_file_sizes(spark, location: str, version: int) -> list[int]:
    try:
        return [f.size for f in delta_log.files(location, version, masks=False)]
    except delta_log.Unreadable:  # not readable by delta-rs: Spark below
        pass
    fs, _ = _fs(location)
    files = data_files(spark, location, version)
    return [i.size or 0 for i in fs.get_file_info([_fs(f)[1] for f in files])] if files else []


def _local(uri: str) -> str:
    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri


class ChangeFeedGap(BadInput):
    """The Change Data Feed does not cover the versions asked for (not enabled then, or cleaned up):
    the caller recaptures instead of maintaining."""
