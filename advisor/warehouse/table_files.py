"""Files of a versioned table: the stable row-id column and listing a directory's Parquet files."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds

from advisor.warehouse import filesystem

RID = "_rid"


def parquet_files(paths) -> list[str]:
    """The Parquet files in the directories ``paths`` (None entries skipped), sorted; local
    directories or directories on any Hadoop file system (``advisor.warehouse.filesystem``)."""
    out = []
    for p in paths:
        if not p:
            continue
        if filesystem.is_local(str(p)):
            out += [str(f) for f in Path(filesystem.local_path(str(p))).glob("*.parquet")]
        else:
            out += [f for f in filesystem.for_path(str(p)).list(str(p)) if f.endswith(".parquet")]
    return sorted(out)


def read_columns(files: list[str], columns: list[str] | None = None):
    """``columns`` (None: all) of Parquet ``files`` as one pyarrow Table: local files as one dataset
    scan, files on a Hadoop file system read through ``advisor.warehouse.filesystem``."""
    if all(filesystem.is_local(f) for f in files):
        return ds.dataset([filesystem.local_path(f) for f in files], format="parquet").to_table(columns=columns)
    parts = [filesystem.read_parquet(f, columns=columns) for f in files]
    return pa.concat_tables(parts, promote_options="permissive") if len(parts) > 1 else parts[0]
