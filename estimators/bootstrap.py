"""Vectorised stratified bootstrap for per-group aggregates (digest §2.5 and C6).

What it computes
----------------
A sample is a set of strata; stratum ``h`` has ``n_h`` sampled rows out of ``N_h`` population rows,
drawn uniformly without replacement.  A group (the unit a HAVING predicate is evaluated on) is
usually one stratum (the sample is stratified on the query's group-by attributes), but the code
treats a group as a *domain* that may span strata: a uniform sample is just one stratum holding
every group.  All estimators are Horvitz-Thompson sums with row weight ``N_h / n_h``:

* ``SUM_g   = sum_h N_h/n_h * sum_{t in s_h, t in g} u(t) v(t)``
* ``COUNT_g = sum_h N_h/n_h * sum_{t in s_h, t in g} u(t)``
* ``AVG_g   = SUM_g / COUNT_g`` (ratio estimator)
* ``MIN_g / MAX_g`` = the sample minimum / maximum (see the rule in ``aggregates``).

``u(t)`` is the row's predicate indicator (WHERE) and also excludes NULL values, as SQL does.

Replicates
----------
Each of the ``B`` replicates redraws ``n_h`` rows *with replacement* inside every stratum
independently (one multinomial count vector per stratum) -- the paper's per-stratum bootstrap
(B = 50, digest §2.5).  All strata and all replicates are drawn in one vectorised step.

Two refinements [INFERRED, not in the paper]:

* **Exact strata.** A stratum with ``n_h == N_h`` is the whole population; it is never resampled, so
  a fully sampled group gets replicates identical to its exact value and a zero standard error.
* **Finite-population correction** (``fpc=True``, default).  The with-replacement bootstrap ignores
  that rows are drawn without replacement and overstates the variance by ``1/(1-f_h)``.  We use the
  rescaling bootstrap: replicate weight ``N_h/n_h * (1 + sqrt(1-f_h) * (c - 1))`` where ``c`` is the
  multinomial count.  For the linear statistics SUM and COUNT this shrinks every replicate towards
  the plug-in estimate by exactly ``sqrt(1-f_h)``, so the bootstrap variance matches the
  without-replacement variance; at ``f_h = 1`` it gives the exact strata rule above.  MIN/MAX and
  group existence use the raw counts (a row is in a replicate iff ``c > 0``).

Point estimate
--------------
The point estimate is the plug-in estimate on the sample itself, *not* the paper's mean of the
bootstrap means (digest §2.5).  Both have the same expectation; the mean of replicates only adds
Monte-Carlo noise and breaks exactness for fully sampled strata.  With one sampled row (the Fig. 5/6
example) the two coincide.

Determinism: every function takes a seed or a ``numpy.random.Generator``;
``bootstrap_groups_pandas`` derives one generator per group from ``(seed, group key)`` so that
the answer does not depend on how Spark splits the groups among tasks.
"""

from __future__ import annotations

import hashlib
import math
import sys
import warnings
from typing import Any, Sequence

import numpy as np
import pandas as pd
from pyspark import cloudpickle
from pyspark.sql import types as T
from scipy import sparse

from advisor.caches import BoundedMemo
from estimators.prefetch_jobs import claim

AGG_FUNCS = ("sum", "count", "avg", "min", "max")
_ALIASES = {"mean": "avg", "average": "avg"}


def normalize_agg(func: str) -> str:
    """Lower-case aggregate name, ``mean`` -> ``avg``; raise ``ValueError`` for unsupported ones.

    One spelling everywhere keeps column names (``sum(x)``) and dispatch tables consistent.
    """
    f = _ALIASES.get(str(func).strip().lower(), str(func).strip().lower())
    if f not in AGG_FUNCS:
        raise ValueError(f"unsupported aggregate {func!r}; expected one of {AGG_FUNCS}")
    return f


def _norm_key_value(v: Any) -> str:
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        try:
            v = v.item()
        except (ValueError, AttributeError):
            pass
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return "\x00null"
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return repr(v)


def group_seed(seed: int, key: Any) -> int:
    """A stable 64-bit seed for one group, from the global seed and the group's key values.

    Why: Spark hands groups to tasks in an order that depends on partitioning; seeding each group
    from its own key makes the replicates identical wherever and in whatever order the group is
    processed (driver or executor, one group per call or many).  Integral floats hash like ints so
    that a key that went through a nullable (float) column still matches.
    """
    if not isinstance(key, tuple):
        key = (key,)
    text = "\x1f".join(_norm_key_value(v) for v in key) + f"\x1e{int(seed)}"
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def _rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def replicate_counts(stratum_idx: np.ndarray, B: int, rng: np.random.Generator | int | None) -> np.ndarray:
    """Multinomial resample counts, shape ``(B, n)``: how often each row is drawn in each replicate.

    Within every stratum, ``n_h`` rows are drawn with replacement from the stratum's ``n_h`` sample
    rows, independently per stratum and replicate, so each row of the result sums to ``n_h`` over
    the rows of stratum ``h``.  Fully vectorised: one uniform matrix, one ``bincount``.
    """
    stratum_idx = np.asarray(stratum_idx, dtype=np.int64)
    n = stratum_idx.shape[0]
    if n == 0:
        return np.zeros((B, 0), dtype=np.int64)
    rng = _rng(rng)
    presorted = bool(np.all(stratum_idx[1:] >= stratum_idx[:-1]))  # estimate_groups sorts by stratum
    order = np.arange(n) if presorted else np.argsort(stratum_idx, kind="stable")
    _, start, size = np.unique(stratum_idx[order], return_index=True, return_counts=True)
    slot_stratum = np.repeat(np.arange(start.shape[0]), size)
    off, sz = start[slot_stratum], size[slot_stratum]
    u = rng.random((B, n))
    u *= sz  # in place, one (B, n) temporary: 4-5x faster than the textbook expression
    pick = u.astype(np.int64)
    del u
    np.minimum(pick, sz - 1, out=pick)
    pick += off
    pick += (np.arange(B, dtype=np.int64) * n)[:, None]
    c_sorted = np.bincount(pick.ravel(), minlength=B * n).reshape(B, n)
    if presorted:
        return c_sorted
    counts = np.empty_like(c_sorted)
    counts[:, order] = c_sorted
    return counts


def stratum_sizes(stratum_idx: np.ndarray, N_h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-stratum sample sizes ``n_h`` and a validated float copy of ``N_h``.

    Raises ``ValueError`` if a stratum has more sample rows than population rows, which would make
    every scaled estimate wrong (usually a stale ``_n_g``).
    """
    stratum_idx = np.asarray(stratum_idx, dtype=np.int64)
    N_h = np.asarray(N_h, dtype=float)
    n_h = np.bincount(stratum_idx, minlength=N_h.shape[0]).astype(float)
    bad = (n_h > N_h) & (n_h > 0)
    if bad.any():
        raise ValueError(f"stratum has more sample rows than population rows (n={n_h[bad][0]:.0f}, "
                         f"N={N_h[bad][0]:.0f}); is the _n_g column stale?")
    return n_h, N_h


def point_weights(stratum_idx: np.ndarray, N_h: np.ndarray) -> np.ndarray:
    """Horvitz-Thompson row weights ``N_h / n_h`` of the plug-in (point) estimate, shape ``(n,)``."""
    n_h, N_h = stratum_sizes(stratum_idx, N_h)
    s = np.asarray(stratum_idx, dtype=np.int64)
    return N_h[s] / n_h[s]


def _rescaling(s: np.ndarray, N_h: np.ndarray, fpc: bool) -> tuple:
    """``(n_h, N_h, exact_h, lam_h)`` of the rescaling bootstrap: per-stratum sample and population
    sizes, which strata are fully sampled, and the factor ``sqrt(1 - n_h/N_h)`` (1 without
    ``fpc``; 0 for fully sampled strata)."""
    n_h, N_h = stratum_sizes(s, N_h)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(N_h > 0, n_h / N_h, 1.0)
    exact_h = f >= 1.0
    lam = np.sqrt(np.clip(1.0 - f, 0.0, 1.0)) if fpc else np.ones_like(f)
    lam[exact_h] = 0.0
    return n_h, N_h, exact_h, lam


def replicate_weights(stratum_idx: np.ndarray, N_h: np.ndarray, B: int,
                      rng: np.random.Generator | int | None, fpc: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap row weights and counts, both ``(B, n)``, for a stratified sample.

    ``weights[b, i] = N_h/n_h * (1 + lam_h * (counts[b, i] - 1))`` with ``lam_h = sqrt(1 - n_h/N_h)``
    under ``fpc`` (else 1), and ``lam_h = 0`` for fully sampled strata, whose counts are also forced
    to 1 so they are never resampled.  See the module docstring for why.
    """
    s = np.asarray(stratum_idx, dtype=np.int64)
    n_h, N_h, exact_h, lam = _rescaling(s, N_h, fpc)
    counts = replicate_counts(s, B, rng)
    counts[:, exact_h[s]] = 1
    base = (N_h[s] / np.maximum(n_h[s], 1.0))
    weights = base[None, :] * (1.0 + lam[s][None, :] * (counts - 1))
    return weights, counts


def _weights_t(s: np.ndarray, N_h: np.ndarray, B: int, rng: np.random.Generator,
               fpc: bool) -> tuple[np.ndarray, np.ndarray]:
    """``replicate_weights`` computed straight into the ``(n, B)`` transpose, in place, with
    ``counts > 0``: bit for bit the same numbers (the tests compare them), without its three
    ``(B, n)`` float temporaries and the transposing copy (a TPC-H SF1 sample: ~0.2 s a query)."""
    n_h, N_h, exact_h, lam = _rescaling(s, N_h, fpc)
    counts = replicate_counts(s, B, rng)
    exact_rows = exact_h[s]
    if exact_rows.any():
        counts[:, exact_rows] = 1
    wt = np.empty((counts.shape[1], counts.shape[0]))
    np.subtract(counts.T, 1, out=wt, casting="unsafe")
    wt *= lam[s][:, None]
    wt += 1.0
    wt *= (N_h[s] / np.maximum(n_h[s], 1.0))[:, None]
    return wt, counts > 0


# replicate_blocks' cache, per process (a replay runs one per strategy); 50 replicates of 100k rows:
# 45 MB, of a TPC-H SF1 sample (300k rows): 135 MB.  At 256 MB one SF1 sample fitted and the advice
# harness's queries, which alternate between 9 samples, missed 31 times (~0.28 s each; BENCHMARKS.md).
BLOCKS_CACHE_BYTES = 1 << 30
_BLOCKS = BoundedMemo("bootstrap blocks", max_bytes=BLOCKS_CACHE_BYTES, rank=2, keep_one=False,
                      size_of=lambda v: sum(x.nbytes + y.nbytes for x, y in v[0]))


def replicate_blocks(stratum_idx: np.ndarray, N_h: np.ndarray, B: int, block: int,
                     rng: np.random.Generator, fpc: bool = True) -> list:
    """``replicate_weights`` for ``B`` replicates in blocks of ``block``: a list of ``(weights_t,
    drawn)``, read-only, drawn from ``rng`` (which is left where the draws leave it).
    ``weights_t`` is the ``(n, block)`` transpose, the layout ``group_sums`` streams; ``drawn`` is
    ``counts > 0`` (bool, ``(block, n)``): all that ``aggregate_weighted`` (MIN/MAX) and
    ``group_exists`` read of the counts, at one byte a cell instead of eight.

    The draws depend only on the strata layout, ``N_h``, ``B``, ``block``, ``fpc`` and the
    generator's state, and every query over one cached sample has the same layout (rows are put in
    canonical stratum order), so the blocks are kept in a small in-process cache (at most
    ``BLOCKS_CACHE_BYTES``) and a hit also restores the generator's state after the draws: results
    are bit-for-bit those of drawing again (the paper caches bootstrap statistics for reuse too).
    Drawing them was ~15 ms of a ~130 ms cached estimation on flights."""
    s = np.ascontiguousarray(stratum_idx, dtype=np.int64)
    N = np.ascontiguousarray(N_h, dtype=float)
    key = blocks_key(s, N, B, block, fpc, rng)
    hit = _BLOCKS.pop(key, None)
    if hit is None:
        hit = claim(key)  # computed ahead on the helper thread for this very layout and stream
    if hit is not None:
        _BLOCKS[key] = hit
        rng.bit_generator.state = hit[1]
        _trim_blocks()
        return hit[0]
    out = draw_blocks(s, N, B, block, rng, fpc)
    _BLOCKS[key] = (out, rng.bit_generator.state)
    _trim_blocks()
    return out


def blocks_key(s: np.ndarray, N: np.ndarray, B: int, block: int, fpc: bool, rng: np.random.Generator) -> tuple:
    """What ``replicate_blocks``' draws depend on: the strata layout (digested), ``N_h``, ``B``,
    ``block``, ``fpc`` and the generator's state."""
    digest = hashlib.blake2b(s.tobytes() + b"|" + N.tobytes(), digest_size=16).hexdigest()
    return digest, int(B), int(block), bool(fpc), repr(rng.bit_generator.state)


def block_size(n: int, block_cells: int) -> int:
    """Replicates per block for ``n`` sample rows: about ``block_cells`` weights at a time."""
    return max(1, int(block_cells) // max(int(n), 1))


def draw_blocks(s: np.ndarray, N: np.ndarray, B: int, block: int, rng: np.random.Generator,
                fpc: bool) -> list:
    """The ``(weights_t, drawn)`` blocks of ``replicate_blocks``, drawn afresh and made read-only."""
    out = []
    for b0 in range(0, B, block):
        wt, drawn = _weights_t(s, N, min(block, B - b0), rng, fpc)
        wt.setflags(write=False)
        drawn.setflags(write=False)
        out.append((wt, drawn))
    return out


def blocks_cached(key: tuple) -> bool:
    """Are the replicate blocks of ``key`` (``blocks_key``) in the cache?"""
    return key in _BLOCKS


def _trim_blocks() -> None:
    """Evict the least recently used blocks until the cache holds at most ``BLOCKS_CACHE_BYTES``."""
    _BLOCKS.evict()


class GroupIndex:
    """Sort-once helper to reduce row-aligned arrays to per-group values with ``ufunc.reduceat``.

    Every group must own at least one row (groups are derived from the sample rows).
    """

    def __init__(self, group_idx: np.ndarray, n_groups: int):
        group_idx = np.asarray(group_idx, dtype=np.int64)
        sizes = np.bincount(group_idx, minlength=n_groups)
        if sizes.shape[0] != n_groups or (sizes == 0).any():
            raise ValueError("every group must have at least one sample row")
        self.order = np.argsort(group_idx, kind="stable")
        self.starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self.sizes = sizes
        self.n_groups = n_groups

    def reduce(self, ufunc: np.ufunc, x: np.ndarray) -> np.ndarray:
        """Apply ``ufunc.reduceat`` along the last axis per group: ``(..., n) -> (..., G)``."""
        return ufunc.reduceat(np.take(x, self.order, axis=-1), self.starts, axis=-1)


def aggregate_weighted(func: str, y: np.ndarray, m: np.ndarray, weights: np.ndarray,
                       counts: np.ndarray, gidx: GroupIndex) -> np.ndarray:
    """Per-group aggregate estimate for weight vector(s): ``(n,) -> (G,)`` or ``(B, n) -> (B, G)``.

    ``y`` are the values with NULL/failing rows already set to 0, ``m`` the contributing-row mask.
    SUM/COUNT/AVG are weighted (Horvitz-Thompson); MIN/MAX use the rows with ``counts > 0``.
    SUM/AVG/MIN/MAX are NaN (SQL NULL) when no row contributes; COUNT is then 0.
    """
    func = normalize_agg(func)
    m = np.asarray(m, dtype=bool)
    if func in ("sum", "count", "avg"):
        wm = weights * m
        den = gidx.reduce(np.add, wm)
        if func == "count":
            return den
        num = gidx.reduce(np.add, wm * y)
        with np.errstate(invalid="ignore", divide="ignore"):
            if func == "sum":
                return np.where(den > 0, num, np.nan)
            return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    drawn = (counts > 0) & m
    if func == "min":
        r = gidx.reduce(np.minimum, np.where(drawn, y, np.inf))
    else:
        r = gidx.reduce(np.maximum, np.where(drawn, y, -np.inf))
    return np.where(np.isfinite(r), r, np.nan)


def group_sums(values: np.ndarray, group_idx: np.ndarray, n_groups: int, weights_t: np.ndarray) -> np.ndarray:
    """``(B, G)``: per replicate b and group g, the sum of ``values[i] * weights_t[i, b]`` over g's
    rows, as one sparse (G x n) by dense (n x B) product.  The same sums as
    ``gidx.reduce(np.add, weights * values)`` without the two ``(B, n)`` temporaries and the gather
    by group that made SUM/COUNT/AVG a third of a cached estimation on crimes."""

    n = group_idx.shape[0]
    S = sparse.csr_matrix((np.asarray(values, dtype=float), (group_idx, np.arange(n))), shape=(n_groups, n))
    return np.asarray(S @ weights_t).T


def group_exists(u: np.ndarray, counts: np.ndarray, gidx: GroupIndex) -> np.ndarray:
    """Whether each group has at least one drawn row passing WHERE (SQL: the group exists).
    ``counts``: resample counts or the ``counts > 0`` mask."""
    counts = np.asarray(counts)
    drawn = counts if counts.dtype == bool else counts > 0
    return gidx.reduce(np.logical_or, drawn & np.asarray(u, dtype=bool))


def replicate_stderr(reps: np.ndarray, axis: int = 0) -> np.ndarray:
    """NaN-ignoring standard deviation (ddof=1) of replicates; exactly 0 for constant replicates.

    Constant replicates (exact or single-row groups) would otherwise give ~1e-16 from rounding in
    the mean, which downstream code must be able to test with ``== 0``.
    """
    reps = np.asarray(reps, dtype=float)
    finite = np.isfinite(reps)
    k = finite.sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sd = np.nanstd(np.where(finite, reps, np.nan), axis=axis, ddof=1) if reps.size else np.zeros(0)
        lo = np.nanmin(np.where(finite, reps, np.inf), axis=axis)
        hi = np.nanmax(np.where(finite, reps, -np.inf), axis=axis)
    sd = np.where(k >= 2, sd, np.where(k == 1, 0.0, np.nan))
    return np.where((k >= 1) & (lo == hi), 0.0, sd)


def _prepare(values: np.ndarray, mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    v = np.asarray(values, dtype=float)
    m = ~np.isnan(v)
    if mask is not None:
        m &= np.asarray(mask, dtype=bool)
    return np.where(m, v, 0.0), m


def bootstrap_group(values: np.ndarray, n_g: int, agg: str, B: int = 50,
                    rng: np.random.Generator | int | None = None, mask: np.ndarray | None = None,
                    fpc: bool = True) -> tuple[float, float, np.ndarray]:
    """Bootstrap one group: ``(point, stderr, replicates)`` with ``replicates.shape == (B,)``.

    ``values`` are the group's sampled values (NaN = NULL), ``n_g`` is the group's *population*
    size (its ``_n_g``), ``agg`` one of sum/count/avg/min/max, ``mask`` an optional per-row WHERE
    indicator.  SUM and COUNT scale by ``n_g / len(values)``; COUNT counts non-NULL values (use a
    column of ones for ``COUNT(*)``, or 0/1 values with ``sum`` for "rows passing a predicate").
    A fully sampled group (``len(values) == n_g``) returns its exact aggregate and stderr 0.
    """
    func = normalize_agg(agg)
    y, m = _prepare(values, mask)
    n = y.shape[0]
    if n == 0:
        raise ValueError("bootstrap_group needs at least one sampled value")
    if n_g < n:
        raise ValueError(f"population size n_g={n_g} is smaller than the sample size {n}")
    strat = np.zeros(n, dtype=np.int64)
    N_h = np.array([float(n_g)])
    gidx = GroupIndex(np.zeros(n, dtype=np.int64), 1)
    w0 = point_weights(strat, N_h)
    point = float(aggregate_weighted(func, y, m, w0, np.ones(n, dtype=np.int64), gidx)[0])
    w, c = replicate_weights(strat, N_h, B, _rng(rng), fpc=fpc)
    reps = aggregate_weighted(func, y, m, w, c, gidx)[:, 0]
    return point, float(replicate_stderr(reps)), reps


def bootstrap_groups_pandas(pdf: pd.DataFrame, group_cols: Sequence[str], value_col: str | None,
                            agg: str, B: int = 50, seed: int = 0, n_col: str = "_n_g",
                            fpc: bool = True, mask_col: str | None = None) -> pd.DataFrame:
    """Bootstrap every group of a sample frame; one output row per group.

    Output columns: the group columns, ``n`` (sample rows), ``N`` (population rows, from
    ``n_col``), ``point``, ``stderr`` and ``replicates`` (a length-``B`` float array).  Returning
    the replicates rather than a pass probability keeps the result reusable for any HAVING constant
    and for nested/top-k estimation (the paper caches "sample statistics" for reuse, digest §2.4).

    The groups must be the sample's strata (``_n_g`` is the group's population size); for groups
    that span strata use ``aggregates.estimate_groups``.

    Written to be the function of ``groupBy(group_cols).applyInPandas``: it accepts a frame with one
    or many groups, and seeds each group from ``group_seed(seed, key)`` so the result is the same
    whichever way groups are split and in whatever order a group's rows arrive (rows are sorted by
    value first).  ``value_col`` may be ``None`` or ``'*'`` for ``COUNT(*)``.
    """
    group_cols = list(group_cols)
    cols = group_cols + ["n", "N", "point", "stderr", "replicates"]
    if len(pdf) == 0:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    if group_cols:
        parts = pdf.groupby(group_cols, sort=True, dropna=False)
    else:
        parts = [((), pdf)]
    rows = []
    for key, part in parts:
        key = key if isinstance(key, tuple) else (key,)
        vals = (np.ones(len(part)) if value_col in (None, "*")
                else part[value_col].to_numpy(dtype=float, na_value=np.nan))
        mask = None if mask_col is None else part[mask_col].fillna(False).to_numpy(dtype=bool)
        # canonical row order (rows equal in value and mask are interchangeable), so the result
        # does not depend on the order in which Spark delivers a group's rows
        order = np.lexsort((vals,) if mask is None else (vals, mask))
        vals = vals[order]
        mask = None if mask is None else mask[order]
        N = int(part[n_col].max())
        point, se, reps = bootstrap_group(vals, N, agg, B=B, rng=np.random.default_rng(group_seed(seed, key)),
                                          mask=mask, fpc=fpc)
        row = dict(zip(group_cols, key))
        row.update(n=len(part), N=N, point=point, stderr=se, replicates=np.asarray(reps, dtype=float))
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


def bootstrap_on_spark(sample_df, group_cols: Sequence[str], value_col: str | None, agg: str,
                       B: int = 50, seed: int = 0, n_col: str = "_n_g", fpc: bool = True,
                       mask_col: str | None = None):
    """Run ``bootstrap_groups_pandas`` on the executors, one call per group (``applyInPandas``).

    Returns a Spark DataFrame with the group columns (original types), ``n``/``N`` (long),
    ``point``/``stderr`` (double) and ``replicates`` (array<double>).  Results equal the local
    ``bootstrap_groups_pandas`` on the collected sample, because seeds are per group key.
    This module is registered with cloudpickle "by value" so executors do not need the package
    installed (useful on a cluster started from a source checkout).
    """

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    group_cols = list(group_cols)
    schema = T.StructType(
        [sample_df.schema[c] for c in group_cols]
        + [T.StructField("n", T.LongType()), T.StructField("N", T.LongType()),
           T.StructField("point", T.DoubleType()), T.StructField("stderr", T.DoubleType()),
           T.StructField("replicates", T.ArrayType(T.DoubleType()))])
    def fn(pdf: pd.DataFrame) -> pd.DataFrame:
        return bootstrap_groups_pandas(pdf, group_cols=group_cols, value_col=value_col, agg=agg, B=B,
                                       seed=seed, n_col=n_col, fpc=fpc, mask_col=mask_col)

    needed = list(dict.fromkeys(group_cols + [c for c in (value_col, n_col, mask_col)
                                              if c not in (None, "*")]))
    return sample_df.select(*needed).groupBy(*group_cols).applyInPandas(fn, schema)
