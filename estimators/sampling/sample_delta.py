"""Bring a stored stratified sample from one table version to a later one using only the delta.

A sample drawn with a reserve (``stratified_sample(..., reserve=True)``) stores, per stratum, all
rows whose key (``xxhash64(seed, _rid)``, fixed per row) is at most the stratum's *cut-off*, the
largest stored key; the sample proper is the ``k = quota(N_g)`` smallest of them (``_in``).  After a
batch, the rows of the new stratum with a key up to the same cut-off are exactly: the stored rows
that were not deleted, plus the inserted rows with a key up to the cut-off.  So if at least ``k'``
(the new quota) of those exist, the ``k'`` smallest are exactly what a fresh draw on the new
version would keep -- the maintained sample *equals* the redrawn one, row for row.  A stratum whose
rows were all stored (``N_g`` of them) takes every insert; a stratum new in the batch holds only
inserted rows, all known.  The new reserve is cut back to ``reserve_size(k')`` rows.  When any stratum
has fewer than ``k'`` known rows (deletions ate its reserve), ``maintain`` returns None and the
caller draws afresh.  Uniform samples (no strata, or more strata than the budget) are not maintained.

Only the delta goes through Spark (its keys and stratum labels, computed by the same expressions
as the draw); the stored sample is merged with pyarrow on the driver, because a Spark plan over
the sample (aggregate, join, window, write) cost more than drawing afresh at TPC-H SF1.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql import functions as F

from estimators.sampling.reservoir_local import write
from estimators.sampling.reservoir_spark import quotas, reserve_sizes, sample_key


def _delta_arrow(df, strata: Sequence[str], seed: int, id_col: str, id_type, cols: list):
    """The delta rows as an Arrow table with the draw's ``_key`` and ``_stratum`` (one Spark job)."""
    df = df.withColumn(id_col, F.col(id_col).cast(id_type))  # the key hashes the id's binary form
    df = df.withColumn("_key", sample_key(df, seed, id_col)).withColumn(
        "_stratum", F.to_json(F.struct(*[F.col(c) for c in strata])))
    return df.select(*cols).toArrow()


def _read_local(path: str):
    return ds.dataset(path, format="parquet").to_table()


def maintain(spark, old_path: str, ins, dels, strata: Sequence[str], theta: float, seed: int, out_path: str,
             id_col: str = "_rid", read=_read_local, write=write):
    """Write the maintained sample to ``out_path`` (one Parquet file) and return (population, strata,
    sample size), or return None when a fresh draw is needed.

    ``old_path``: the stored sample (with ``_n_g``, ``_stratum``, ``_key``, ``_in``); ``ins`` / ``dels``:
    Spark DataFrames of the net inserted and deleted rows between the two versions (table columns and
    ``id_col``).  ``read(path)`` / ``write(table, path)`` read and replace a sample directory on the
    driver (default: local paths; the warehouse passes its own file system's)."""

    old = read(old_path)
    sdf = spark.read.parquet(old_path).limit(0)
    id_type = sdf.schema[id_col].dataType
    keep_cols = [c for c in old.column_names if c not in ("_n_g", "_in")]
    d_ins = _delta_arrow(ins, strata, seed, id_col, id_type, keep_cols)
    d_del = _delta_arrow(dels, strata, seed, id_col, id_type, [id_col, "_stratum"])

    # per stratum: old size, stored rows, cut-off; then the new size and quota
    stats = old.group_by("_stratum").aggregate([("_n_g", "max"), ("_key", "count"), ("_key", "max")]).to_pandas()
    stats.columns = [{"_n_g_max": "n_old", "_key_count": "stored", "_key_max": "cut"}.get(c, c) for c in stats.columns]
    stats = stats.set_index("_stratum")
    n_ins = d_ins.column("_stratum").to_pandas().value_counts()
    n_del = d_del.column("_stratum").to_pandas().value_counts()
    idx = stats.index.union(n_ins.index).union(n_del.index)
    st = stats.reindex(idx)
    n_old = st["n_old"].fillna(0).to_numpy(np.int64)
    stored = st["stored"].fillna(0).to_numpy(np.int64)
    cut = st["cut"].fillna(np.inf).to_numpy(float)
    n_new = n_old + n_ins.reindex(idx).fillna(0).to_numpy(np.int64) - n_del.reindex(idx).fillna(0).to_numpy(np.int64)
    whole = stored >= n_old
    k = quotas(n_new, theta)  # 0 for an emptied stratum

    # candidates: stored rows not deleted + inserted rows up to the cut-off (all of them for whole strata)
    kept = old.select(keep_cols).filter(pc.invert(pc.is_in(old.column(id_col), value_set=d_del.column(id_col))))
    d_ins = d_ins.cast(kept.schema)
    code_ins = idx.get_indexer(d_ins.column("_stratum").to_pandas())
    ok_ins = whole[code_ins] | (d_ins.column("_key").to_numpy() <= cut[code_ins])
    cand = pa.concat_tables([kept, d_ins.filter(pa.array(ok_ins))])
    code = idx.get_indexer(cand.column("_stratum").to_pandas())
    key = cand.column("_key").to_numpy()
    order = np.lexsort((key, code))
    code_s = code[order]
    known = np.bincount(code_s, minlength=len(idx))
    if np.any((n_new > 0) & (known < k)):
        return None  # a stratum has fewer known rows than its quota: draw afresh
    start = np.concatenate([[0], np.cumsum(known)[:-1]])
    rank = np.arange(len(order)) - start[code_s] + 1
    limit = reserve_sizes(k)
    take = rank <= limit[code_s]
    out = cand.take(pa.array(order[take]))
    out = out.append_column("_n_g", pa.array(n_new[code_s[take]], pa.int64()))
    out = out.append_column("_in", pa.array(rank[take] <= k[code_s[take]]))
    out = out.select(old.column_names).cast(old.schema)
    write(out, out_path)  # replaces the directory whole: nothing of an earlier attempt is read with it
    live = n_new > 0
    return int(n_new[live].sum()), int(live.sum()), int(k[live].sum())
