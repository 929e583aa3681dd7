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
"""

from __future__ import annotations

from typing import Sequence

from estimators.sampling import ROUND_GUARD, _key, reserve_size


def maintain(old, ins, dels, strata: Sequence[str], theta: float, seed: int, id_col: str = "_rid"):
    """The maintained sample (a lazy DataFrame with the old sample's columns) or None.

    ``old``: the stored sample with ``_n_g``, ``_stratum``, ``_key``, ``_in``; ``ins`` / ``dels``: the
    net inserted and deleted rows between the two versions (table columns and ``id_col``)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    strata = list(strata)
    t_adj = float(theta) * ROUND_GUARD
    # the key hashes the id's binary form: give the delta's ids the stored sample's type (batch ids
    # can be INT where the table, read as a union with its LONG base ids, has LONG)
    id_type = old.schema[id_col].dataType
    ins = ins.withColumn(id_col, F.col(id_col).cast(id_type))
    dels = dels.withColumn(id_col, F.col(id_col).cast(id_type))
    skey = F.to_json(F.struct(*[F.col(c) for c in strata]))
    per_old = old.groupBy("_stratum").agg(F.first("_n_g").alias("_n_old"), F.count(F.lit(1)).alias("_stored"),
                                          F.max("_key").alias("_cut"))
    d_ins = ins.groupBy(skey.alias("_stratum")).agg(F.count(F.lit(1)).alias("_n_ins"))
    d_del = dels.groupBy(skey.alias("_stratum")).agg(F.count(F.lit(1)).alias("_n_del"))
    per = (per_old.join(d_ins, "_stratum", "full_outer").join(d_del, "_stratum", "full_outer")
           .fillna(0, ["_n_old", "_stored", "_n_ins", "_n_del"])
           .withColumn("_n_new", F.col("_n_old") + F.col("_n_ins") - F.col("_n_del"))
           # every row of the stratum is known: it was stored whole, or it is new in this batch
           .withColumn("_whole", F.col("_stored") >= F.col("_n_old"))
           .withColumn("_k", F.greatest(F.lit(1), F.ceil(F.col("_n_new") * F.lit(t_adj))))
           .filter(F.col("_n_new") > 0))
    kept_old = old.join(dels.select(id_col), id_col, "left_anti").drop("_n_g", "_in")
    new_rows = (ins.withColumn("_key", _key(ins, seed, id_col)).withColumn("_stratum", skey)
                .select(*kept_old.columns))
    cand = kept_old.unionByName(new_rows).join(F.broadcast(per.select("_stratum", "_n_new", "_cut", "_whole", "_k")),
                                               "_stratum", "inner")
    cand = cand.filter(F.col("_whole") | (F.col("_key") <= F.col("_cut")))
    cand = cand.withColumn("_rank", F.row_number().over(Window.partitionBy("_stratum").orderBy("_key")))
    cand = cand.withColumn("_known", F.count(F.lit(1)).over(Window.partitionBy("_stratum")))
    short = cand.filter(F.col("_known") < F.col("_k")).limit(1).count()
    if short or per.join(cand.select("_stratum").distinct(), "_stratum", "left_anti").limit(1).count():
        return None  # a stratum has fewer known rows than its quota: draw afresh
    out = (cand.filter(F.col("_rank") <= reserve_size(F.col("_k")))
           .withColumn("_in", F.col("_rank") <= F.col("_k"))
           .withColumn("_n_g", F.col("_n_new").cast("long")))
    return out.select(*old.columns)
