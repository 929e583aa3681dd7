"""Files of a versioned table: the stable row-id column and listing a directory's Parquet files."""

from __future__ import annotations

from pathlib import Path

RID = "_rid"


def parquet_files(paths) -> list[str]:
    """The Parquet files in the directories ``paths`` (None entries skipped), sorted."""
    return sorted(str(f) for p in paths if p for f in Path(p).glob("*.parquet"))
