"""Stratified reservoir sampling on Spark (digest §2.3, Definition 6, C5).

One stratum per distinct value of the strata columns (the query's group-by attributes).  Stratum g
with ``N_g`` rows keeps ``max(1, ceil(theta * N_g))`` rows drawn uniformly without replacement --
proportional allocation with a floor of one so that every group is represented (the floor is
[INFERRED] from "each group is represented"; the Fig. 5 example keeps one row of each 1- and 2-row
group).  Implementation: a window partitioned by the strata ordered by a seeded uniform key, keep
``row_number <= quota``; one shuffle.  This is equivalent to per-group reservoir sampling.

Output rows carry ``_n_g`` (the stratum's population size, long) and ``_stratum`` (a stable string
key: the JSON of the strata values, e.g. ``{"year":2013,"pid":4}``; NULL values are omitted by
``to_json``, which still identifies the stratum uniquely).  The sample keeps *all* columns so it can
be reused by any later query with the same group-by (digest §2.4).

Uniform sample: without strata, or as the **fallback** when there are more strata than the sample
budget ``theta * N`` (digest §2.3; or more than ``max_strata`` when given), the sample is an exact
uniform sample of ``max(1, ceil(theta * N))`` rows (the rows with the smallest keys -- not a
Bernoulli sample, whose size is random).  Without strata ``_n_g = N`` and the single stratum is
``"{}"``.  In the fallback the rows are **post-stratified**: each carries its own group's ``_n_g``
(exact, from the strata count job) and ``_stratum``, so a group's estimate scales its ``n_g`` sampled
rows by ``N_g / n_g`` (unbiased given ``n_g >= 1``) instead of by ``1 / theta``, which inflated
every small group's SUM.  The fallback is reported in ``Sample.uniform_fallback``; groups can then be
missing from the sample (they count as failing: sizes of key-like group-bys are underestimated).

Rounding: ``theta * N`` is computed as ``N * (theta * (1 - 1e-12))`` before the ceiling, so that
binary floating point does not turn e.g. ``0.1 * 30 = 3.0000000000000004`` into 4 rows.  ``quota``
is the same rule in Python.

Determinism: with ``id_col`` (a unique, stable row id such as the catalog's), the key is
``xxhash64(seed, id)`` mapped to [0, 1): the sample depends only on the data and the seed, not on
partitioning.  Without it the key is ``rand(seed)``, which Spark seeds per input partition: the
sample is deterministic for a fixed seed *and a fixed input partitioning and row order* (true for
the same files read the same way, not across repartitioning).  The returned DataFrame is lazy;
persist it if it is used more than once on input whose partitioning may change.

``estimators.sampling.reservoir_local`` is this draw's twin on the driver (pyarrow), used for tables that fit
there: the same keys, quotas, reserve, fallback and labels, so it keeps the very same rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from pyspark.sql import Column, Window, functions as F

from advisor.numeric import EXACT_INT

ROUND_GUARD = 1.0 - 1e-12
_TWO53 = float(EXACT_INT)


def quota(N: int, theta: float) -> int:
    """Sample rows kept for a stratum of ``N`` rows: ``max(1, ceil(theta * N))`` (0 if ``N == 0``)."""
    if N <= 0:
        return 0
    return max(1, math.ceil(N * (theta * ROUND_GUARD)))


@dataclass
class Sample:
    """A drawn sample and how it was drawn.

    ``df``: the sampled rows + ``_n_g`` + ``_stratum``; ``population``: rows of the input;
    ``n_strata``: distinct strata in the input (1 without strata); ``uniform_fallback``: True when
    strata were requested but a uniform sample was drawn instead; ``sample_size``: rows in ``df``;
    ``strata_sizes``: lazy DataFrame of every stratum with its ``_n_g`` (None for a uniform sample
    without strata) -- the digest's ``groups`` table, useful when groups may be missing from a
    fallback sample.
    """

    df: object
    strata: list
    theta: float
    seed: int
    uniform_fallback: bool
    population: int
    n_strata: int
    sample_size: int = 0
    id_col: str | None = None
    strata_sizes: object = None


def sample_key(df, seed: int, id_col: str | None):
    if id_col is None:
        return F.rand(seed)
    h = F.xxhash64(F.lit(int(seed)), F.col(id_col))
    return F.pmod(h, F.lit(EXACT_INT)).cast("double") / F.lit(_TWO53)


def _uniform(df, theta: float, seed: int, N: int, id_col: str | None, u: str):
    """Exact-size uniform sample: the ``k`` rows with the smallest keys."""
    k = quota(N, theta)
    keyed = df.withColumn(u, sample_key(df, seed, id_col))
    # pre-filter on the key to avoid sorting the table; widen to everything if it kept too few
    t = min(1.0, theta + 6.0 * math.sqrt(max(theta * (1.0 - theta), 1e-12) / max(N, 1)) + 20.0 / max(N, 1))
    pre = keyed.filter(F.col(u) < F.lit(t)) if t < 1.0 else keyed
    if t < 1.0 and pre.count() < k:
        pre = keyed
    return (pre.orderBy(F.col(u)).limit(k)
            .withColumn("_n_g", F.lit(int(N)).cast("long"))
            .withColumn("_stratum", F.lit("{}"))
            .drop(u))


def quotas(N, theta: float):
    """``quota`` for an array of stratum sizes (numpy int64; 0 for an empty stratum)."""
    N = np.asarray(N, dtype=np.int64)
    k = np.maximum(1, np.ceil(N * (float(theta) * ROUND_GUARD))).astype(np.int64)
    return np.where(N > 0, k, 0)


def reserve_sizes(k):
    """``reserve_size`` for an array of quotas (numpy int64; 0 stays 0)."""
    k = np.asarray(k, dtype=np.int64)
    return np.where(k > 0, k + np.ceil(2.0 * np.sqrt(k)).astype(np.int64) + 2, 0)


def reserve_size(k):
    """Rows kept per stratum with a reserve: ``k + ceil(2 sqrt(k)) + 2`` (a Spark column or an int)."""
    if isinstance(k, Column):
        return k + F.ceil(F.lit(2.0) * F.sqrt(k)) + F.lit(2)
    return int(k) + math.ceil(2.0 * math.sqrt(int(k))) + 2


def stratified_sample(df, strata: Sequence[str], theta: float, seed: int,
                      max_strata: int | None = None, id_col: str | None = None, prefilter: bool = True,
                      reserve: bool = False) -> Sample:
    """Draw a stratified reservoir sample (one stratum per distinct value of ``strata``).

    ``theta`` in (0, 1] is the sample rate; ``max_strata`` the largest number of strata to stratify
    on (default: the budget ``theta * N``; more strata than sample slots cannot all be represented);
    ``id_col`` an optional unique row id for partitioning-independent determinism.  Runs one
    aggregation job (population, strata count, sample size) and returns the lazy sample.  With
    ``prefilter`` only keys under a per-stratum threshold are ranked (same sample, unless a stratum
    falls short: then the sample has fewer than ``sample_size`` rows and must be redrawn without).
    With ``reserve`` (stratified draws only) each stratum also keeps its next ``reserve_size(k) - k``
    rows by key, and the output carries the key ``_key`` and ``_in`` (among the ``k`` sampled rows):
    the stored rows of a stratum are then exactly its rows with a key up to the largest stored one,
    which is what ``estimators.sampling.sample_delta`` needs to maintain the sample from a delta.
    """

    if not (0.0 < float(theta) <= 1.0):
        raise ValueError(f"theta must be in (0, 1], got {theta}")
    strata = list(strata)
    missing = [c for c in strata + ([id_col] if id_col else []) if c not in df.columns]
    if missing:
        raise ValueError(f"columns not in the table: {missing}")
    theta = float(theta)
    t_adj = theta * ROUND_GUARD
    u, rn = "__sample_key", "__sample_rn"
    base = df.drop("_n_g", "_stratum")

    if not strata:
        N = base.count()
        return Sample(df=_uniform(base, theta, seed, N, id_col, u), strata=[], theta=theta, seed=seed,
                      uniform_fallback=False, population=int(N), n_strata=1 if N else 0,
                      sample_size=quota(N, theta), id_col=id_col)

    sizes = base.groupBy(*strata).agg(F.count(F.lit(1)).alias("_n_g"))
    q = F.greatest(F.lit(1), F.ceil(F.col("_n_g") * F.lit(t_adj)))
    row = sizes.agg(F.count(F.lit(1)).alias("k"), F.sum("_n_g").alias("N"), F.sum(q).alias("s")).collect()[0]
    n_strata, N = int(row["k"]), int(row["N"] or 0)
    limit = theta * N if max_strata is None else max_strata
    strata_sizes = sizes.withColumn("_stratum", F.to_json(F.struct(*[F.col(c) for c in strata])))
    if N > 0 and n_strata > limit:
        # post-stratify: each sampled row carries its own group's size and key, so a group's
        # estimate scales its n_g sampled rows by N_g / n_g rather than by 1/theta (which, for
        # small groups, inflates every sampled group's SUM ~N_g-fold)
        uni = _uniform(base, theta, seed, N, id_col, u).drop("_n_g", "_stratum")
        post = uni.join(strata_sizes, on=[uni[c].eqNullSafe(strata_sizes[c]) for c in strata], how="inner")
        post = post.select(*[uni[c] for c in base.columns], strata_sizes["_n_g"], strata_sizes["_stratum"])
        return Sample(df=post, strata=strata, theta=theta, seed=seed,
                      uniform_fallback=True, population=N, n_strata=n_strata, sample_size=quota(N, theta),
                      id_col=id_col, strata_sizes=strata_sizes)

    w_ord = Window.partitionBy(*strata).orderBy(F.col(u))
    keyed = base.withColumn(u, sample_key(base, seed, id_col))
    if prefilter:
        # Only rows whose key is below a per-stratum threshold t_g can be among the stratum's k_g
        # smallest keys, unless fewer than k_g rows fall below it (a few sigma away; the caller
        # checks the sample size and redraws with prefilter=False).  Sorting those instead of the
        # whole table gives the identical sample.
        k = F.greatest(F.lit(1), F.ceil(F.col("_n_g") * F.lit(t_adj)))
        if reserve:
            k = reserve_size(k)
        thr = sizes.select(*strata, "_n_g", F.least(F.lit(1.0), (k + F.lit(4.0) * F.sqrt(k) + F.lit(10.0))
                                                    / F.col("_n_g")).alias("_t"))
        cond = [keyed[c].eqNullSafe(thr[c]) for c in strata]
        ranked = (keyed.join(F.broadcast(thr), on=cond, how="inner")
                  .select(*[keyed[c] for c in keyed.columns], thr["_n_g"], thr["_t"])
                  .filter(F.col(u) < F.col("_t")).drop("_t"))
    else:
        ranked = keyed.withColumn("_n_g", F.count(F.lit(1)).over(Window.partitionBy(*strata)).cast("long"))
    quota_col = F.greatest(F.lit(1), F.ceil(F.col("_n_g") * F.lit(t_adj)))
    out = (ranked.withColumn(rn, F.row_number().over(w_ord))
           .filter(F.col(rn) <= (reserve_size(quota_col) if reserve else quota_col))
           .withColumn("_stratum", F.to_json(F.struct(*[F.col(c) for c in strata]))))
    if reserve:
        out = out.withColumn("_in", F.col(rn) <= quota_col).withColumnRenamed(u, "_key").drop(rn)
    else:
        out = out.drop(u, rn)
    return Sample(df=out, strata=strata, theta=theta, seed=seed, uniform_fallback=False, population=N,
                  n_strata=n_strata, sample_size=int(row["s"] or 0), id_col=id_col,
                  strata_sizes=strata_sizes)
