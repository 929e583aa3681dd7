"""A stored sample's Parquet directory read, written and stamped on the driver, on the warehouse's
file system: the operating system's for a local warehouse, Spark's Hadoop ``FileSystem`` for an
``hdfs://`` or ``s3a://`` one (``advisor.warehouse.filesystem``), so the driver never needs the
sample on its own disk.  A sample is a few percent of a table and read back whole."""

from __future__ import annotations

import os

import pyarrow.dataset as ds

from advisor.warehouse import filesystem
from estimators.sampling import reservoir_local


def read(path: str, columns: list | None = None):
    """The sample's rows (reserve included) as a pyarrow Table, ``columns`` only if given."""
    if filesystem.is_local(path):
        return ds.dataset(filesystem.local_path(path), format="parquet").to_table(columns=columns)
    return filesystem.read_parquet(str(path), columns=columns)


def write(table, path: str) -> None:
    """Replace the sample directory ``path`` with ``table`` as one Parquet file, whole: locally as
    ``reservoir_local.write`` does; on a Hadoop file system through a temporary sibling renamed into
    place (atomic on HDFS), written with the same Parquet settings."""
    path = str(path)
    if filesystem.is_local(path):
        reservoir_local.write(table, filesystem.local_path(path))
        return
    fs = filesystem.for_path(path)
    tmp, old = f"{path}.tmp-{os.getpid()}", f"{path}.old-{os.getpid()}"
    fs.remove(tmp)
    fs.mkdirs(tmp)
    try:
        rows, options = reservoir_local.file_options(table)
        filesystem.write_parquet(rows, f"{tmp}/part-0.parquet", **options)
    except BaseException:
        fs.remove(tmp)  # the stored sample is untouched; drop the attempt
        raise
    if fs.exists(path):
        fs.rename(path, old)
    fs.rename(tmp, path)
    fs.remove(old)


def stamp(path: str):
    """What changes when the sample at ``path`` is replaced: the key of the in-process caches of its
    rows (the directory's mtime locally, its modification time and length on a Hadoop file system)."""
    if filesystem.is_local(path):
        return os.path.getmtime(filesystem.local_path(path))
    return filesystem.for_path(str(path)).stamp(str(path))
