"""Per-group aggregate estimates and HAVING pass probabilities (digest §2.6, C7, C8).
Nested aggregation builds on these in ``estimators.nested``.

Input: a sample as a pandas frame (the group columns, the aggregated value columns, ``_n_g`` = the
population size of the row's stratum and, optionally, ``_stratum``).  Without ``_stratum`` each group
is taken to be its own stratum (the sample was stratified on exactly the group-by columns).

``estimate_groups`` returns a ``GroupEstimates``: a frame with one row per group and, per aggregate
``f(col)``, the columns ``f(col)`` (point), ``f(col)_se``, ``f(col)_lo``, ``f(col)_hi`` -- plus the
``(B, G)`` replicate matrices that pass probabilities, nested aggregation, top-k and the size
interval are computed from.  ``method='bootstrap'`` uses the stratified bootstrap (``bootstrap``
module, percentile interval); ``method='clt'`` uses Haas's CLT (``clt`` module, normal interval) and
*parametric* replicates ``point + se * Z`` so the replicate-based consumers still work.

HAVING predicates and the groups' pass probabilities are ``estimators.having``.

Rules worth knowing:

* Fully sampled groups (all their strata have ``n == N``) are exact: zero standard error, replicates
  equal to the true value, ``p_g`` in {0, 1}.
* A group whose sampled rows all fail WHERE (or whose values are all NULL) has a NULL aggregate in
  that replicate, and a NULL never satisfies a comparison -- the group is absent from the result
  [INFERRED; the digest's C6 instead *skips* such replicates, which would overstate ``p_g``].
* MIN/MAX [INFERRED, the paper does not cover them]: the point estimate is the sample min/max.
  Because the sample is a subset of the group, the sample max is a lower bound of the population max
  and the sample min an upper bound of the population min.  Hence ``MAX > c``/``MAX >= c`` is
  *certain* (p = 1) when the sample max satisfies it, and ``MAX < c``/``MAX <= c`` certainly fails
  when the sample max does not (mirrored for MIN).  Otherwise p is the share of replicates that
  satisfy it, and the replicates are the sample extreme combined with the extreme of the group's
  unseen rows under a pooled location-residual model (``estimators.extremes``): a bootstrap of the
  sampled rows alone never exceeds the sample max, so ``MAX > c`` with sample max <= c had p = 0
  however many rows the sample did not show.  Under ``method='clt'`` MIN/MAX use these replicates
  too (the CLT does not apply).
* Few sampled rows (one row of a larger group, or two or three): the bootstrap's spread is zero or
  ``(n-1)/n`` of the variance, so SUM/AVG/COUNT replicates are floored at the analytic variance with a
  pooled within-stratum variance (``estimators.small_groups``; digest C6's pooled-variance option).
  A singleton's ``p_g`` is then a probability, not 0/1 at its point estimate; under
  ``method='clt'`` a singleton keeps its zero standard error (the paper's Fig. 5/6 reading).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence, Union

import numpy as np
import pandas as pd

from estimators.bootstrap import (
    aggregate_weighted, block_size, group_exists, group_sums, normalize_agg, replicate_blocks, replicate_stderr)
from estimators.clt import stratified_clt, z_value
from estimators.extremes import extreme_replicates
from estimators.filtered_counts import beta_prior, filtered_count, replicate_priors
from estimators.group_sample import GroupedSample, group_sample, where_mask
from estimators.small_groups import floor_replicates, group_strata
from estimators.quantiles import nan_quantiles


def agg_name(func: str, col: str | None) -> str:
    """Canonical aggregate name, e.g. ``sum(x)``, ``count(*)``; used as the frame column name."""
    return f"{normalize_agg(func)}({'*' if col in (None, '*') else col})"


# --- estimates ------------------------------------------------------------------------------------


@dataclass
class GroupEstimates:
    """Per-group estimates: ``frame`` (one row per group) plus replicate matrices of shape (B, G).

    ``frame`` columns: group columns, ``n`` (sample rows), ``N`` (estimated population rows),
    ``exact`` (fully sampled), ``exists`` (at least one sampled row passes WHERE) and per aggregate
    ``name``, ``name_se``, ``name_lo``, ``name_hi``.  ``sample_bound`` names the aggregates for which
    the MIN/MAX sample-bound rule applies.
    """

    frame: pd.DataFrame
    group_cols: list
    aggs: list
    names: list
    replicates: dict
    exists: np.ndarray
    method: str
    confidence: float
    B: int
    seed: int
    sample_bound: frozenset = field(default_factory=frozenset)
    # the estimates before empirical-Bayes shrinkage, kept for the intervals' second model
    # (``advisor.estimation.size_estimates``); None when not shrunk or not kept
    unshrunk: Optional["GroupEstimates"] = field(default=None, repr=False)

    @property
    def n_groups(self) -> int:
        """Number of groups (rows of ``frame``)."""
        return len(self.frame)

    def resolve(self, agg: Union[int, str]) -> str:
        """Aggregate name for an index or a name (``'sum(x)'``, also accepts ``'SUM(x)'``)."""
        if isinstance(agg, (int, np.integer)):
            return self.names[int(agg)]
        if agg in self.replicates:
            return agg
        s = str(agg).strip()
        if "(" in s:
            f, rest = s.split("(", 1)
            try:
                cand = f"{normalize_agg(f)}({rest.strip()}"
            except ValueError:
                cand = s
            if cand in self.replicates:
                return cand
        raise KeyError(f"unknown aggregate {agg!r}; known: {self.names}")

    def func_of(self, agg: Union[int, str]) -> str:
        """Aggregate function (``sum``, ``max``, ...) of an aggregate index or name."""
        name = self.resolve(agg)
        return name.split("(", 1)[0]

    def point(self, agg: Union[int, str]) -> np.ndarray:
        """Point estimates of one aggregate, one per group (NaN = SQL NULL)."""
        return self.frame[self.resolve(agg)].to_numpy(dtype=float)

    def stderr(self, agg: Union[int, str]) -> np.ndarray:
        """Standard errors of one aggregate, one per group (0 for exact groups)."""
        return self.frame[self.resolve(agg) + "_se"].to_numpy(dtype=float)

    @property
    def point_exists(self) -> np.ndarray:
        """Whether each group has a sampled row passing WHERE (it certainly exists in the table)."""
        return self.frame["exists"].to_numpy(dtype=bool)


def group_codes(df: pd.DataFrame, group_cols: list) -> tuple[np.ndarray, pd.DataFrame]:
    """Group code per row (groups numbered in sorted key order, NULL keys kept) and the groups' keys;
    no group columns means one group holding every row."""
    if not group_cols:
        return np.zeros(len(df), dtype=np.int64), pd.DataFrame(index=pd.RangeIndex(1))
    gb = df.groupby(group_cols, sort=True, dropna=False)
    codes = gb.ngroup().to_numpy(dtype=np.int64)
    keys = gb.size().reset_index()[group_cols]
    return codes, keys


def percentile_interval(reps: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of replicates per group (NaN where every replicate is NULL)."""
    a = (1.0 - confidence) / 2.0
    q = nan_quantiles(np.asarray(reps, dtype=float).reshape(len(reps), -1), [a, 1.0 - a])
    return q[0].reshape(np.shape(reps)[1:]), q[1].reshape(np.shape(reps)[1:])


UNSEEN_ROWS = True  # replicates allow for the rows a group's sample did not show (_with_unseen_rows)
BLOCK_CELLS = 4_000_000  # bootstrap cells (rows x replicates) drawn at a time: bounds the weights' memory


def estimate_groups(pdf: pd.DataFrame, group_cols: Sequence[str], aggs: Sequence[tuple],
                    method: str = "bootstrap", B: int = 50, seed: int = 0,
                    where: Union[str, np.ndarray, None] = None, confidence: float = 0.95,
                    fpc: bool = True, n_col: str = "_n_g", strata_col: str = "_stratum",
                    block_cells: int = BLOCK_CELLS) -> GroupEstimates:
    """Estimate every aggregate for every group of a stratified sample (Algorithm 1, made probabilistic).

    ``aggs`` is a list of ``(func, col)`` with func in sum/count/avg/min/max and ``col=None`` (or
    ``'*'``) for ``COUNT(*)``; ``where`` an optional WHERE indicator (column name or boolean array)
    for predicates that are not on the group-by columns.  Groups are the distinct values of
    ``group_cols`` in the sample; rows are weighted by their stratum's ``N_h/n_h`` (see module
    docstring).  Deterministic for a seed: rows are put in a canonical order before resampling,
    so the same sample in any row order gives the same replicates.  Replicates are drawn in blocks of
    about ``block_cells / n`` to bound memory (the stream depends on the block size).
    """
    method, aggs_n, names = _checked_arguments(method, B, confidence, aggs)
    group_cols = list(group_cols)
    _check_sample(pdf, n_col)
    value_cols = list(dict.fromkeys(c for _, c in aggs_n if c is not None))
    df = pdf.reset_index(drop=True)
    u = where_mask(df, where)
    gi, keys = group_codes(df, group_cols)
    gs = group_sample(df, u, gi, keys, value_cols, n_col, strata_col)
    prepared = _aggregate_inputs(aggs_n, names, gs)
    rng = np.random.default_rng(seed)
    boot_reps, boot_exists = _bootstrap_replicates(prepared, method, gs, B, block_cells, rng, fpc)
    out = _group_frame(gs)
    replicates: dict = {}
    for name, (f, y, m) in prepared.items():
        point, se, lo, hi, reps = _aggregate_estimate(f, y, m, gs, method, boot_reps.get(name), confidence,
                                                      B, rng, fpc)
        out[name], out[name + "_se"], out[name + "_lo"], out[name + "_hi"] = point, se, lo, hi
        replicates[name] = reps
    if method == "bootstrap":
        exists = boot_exists
    else:
        exists = np.broadcast_to(gs.pexists, (B, gs.G)).copy()
    if method == "bootstrap" and len(prepared) == 1:
        _latent_groups(prepared, gs, replicates, exists, rng)
    bound = frozenset(n for n, (f, _, _) in prepared.items() if f in ("min", "max"))
    return GroupEstimates(frame=out, group_cols=group_cols, aggs=aggs_n, names=names,
                          replicates=replicates, exists=exists, method=method, confidence=confidence,
                          B=B, seed=seed, sample_bound=bound)


def _checked_arguments(method: str, B: int, confidence: float, aggs: Sequence[tuple]) -> tuple[str, list, list]:
    """The normalised method, aggregates ``(func, col or None)`` and their names, after checking
    the arguments that do not depend on the sample."""
    method = str(method).lower()
    if method not in ("bootstrap", "clt"):
        raise ValueError(f"method must be 'bootstrap' or 'clt', got {method!r}")
    if B < 1:
        raise ValueError("B must be >= 1")
    z_value(confidence)
    aggs_n = [(normalize_agg(f), None if c in (None, "*") else c) for f, c in aggs]
    names = [agg_name(f, c) for f, c in aggs_n]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate aggregates in {names}")
    return method, aggs_n, names


def _check_sample(pdf: pd.DataFrame, n_col: str) -> None:
    """Refuse an empty sample or one without its population-size column."""
    if len(pdf) == 0:
        raise ValueError("empty sample")
    if n_col not in pdf.columns:
        raise ValueError(f"sample has no population-size column {n_col!r}")


def _aggregate_inputs(aggs_n: list, names: list, gs: GroupedSample) -> dict:
    """Per aggregate name: (func, values with non-contributing rows set to 0, contributing-row mask).

    A row contributes when it passes WHERE and, unless it is ``COUNT(*)``, its value is not NULL.
    """
    prepared = {}
    for (f, c), name in zip(aggs_n, names):
        if c is None:
            y, m = np.ones(len(gs.si)), gs.u.copy()
        else:
            v = gs.vals[c]
            m = gs.u & ~np.isnan(v)
            y = np.where(m, v, 0.0)
        prepared[name] = (f, y, m)
    return prepared


def _bootstrap_replicates(prepared: dict, method: str, gs: GroupedSample, B: int, block_cells: int,
                          rng: np.random.Generator, fpc: bool) -> tuple[dict, np.ndarray | None]:
    """Bootstrap replicates ``(B, G)`` of the aggregates that use them (all, or MIN/MAX under the
    CLT) and the groups' existence per replicate, drawn in blocks so that the (block, n) weight
    matrices stay small for big samples."""
    boot_names = [n for n, (f, _, _) in prepared.items() if method == "bootstrap" or f in ("min", "max")]
    if not (boot_names or method == "bootstrap"):
        return {}, None
    block = block_size(len(gs.si), block_cells)
    parts: dict = {n: [] for n in boot_names}
    ex_parts = []
    for wt, drawn in replicate_blocks(gs.si, gs.N_h, B, block, rng, fpc=fpc):
        for name in boot_names:
            f, y, m = prepared[name]
            parts[name].append(_replicate_block(f, y, m, wt, drawn, gs))
        ex_parts.append(group_exists(gs.u, drawn, gs.gidx))
    return {n: np.concatenate(v, axis=0) for n, v in parts.items()}, np.concatenate(ex_parts, axis=0)


def _replicate_block(f: str, y: np.ndarray, m: np.ndarray, wt: np.ndarray, drawn: np.ndarray,
                     gs: GroupedSample) -> np.ndarray:
    """One aggregate for every group in one block of replicates (weights ``wt``, draw counts
    ``drawn``); NaN (NULL) where no row contributes, except COUNT."""
    if f in ("min", "max"):
        return aggregate_weighted(f, y, m, None, drawn, gs.gidx)
    den = group_sums(m, gs.gi, gs.G, wt)
    if f == "count":
        return den
    num = group_sums(y, gs.gi, gs.G, wt)  # y is already 0 outside m
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.where(den > 0, num, np.nan) if f == "sum" else
                np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan))


def _group_frame(gs: GroupedSample) -> pd.DataFrame:
    """The result frame before the aggregates: group keys, sample and population rows, exactness and
    existence."""
    out = gs.keys.reset_index(drop=True).copy()
    out["n"] = gs.gidx.sizes.astype(np.int64)
    Nest = gs.gidx.reduce(np.add, gs.w0)
    out["N"] = np.where(np.isclose(Nest, np.round(Nest)), np.round(Nest), Nest)
    out["exact"] = gs.exact
    out["exists"] = gs.pexists
    return out


def _aggregate_estimate(f: str, y: np.ndarray, m: np.ndarray, gs: GroupedSample, method: str,
                        boot: np.ndarray | None, confidence: float, B: int, rng: np.random.Generator,
                        fpc: bool) -> tuple:
    """(point, standard error, interval low, high, ``(B, G)`` replicates) of one aggregate: from its
    bootstrap replicates ``boot`` or from the CLT; exact groups get their point as the interval."""
    point = aggregate_weighted(f, y, m, gs.w0, np.ones(len(gs.si), dtype=np.int64), gs.gidx)
    shares = _filtered_count(f, m, gs, boot, rng) if method == "bootstrap" else None
    if shares is not None:  # a COUNT under a WHERE, groups nested in strata (estimators.filtered_counts)
        point, reps = shares
        se = replicate_stderr(reps, axis=0)
        lo, hi = percentile_interval(reps, confidence)
    elif method == "bootstrap" or f in ("min", "max"):
        reps = _with_unseen_rows(f, boot, point, y, m, gs, rng)
        se = replicate_stderr(reps, axis=0)
        lo, hi = percentile_interval(reps, confidence)
    else:
        se, lo, hi, reps = _clt_estimate(f, y, m, point, gs, confidence, B, rng, fpc)
    lo = np.where(gs.exact, point, lo)
    hi = np.where(gs.exact, point, hi)
    return point, se, lo, hi, reps


def _with_unseen_rows(f: str, boot: np.ndarray, point: np.ndarray, y: np.ndarray, m: np.ndarray,
                      gs: GroupedSample, rng: np.random.Generator) -> np.ndarray:
    """The bootstrap replicates with what the group's unsampled rows may add: MIN/MAX from the
    unseen-row model (``estimators.extremes``), SUM/AVG/COUNT floored at the pooled analytic variance
    (``estimators.small_groups``).  Drawn from a generator of their own (seeded from ``rng`` without
    advancing it), so the other aggregates' replicates stay as they were."""
    if not UNSEEN_ROWS or boot is None:
        return boot
    sub = np.random.default_rng(_child_seed(rng, f))
    n_g = gs.gidx.sizes.astype(float)
    N_g = gs.gidx.reduce(np.add, gs.w0)
    if f in ("min", "max"):
        return extreme_replicates(f, y, m, gs.gi, gs.G, n_g, N_g, point, gs.exact, boot.shape[0], sub)
    return floor_replicates(f, boot, point, y, m, gs.gi, gs.si, gs.G, gs.N_h, gs.exact, sub)


def _filtered_count(f: str, m: np.ndarray, gs: GroupedSample, boot: np.ndarray | None,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray] | None:
    """(point, replicates) of a COUNT whose rows a WHERE filters, by the beta-binomial of
    ``estimators.filtered_counts``, when every group lies in one stratum; else None (the bootstrap's)."""
    if f != "count" or boot is None or not UNSEEN_ROWS or bool(np.asarray(m, dtype=bool).all()):
        return None
    mb = np.asarray(m, dtype=bool)
    c_g = np.bincount(gs.gi[mb], minlength=gs.G).astype(float)
    h = group_strata(gs.si, gs.gi, gs.G, needed=c_g > 0)  # groups with passing rows lie in one stratum
    if h is None:
        return None
    H = int(gs.si.max()) + 1
    n_h = np.bincount(gs.si, minlength=H).astype(float)
    c_h = np.bincount(gs.si[mb], minlength=H).astype(float)
    prior = beta_prior(c_h, n_h)
    if prior is None:
        return None
    sub = np.random.default_rng(_child_seed(rng, "count|where"))
    hh = np.maximum(h, 0)
    point, reps = filtered_count(c_g, n_h[hh], gs.N_h[hh], prior, boot.shape[0], sub,
                                 replicate_priors(c_h, n_h, prior, boot.shape[0], sub))
    exact = gs.exact | (c_g == 0)
    point = np.where(exact, aggregate_weighted(f, np.ones(len(gs.si)), mb, gs.w0, np.ones(len(gs.si), np.int64),
                                               gs.gidx), point)
    return point, np.where(exact[None, :], point[None, :], reps)


def _latent_groups(prepared: dict, gs: GroupedSample, replicates: dict, exists: np.ndarray,
                   rng: np.random.Generator) -> None:
    """A lone COUNT under a WHERE: a stratum none of whose sampled rows passes still has unseen rows
    that may (``estimators.filtered_counts``), so its group of failing rows stands for the stratum's
    passing group the sample did not show -- its count replicates are the unseen passing rows, and
    it exists in a replicate where they are not none.  Without it those groups counted as failing
    in every replicate: half of the customers passing a filtered ``count(*) > 10`` were missed."""
    (name, (f, _, m)), = prepared.items()
    if f != "count" or bool(np.asarray(m, dtype=bool).all()):
        return
    mb = np.asarray(m, dtype=bool)
    h = group_strata(gs.si, gs.gi, gs.G, needed=np.bincount(gs.gi[mb], minlength=gs.G) > 0)
    if h is None:
        return
    H = int(gs.si.max()) + 1
    n_h = np.bincount(gs.si, minlength=H).astype(float)
    c_h = np.bincount(gs.si[mb], minlength=H).astype(float)
    prior = beta_prior(c_h, n_h)
    # a group of one stratum without a passing sampled row (a group spread over strata -- the
    # pipeline's one group of all failing rows -- cannot stand for any stratum's passing group)
    latent = ~gs.exact & (h >= 0) & (c_h[np.maximum(h, 0)] == 0)
    if prior is None or not latent.any():
        return
    idx = np.flatnonzero(latent)
    B = exists.shape[0]
    sub = np.random.default_rng(_child_seed(rng, "count|where"))
    priors = replicate_priors(c_h, n_h, prior, B, sub)  # the same refits as the shown groups' (same seed)
    _, reps = filtered_count(np.zeros(idx.size), n_h[h][idx], gs.N_h[h][idx], prior, B, sub, priors)
    replicates[name][:, idx] = reps
    exists[:, idx] = reps > 0


def _child_seed(rng: np.random.Generator, f: str) -> list:
    """A seed for a generator apart from ``rng``, from its seed sequence (not from its stream), one
    per aggregate function."""
    ss = rng.bit_generator.seed_seq
    ent = ss.entropy if ss.entropy is not None else 0
    return [int(x) for x in np.atleast_1d(ent)] + [0xE57, sum(map(ord, f))]


def _clt_estimate(f: str, y: np.ndarray, m: np.ndarray, point: np.ndarray, gs: GroupedSample,
                  confidence: float, B: int, rng: np.random.Generator, fpc: bool) -> tuple:
    """(standard error, normal interval low, high, parametric replicates ``point + se * Z``) of one
    SUM/COUNT/AVG by Haas's CLT; COUNTs are kept non-negative."""
    z = z_value(confidence)
    _, var = stratified_clt(f, gs.si, gs.gi, gs.G, gs.N_h, y, m, fpc=fpc)
    se = np.sqrt(np.clip(var, 0.0, None))
    se = np.where(gs.exact, 0.0, se)
    lo, hi = point - z * se, point + z * se
    if f == "count":
        lo = np.maximum(lo, 0.0)
    zmat = rng.standard_normal((B, gs.G))
    reps = point[None, :] + np.where(se > 0, se, 0.0)[None, :] * zmat
    if f == "count":
        reps = np.maximum(reps, 0.0)
    return se, lo, hi, reps
