"""A Delta snapshot read by Spark as the Parquet files its log lists, without Delta's scan.

Spark's Delta reader plans every query over a snapshot with Spark jobs on the snapshot's state
(the files, their statistics, their deletion vectors): at TPC-H SF1 on 2 cores, 0.9-1.5 s of
planning per query, where a Parquet scan of the same two files plans in 0.013-0.036 s; a plain
HAVING query ran 2.9-4.4 s against 1.3 s, a sketched one 1.3-1.9 s against 0.32 s.  The log is
read on the driver already (``advisor.warehouse.delta_log``), so the snapshot can be given to
Spark as the files it names, with the table's schema: the same rows, the same row-group and page
skipping, no Delta planning.

Rows a deletion vector marks deleted are dropped by their position in the file
(``_metadata.row_index NOT IN (...)``, as Delta's reader drops them by their index), for up to
``MAX_LISTED`` deleted rows in up to ``MAX_DV_FILES`` files; a snapshot with more, a table
delta-rs cannot read with pyarrow (partition columns, column mapping), a reader feature this path
does not know, or a table on a Hadoop file system or object store is read by Spark's Delta reader.
"""

from __future__ import annotations

import os

import numpy as np
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from advisor.warehouse import delta_log

# Deleted rows listed by position, over the snapshot.  At TPC-H SF1 (lineitem, 2 files, a HAVING
# query, the machine shared) the files' read took 3.0-3.9 s against Delta's 5.4-6.4 s with 6,000
# rows deleted, 3.4-4.7 s against 4.7-4.8 s with 24,000, and 8.1-8.3 s against 4.3-5.7 s with
# 104,000 (the list is parsed once per version, 5 s at that size, and shipped with every task).
MAX_LISTED = 16384
MAX_DV_FILES = 64      # files with a deletion vector, each a term of the filter dropping their rows
# Reader features whose files a plain Parquet read of the table's schema reads as Delta does.
PLAIN_FEATURES = frozenset({"deletionVectors", "timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"})


def why_not(location: str, version: int) -> str | None:
    """Why the snapshot at ``version`` must be read by Spark's Delta reader (None: as its files)."""
    try:
        why = delta_log.unsupported(location, version)
        if why:
            return why
        extra = set(delta_log.reader_features(location, version)) - PLAIN_FEATURES
        if extra:
            return "reader features " + ", ".join(sorted(extra))
        files = delta_log.files(location, version)
    except delta_log.Unreadable as e:
        return str(e)
    dv = [f for f in files if f.keep is not None and not f.keep.all()]
    names = [os.path.basename(f.path) for f in files]
    if dv and (len(set(names)) < len(names) or any("'" in n for n in names)):
        return "data files its deletion vectors cannot be told apart by name"
    deleted = sum(int(len(f.keep) - f.keep.sum()) for f in dv)
    if len(dv) > MAX_DV_FILES or deleted > MAX_LISTED:
        return f"{deleted} rows deleted by deletion vectors in {len(dv)} files"
    return None


def frame(spark, location: str, version: int):
    """The snapshot as a Spark DataFrame over its data files (columns in the table's spelling), or
    None where ``why_not`` says Spark's Delta reader must read it."""
    if why_not(location, version) is not None:
        return None
    schema = from_arrow_schema(delta_log.metadata(location, version).schema)
    reader = spark.read.schema(schema)
    files = delta_log.files(location, version)
    if not files:
        return spark.createDataFrame([], schema)
    # one scan over every file, so that a query's filter is compiled once, not once per file
    df = reader.parquet(*[f.path for f in files])
    gone = [(os.path.basename(f.path), np.flatnonzero(~f.keep)) for f in files if f.keep is not None and not f.keep.all()]
    if not gone:
        return df
    dropped = " OR ".join(f"(_metadata.file_name = '{name}' AND _metadata.row_index IN ({', '.join(map(str, idx.tolist()))}))"
                          for name, idx in gone)
    return df.where(F.expr(f"NOT ({dropped})"))
