"""The stratified reservoir sample of ``sampling.stratified_sample``, drawn on the driver with pyarrow.

Same rule, same keys, same rows: each row's key is Spark's ``xxhash64(seed, _rid)`` mapped to [0, 1)
(``spark_hash``), a stratum keeps its ``quota(N_g)`` smallest keys (plus the reserve up to
``reserve_size``), the fallback to a uniform sample and its post-stratification are the same, and
``_stratum`` is Spark's ``to_json`` text (``stratum_labels``).  So a sample drawn here can be
maintained from a delta (``sample_delta``) exactly like one drawn by Spark, and the tests compare the
two row for row.

Why: a Spark draw of a table that fits in the driver's memory costs two jobs, a shuffle and a write
-- 4-7 s for TPC-H SF1's lineitem, and more than capturing every candidate's sketch on flights -- while
pyarrow decodes the same files in a fraction of that.  Larger tables, and strata of a type whose
label is not reproduced (floating point), are drawn by Spark (``advisor.estimation.size_estimates.get_sample``).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from estimators.prefetch_jobs import helper_pool
from estimators.sampling.reservoir_spark import quota, quotas, reserve_sizes
from estimators.sampling.spark_hash import sample_keys
from estimators.sampling.stratum_labels import group_codes, labels


@dataclass
class LocalSample:
    """A sample drawn on the driver: the rows as an Arrow table (``_n_g``, ``_stratum`` and, with a
    reserve, ``_key`` and ``_in``) and the same counts as ``sampling.Sample``."""

    table: object
    population: int
    n_strata: int
    sample_size: int
    uniform_fallback: bool
    # a stratified draw's (label, sample size, population size) per stratum (``prefetch.layout``)
    strata_layout: tuple | None = None


def _smallest(u: np.ndarray, k: int) -> np.ndarray:
    """Row positions of the ``k`` smallest keys, in key order."""
    if k >= len(u):
        return np.argsort(u, kind="stable")
    part = np.argpartition(u, k - 1)[:k]
    return part[np.argsort(u[part], kind="stable")]


def _take(table, rows: np.ndarray):
    """``table.take(rows)`` for ascending ``rows``, batch by batch: a take across a table of many
    chunks (a dataset read gives ~50 per SF1 column) costs ~8x more (0.59 s against 0.07 s for
    360k of lineitem's 6M rows)."""

    out, lo = [], 0
    for b in table.to_batches():
        hi = lo + b.num_rows
        a, z = np.searchsorted(rows, [lo, hi])
        if z > a:
            out.append(b.take(pa.array(rows[a:z] - lo)))
        lo = hi
    return pa.Table.from_batches(out, schema=table.schema)


def _with(table, **cols):
    for name, (values, typ) in cols.items():
        table = table.append_column(name, pa.array(values, typ))
    return table


def _by_stratum_then_key(code: np.ndarray, u: np.ndarray, G: int) -> np.ndarray:
    """``np.lexsort((u, code))`` -- by stratum, then key, then position.

    The keys are multiples of 2^-53 (``sample_keys``), so with fewer than 2^11 strata the pair is
    one exact 64-bit integer ``code << 53 | u * 2^53``, sorted by numpy's (vectorised) quicksort:
    8.2 -> 1.6 ms for crimes' 92k candidates.  Equal pairs, which only a stable sort orders by
    position, or more strata take two stable sorts, the second a radix sort of 16-bit codes."""
    if G <= 1 << 11:
        key = (u * 9007199254740992.0).astype(np.uint64)
        key |= code.astype(np.uint64) << np.uint64(53)
        o = np.argsort(key)
        k = key[o]
        if not (k[1:] == k[:-1]).any():
            return o
    o = np.argsort(u, kind="stable")
    c = code[o].astype(np.uint16 if G <= 1 << 16 else np.int64)
    return o[np.argsort(c, kind="stable")]


def draw(table, strata: Sequence[str], theta: float, seed: int, id_col: str = "_rid",
         max_strata: int | None = None, reserve: bool = True) -> LocalSample:
    """Draw the sample of ``table`` (a pyarrow Table with the unique id column ``id_col``); the
    arguments mean what they mean for ``sampling.stratified_sample``."""

    if not (0.0 < float(theta) <= 1.0):
        raise ValueError(f"theta must be in (0, 1], got {theta}")
    strata = list(strata)
    missing = [c for c in strata + [id_col] if c not in table.column_names]
    if missing:
        raise ValueError(f"columns not in the table: {missing}")
    theta = float(theta)
    base = table.drop_columns([c for c in ("_n_g", "_stratum") if c in table.column_names])
    N = base.num_rows
    ids = base.column(id_col).to_numpy(zero_copy_only=False)
    if not strata:
        u = sample_keys(seed, ids)

    if not strata:
        k = quota(N, theta)
        out = _with(_take(base, np.sort(_smallest(u, k))), _n_g=(np.full(k, N, np.int64), pa.int64()),
                    _stratum=(["{}"] * k, pa.string()))
        return LocalSample(out, N, 1 if N else 0, k, False)

    # the keys are hashed on the helper thread meanwhile (numpy releases the GIL): ~4 ms of ~35
    keys = helper_pool().submit(sample_keys, seed, ids)
    code, first = group_codes(base, strata)
    u = keys.result()
    G = len(first)
    n_g = np.bincount(code, minlength=G).astype(np.int64)
    k_g = quotas(n_g, theta)
    limit = theta * N if max_strata is None else max_strata
    if N > 0 and G > limit:
        # uniform fallback, post-stratified: each row carries its own group's size and label (the
        # labels of the sampled rows only: TPC-H SF1 by l_orderkey labels 0.3M rows, not 1.5M groups)
        rows = np.sort(_smallest(u, quota(N, theta)))
        out = _with(_take(base, rows), _n_g=(n_g[code[rows]], pa.int64()),
                    _stratum=(labels(base, strata, rows), pa.string()))
        return LocalSample(out, N, G, quota(N, theta), True)
    label = np.array(labels(base, strata, first), dtype=object)

    lim = reserve_sizes(k_g) if reserve else k_g
    # only keys under a per-stratum threshold can rank within the limit; a stratum with fewer
    # candidates than it needs is ranked in full, so the result is exact either way
    thr = np.minimum(1.0, (lim + 4.0 * np.sqrt(lim) + 10.0) / n_g)
    cand = u < thr[code]
    short = np.bincount(code[cand], minlength=G) < np.minimum(lim, n_g)
    if short.any():
        cand |= short[code]
    pos = np.flatnonzero(cand)
    order = pos[_by_stratum_then_key(code[pos], u[pos], G)]
    c = code[order]
    start = np.concatenate([[0], np.cumsum(np.bincount(c, minlength=G))[:-1]])
    rank = np.arange(len(order)) - start[c] + 1
    keep = rank <= lim[c]
    # rows in table order, for a cheap take: the ranks scattered over the table's rows (unique)
    at = np.zeros(N, dtype=np.int64)
    at[order[keep]] = rank[keep]
    rows = np.flatnonzero(at)
    c, rank = code[rows], at[rows]
    out = _take(base, rows)
    if reserve:
        out = _with(out, _key=(u[rows], pa.float64()), _n_g=(n_g[c], pa.int64()),
                    _stratum=(label[c], pa.string()), _in=(rank <= k_g[c], pa.bool_()))
    else:
        out = _with(out, _n_g=(n_g[c], pa.int64()), _stratum=(label[c], pa.string()))
    return LocalSample(out, N, G, int(k_g.sum()), False, (label, k_g, n_g))


def write(sample_table, path: str) -> None:
    """Write a sample as one Parquet file under the directory ``path``, replacing it whole: the file
    is written into a temporary sibling directory that is then renamed into place, so a crash
    leaves the old sample or no directory (which the store treats as missing and redraws), never a
    half-written one.  Timestamps keep the encoding Spark wrote the table with (INT64 microseconds,
    or INT96 for a table written before: pyarrow reads those as nanoseconds, which Spark could not
    read back as INT64), so Spark reads the sample with the table's types; the table's Spark schema (footer metadata, which Spark trusts over the
    file's columns) is dropped, since the sample has more columns.  Plain and uncompressed: a sample
    is 5 % of a table and read back whole, and a dictionary-encoded snappy write took 3x as long
    (0.14 s against 0.04 s for 362k rows of lineitem)."""


    path = os.path.normpath(str(path))
    tmp, old = f"{path}.tmp-{os.getpid()}", f"{path}.old-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        table, options = file_options(sample_table)
        pq.write_table(table, os.path.join(tmp, "part-0.parquet"), **options)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # the stored sample is untouched; drop the attempt
        raise
    if os.path.exists(path):
        os.replace(path, old)
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)


def file_options(sample_table) -> tuple:
    """The sample as its file holds it (without the table's Spark schema) and pyarrow's options for
    writing it (``write``'s docstring says why each)."""
    int96 = any(pa.types.is_timestamp(f.type) and f.type.unit == "ns" for f in sample_table.schema)
    return sample_table.replace_schema_metadata(None), {"use_deprecated_int96_timestamps": int96,
                                                        "compression": "none", "use_dictionary": False}
