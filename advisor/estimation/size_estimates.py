"""From a parsed query to sketch-size estimates per candidate attribute (seed 002, Alg. 1 + Alg. 2).

Pipeline: ``advisor.estimation.query_shape.analyze`` finds the innermost aggregation, the table to sample and the HAVING / top-k /
nested shape; ``get_sample`` returns the cached stratified sample of that table; ``estimate`` runs the
aggregation's input (joins, WHERE) over the sample, estimates every group, and sizes the sketch of
each (attribute, granularity) with ``estimators.sketch_size``.

Decisions (documented deviations from the paper):

* **Sampled table.** The *largest* table read below the innermost aggregation (the fact / FK side
  of a star join).  Dimension tables are joined *in full* to the sample, so the joined sample is a
  sample of the join with the fact rows' inclusion probabilities (digest C8, instead of wander
  join).  If a sampled row joins several rows, its stratum's ``N_h`` is scaled by rows/sampled rows
  so the Horvitz-Thompson weight per fact row stays ``N_h/n_h`` (the bootstrap then resamples joined
  rows, not fact rows: slightly too narrow intervals).  A query reading the fact table twice is not
  estimated.
* **Strata** = the group-by attributes that are plain columns of the sampled table (base names).
  Group-by keys on dimension columns or expressions make groups span strata, which the estimators
  handle as domains; no such key at all gives a uniform sample.
* **WHERE / joins** are applied by Spark SQL to the sample (fact scan replaced by the sample); sample
  rows that do not survive are kept as failing rows (``__u`` false), so per-stratum weights stay
  right.  ``__u`` is also a group column, which keeps the failing rows out of every real group.
* **HAVING** must be AND/OR/NOT over ``aggregate op constant`` (and BETWEEN); conditions on group
  keys in HAVING, expressions of aggregates and DISTINCT aggregates are refused with a reason.
  Top-k orders by its first ORDER BY key, which must be an aggregate.  Nested: one outer
  aggregation grouped by a subset of the inner keys, over inner aggregates / keys / ``count(*)``.
* **Cache and maintenance** (``advisor.estimation.sample_store``).  A sample is keyed by (table, sorted strata,
  theta, seed, table version): Parquet under ``tables/<table>/samples/`` plus a row in the
  ``samples`` table.  For a newer table version the newest older sample of the same key is
  *maintained* from the delta (``estimators.sampling.sample_delta``: stratified samples are drawn with a
  per-stratum reserve, and the maintained sample equals a fresh draw on the new version row for
  row); when that cannot be done exactly (a stratum's reserve ran out, a uniform sample, the strata
  now outnumber the budget) the sample is drawn afresh -- on the driver for a table that fits it
  (``estimators.sampling.reservoir_local``, the same rows as Spark's draw).  A sample holds the columns the
  aggregation's input and the candidates read.  Writing a sample deletes the older samples of its key.
* **Shrinkage** (``shrink_groups``, on by default): SUM/AVG group estimates are pulled towards the
  mean of all groups by empirical Bayes before pass probabilities are taken -- without it, noise
  larger than the true spread between groups inflates the sketches of upper-tail HAVING thresholds
  (TPC-H at 5 %: 0.72 estimated vs 0.54 real; with it 0.57).  The paper's point classification
  (``sel_point``) then under-counts; the ranking uses the expectation.
  The prior mean may come from a candidate attribute that explains the group means
  (``estimators.shrinkage``; ``COVARIATE_PRIOR``, on by default).
* **Intervals over two models.** The sizes' intervals span the replicates of the shrunk estimates
  and of the unshrunk ones (``MODEL_INTERVAL``; ``estimators.sketch_size``, model replicates): the
  bootstrap does not vary the prior the shrinkage fitted, and where that prior is wrong (heavy
  tails) the shrunk interval alone is narrow around a moved centre.  Expectations and picks are the
  shrunk model's.
* **Granularities.** One fine partition (the largest requested fragment count) is built and stored
  per attribute; coarser ones are derived from it in memory (``select.derive_partition``) and stored
  only if a sketch is captured on them (``select.store_partition``).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional

import numpy as np
import pandas as pd

from advisor import memory
from advisor.caches import BoundedMemo
from advisor.errors import BadInput
from advisor.estimation import sample_files
from advisor.estimation.query_shape import CannotEstimate, Shape, analyze  # noqa: F401 - re-exported
from advisor.estimation.sample_frame import SID, U, partition_key, sample_frame, spj_sql  # noqa: F401 - SID re-exported
from advisor.estimation.sample_store import SampleInfo, get_sample
from advisor.partition.refine import derive_partition, fine_partition
from estimators import prefetch
from estimators.aggregates import BLOCK_CELLS, estimate_groups
from estimators.having import pass_matrix
from estimators.nested import estimate_nested
from estimators.pair_size import MAX_PAIR_CELLS, joint_counts, pair_estimate
from estimators.shrinkage import shrink_groups  # noqa: F401 - re-exported
from estimators.sketch_size import estimate_size, group_rows, size_for_having, sizing_rows
from estimators.topk import size_for_topk, topk_probability

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog

MODEL_INTERVAL = True  # intervals span the unshrunk bootstrap's too (estimators.sketch_size, model replicates)
COVARIATE_PRIOR = True  # estimators.covariate_prior (off: the mean of all groups)

# Group statistics per (sample file, aggregation input, partitions, estimator settings): queries of
# one template that differ only in their HAVING constant or LIMIT, estimated in one process with one
# seed (``recommend`` in a session, the advice harness's runs of bindings), share the sample frame and
# the shrunk group estimates, so only the pass probabilities and sizes are computed again (the paper
# caches sample statistics for reuse, digest §2.4).  A replay seeds each step differently and draws
# its samples per version, so it does not hit.  An entry holds (B, groups) replicates per aggregate:
# a few entries, bounded in bytes too (a TPC-H SF1 sample grouped by l_orderkey: ~300k groups, ~130 MB
# an aggregate); the sizing parts kept with an entry (arrays of sample cells per candidate) are not
# counted in the bound.
_GROUPS_KEEP = 4
_GROUPS_BYTES = 512 << 20
# a replay's samples change: seldom hit, so the valve drops these first
_GROUPS = BoundedMemo("group estimates", _GROUPS_KEEP, max_bytes=_GROUPS_BYTES, size_of=lambda e: e[-1],
                      rank=0, keep_one=False)


def _entry_bytes(entry: tuple) -> int:
    """Bytes of an entry's sample frame, existence flags and replicates."""
    pdf, _, est = entry[:3]
    raw = est.unshrunk
    return int(pdf.memory_usage(index=False).sum()) + int(est.exists.nbytes) + sum(
        int(np.asarray(r).nbytes) for e in (est, raw) if e is not None for r in e.replicates.values())


def _keep_groups(key: tuple, entry: tuple) -> None:
    """Make ``entry`` the newest of ``_GROUPS``, evicting the oldest beyond the count or byte bound
    (an entry larger than the whole bound is not kept)."""
    size = _entry_bytes(entry)
    if size > _GROUPS_BYTES:
        return
    _GROUPS.put(key, entry + (size,))
    memory.relieve()


def split_key(key: str, fact: str) -> tuple[str, str]:
    """(table, attribute) of a plan key: a bare attribute of the sampled table, or ``table.attr``
    for a group-by column of a joined table (``select.Candidate.key``)."""
    return tuple(key.split(".", 1)) if "." in key else (fact, key)


# ---------------- estimation ----------------
@dataclass
class Estimation:
    """Result of ``estimate``: per (attr, n_target) a SizeEstimate, plus timings and the sample used."""
    shape: Shape
    sample: SampleInfo
    sizes: dict            # (attr, n_target) -> estimators.sketch_size.SizeEstimate
    partitions: dict       # (attr, n_target) -> RangePartition
    groups: int
    seconds: dict
    notes: list
    pair_sizes: dict = field(default_factory=dict)  # ("a&b", n_target) -> SizeEstimate of a AND b


@dataclass
class _Run:
    """One ``estimate`` call as its steps read it: the request, and the seconds each step took."""

    catalog: Catalog
    shape: Shape
    plan: dict
    theta: float
    seed: int
    method: str
    B: int
    versions: dict
    say: Callable[[str], None]
    shrink: bool | str
    local: bool
    secs: dict = field(default_factory=dict)


@dataclass
class _Groups:
    """The aggregation's groups estimated over the sample: the sample frame with its fragment
    columns, the shrunk estimates and their prior, the sizing parts shared by later queries, and
    the nested / top-k pass probabilities (None unless the query has that shape)."""

    pdf: pd.DataFrame
    fcols: dict
    est: object
    prior: dict
    preps: dict
    nested: object
    topk: object


def estimate(catalog: Catalog, shape: Shape, plan: dict, theta: float = 0.05, seed: int = 0,
             method: str = "bootstrap", B: int = 50, versions: Optional[dict] = None,
             progress: Optional[Callable[[str], None]] = None, shrink: bool | str = True,
             local: bool = True, pairs: Optional[Callable[[dict], list]] = None) -> Estimation:
    """Sample (or reuse), estimate the groups, then size every attribute at its granularities
    (``plan``: attribute -> fragment counts) and every pair ``(a, b)`` (plan keys of the sampled table)
    that ``pairs`` picks from those sizes, at the granularities both have (``estimators.pair_size``).
    ``progress`` gets one message per step; ``local`` lets a join-free query run on the driver."""

    _check_request(theta, plan)
    table = shape.fact.table
    r = _Run(catalog, shape, plan, theta, seed, method, B, versions or {table: catalog.current_version(table)},
             progress or (lambda _m: None), shrink, local)
    sample = _draw_sample(r)
    parts = _build_partitions(r)
    g = _estimate_groups(r, sample, parts)
    t0 = time.perf_counter()
    notes = _notes(sample, g.prior, shrink) + ([shape.bound] if shape.bound else [])
    sizes = _size_candidates(r, parts, g, _group_rate(shape, sample.meta, not bool(g.pdf[U].all())),
                             second_model=not sample.meta.get("uniform_fallback"))
    r.secs["sizes"] = time.perf_counter() - t0
    pair_sizes = _pair_sizes(g.pdf, g.fcols, sizes, parts, pairs(sizes)) if pairs else {}
    return Estimation(shape, sample, sizes, parts, g.est.n_groups, r.secs, notes, pair_sizes)


def _check_request(theta: float, plan: dict) -> None:
    """BadInput for a sample rate outside (0, 1]; ValueError for an empty plan."""
    if not 0.0 < theta <= 1.0:
        raise BadInput(f"the sample rate must be in (0, 1], got {theta}")
    if not plan:
        raise ValueError("nothing to estimate: empty plan")


def _draw_sample(r: _Run) -> SampleInfo:
    """The sampled table's stratified sample (cached, maintained or drawn) holding the columns the
    aggregation's input and the plan's attributes of that table read; timed as ``sampling``."""
    table = r.shape.fact.table
    v = r.versions[table]
    r.say(f"sampling {table} (theta={r.theta:g}, strata: {', '.join(r.shape.strata) or 'none'})")
    own_attrs = {split_key(k, table)[1] for k in r.plan if split_key(k, table)[0] == table}
    sample = get_sample(r.catalog, table, r.shape.strata, r.theta, r.seed, v,
                        columns=sorted(set(r.shape.read_columns()) | own_attrs),
                        on_layout=_prefetch_replicates(r.B, r.seed) if r.method == "bootstrap" else None)
    r.secs["sampling"] = sample.seconds
    return sample


def _build_partitions(r: _Run) -> dict:
    """(key, n) -> partition: each planned attribute's finest granularity stored (or built), the
    coarser ones derived from it; timed as ``partitions``."""
    t0 = time.perf_counter()
    parts = {}
    for key, grans in sorted(r.plan.items()):
        t, a = split_key(key, r.shape.fact.table)
        r.say(f"partition {t}.{a}")
        fine = fine_partition(r.catalog, t, a, max(grans), r.versions.get(t) or r.catalog.current_version(t))
        for n in grans:
            parts[(key, n)] = derive_partition(fine, n) if n != max(grans) else fine
    r.secs["partitions"] = time.perf_counter() - t0
    return parts


def _estimate_groups(r: _Run, sample: SampleInfo, parts: dict) -> _Groups:
    """The query's input over the sample and its shrunk group estimates (from ``_GROUPS`` when this
    sample and aggregation were estimated before), then the nested / top-k pass probabilities;
    timed as ``sample_query`` and ``groups``."""
    t0 = time.perf_counter()
    gkey = _groups_key(r.shape, sample, parts, r.versions,
                       (r.method, r.B, r.seed, str(r.shrink), COVARIATE_PRIOR, MODEL_INTERVAL, r.local))
    hit = _GROUPS.pop(gkey, None)
    if hit is None:
        r.say("running the query's joins and filters over the sample")
        pdf, fcols = sample_frame(r.catalog, r.shape, sample, parts, r.versions, r.local)
        r.secs["sample_query"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        hit = (pdf, fcols, *_shrunk_groups(r, pdf, fcols), {})
    else:
        r.say("group estimates of this sample and aggregation reused")
        r.secs["sample_query"] = 0.0
    _keep_groups(gkey, hit[:5])
    # shared with later hits: nothing below modifies them; ``preps`` holds each candidate's
    # threshold-free sizing part (``estimate_size(reuse=...)``), filled by the first query
    pdf, fcols, est, prior, preps = hit[:5]
    nested, topk = _pass_probabilities(r.shape, est)
    r.secs["groups"] = time.perf_counter() - t0
    return _Groups(pdf, fcols, est, prior, preps, nested, topk)


def _shrunk_groups(r: _Run, pdf, fcols: dict) -> tuple:
    """Every group's estimates over the sample frame and, with ``shrink``, the prior each was
    shrunk towards (``shrink_groups``; empty without)."""
    gcols = r.shape.keys + [U]
    est = estimate_groups(pdf, gcols, r.shape.aggs, method=r.method, B=r.B, seed=r.seed, where=U)
    prior = {}
    if r.shrink and MODEL_INTERVAL:  # kept unshrunk for the intervals' second model
        est.unshrunk = dataclasses.replace(est, frame=est.frame.copy(),
                                           replicates={k: v.copy() for k, v in est.replicates.items()})
    if r.shrink:  # True / 'normal': the normal prior; 't': Student-t (see shrink_groups)
        covs = {a: fcols[(a, max(g))] for a, g in r.plan.items()} if COVARIATE_PRIOR else None
        prior = shrink_groups(est, pdf[pdf[U]], gcols, aligned=len(r.shape.strata) == len(r.shape.keys),
                              prior="t" if r.shrink == "t" else "normal", covariates=covs, where=U, stratum_rows=pdf)
    return est, prior


def _model_replicates(shape: Shape, est) -> np.ndarray | None:
    """(B, G): which groups pass (rank in the top k, reach a passing outer group) in each replicate
    of the unshrunk estimates, the intervals' second model; None without shrinkage.  Computed per
    query: it depends on the HAVING constant or LIMIT, which cached group estimates do not."""
    raw = est.unshrunk
    if raw is None:
        return None
    if shape.kind == "nested":
        return estimate_nested(raw, shape.outer_keys + [U], shape.outer_aggs, shape.having,
                               shape.outer_having).provenance
    if shape.kind == "topk":
        return topk_probability(raw, shape.topk[0], shape.topk[1], shape.topk[2], shape.having).in_topk
    return pass_matrix(raw, shape.having)


def _pass_probabilities(shape: Shape, est) -> tuple:
    """(nested, topk): the outer groups' estimates of a nested query, or each group's probability
    to rank in the top k; None for the shape the query does not have."""
    nested = topk = None
    if shape.kind == "nested":
        nested = estimate_nested(est, shape.outer_keys + [U], shape.outer_aggs, shape.having, shape.outer_having)
    elif shape.kind == "topk":
        topk = topk_probability(est, shape.topk[0], shape.topk[1], shape.topk[2], shape.having)
    return nested, topk


def _notes(sample: SampleInfo, prior: dict, shrink: bool | str) -> list:
    """What the caller should know about the estimates: a uniform fallback sample, covariate priors."""
    notes = ["uniform sample: more groups than the sample budget, unsampled groups count as failing"] \
        if sample.meta.get("uniform_fallback") else []
    if shrink:
        notes += [f"group estimates shrunk towards the mean of the groups alike in {c} (a covariate prior)"
                  for c in dict.fromkeys(c for c in prior.values() if c is not None)]
    return notes


def _size_candidates(r: _Run, parts: dict, g: _Groups, rate: float | None = None, second_model: bool = True) -> dict:
    """(attr, n) -> SizeEstimate of the sketch on each partition, by the nested, top-k or HAVING
    model of the query's shape.  ``second_model``: widen the intervals by the unshrunk estimates'
    replicates (``_model_replicates``).  Not over a uniform fallback sample: most of its groups are
    seen through one or two rows, whose unshrunk estimate (the rows scaled to the group's size)
    passes whenever a row is large -- on TPC-H SF1's ``HAVING sum(l_quantity) > 310`` by order it
    covered 81 % of lineitem where the real sketch holds 0.1 % and the shrunk replicates' interval
    [0.08 %, 0.23 %] held it."""
    table, shape, gcols = r.shape.fact.table, r.shape, r.shape.keys + [U]
    passing = g.pdf[sizing_rows(g.pdf[U].to_numpy(dtype=bool), g.pdf, g.est, gcols)]
    preps, nested, topk = g.preps, g.nested, g.topk
    sizes = {}
    if "sg" not in preps:  # the frames below list est.frame's groups in its order, whatever the kind
        preps["sg"] = group_rows(nested.inner_frame if nested is not None else topk.frame if topk is not None
                                 else g.est.frame, passing, gcols)  # one group lookup for all candidates
    mix = _model_replicates(shape, g.est) if second_model else None
    for (a, n), part in parts.items():
        r.say(f"sizing {part.table}.{part.attr} at {n} fragments")
        det = part.table != table or shape.determined(a)
        kw = dict(frag_col=g.fcols[(a, n)], determined=det, total_rows=float(sum(part.sizes)), seed=r.seed,
                  sample_groups=preps["sg"], reuse=preps.setdefault((a, n, det), {}), group_rate=rate,
                  model_replicates=mix)
        fsz = np.asarray(part.sizes, dtype=float)
        if nested is not None:
            sizes[(a, n)] = estimate_size(passing, nested.inner_frame, fsz, group_cols=gcols,
                                          pass_replicates=nested.provenance, **kw)
        elif topk is not None:
            sizes[(a, n)] = size_for_topk(passing, topk, fsz, group_cols=gcols, **kw)
        else:
            sizes[(a, n)] = size_for_having(passing, g.est, shape.having, fsz, **kw)
    return sizes


def _group_rate(shape: Shape, meta: dict, filtered: bool = False) -> float | None:
    """The rate at which the sample drew a group's rows when whole groups can be missing from it (a
    uniform sample, group keys other than its strata, or a WHERE on other columns: a stratum
    none of whose sampled rows passes shows no group, though its unsampled rows may pass), else
    None: a stratified sample on the group keys holds every group
    (``estimators.unseen_groups``)."""
    if not meta.get("uniform_fallback") and len(shape.strata) == len(shape.keys) and not filtered:
        return None
    N, k = meta.get("population") or 0, meta.get("sample_size") or 0
    return min(1.0, k / N) if N > 0 and k > 0 else None


def _prefetch_replicates(B: int, seed: int) -> Callable:
    """The ``on_layout`` of a fresh draw: start drawing the sample's bootstrap replicates on the
    helper thread (``estimators.prefetch``) while this one evaluates the query over the sample.  A
    fresh sample has no cached group statistics, so the replicates will be drawn."""

    def on_layout(labels, k_g, n_g):
        prefetch.start(lambda: prefetch.layout(labels, k_g, n_g), B, BLOCK_CELLS, seed)

    return on_layout


def _groups_key(shape: Shape, sample: SampleInfo, parts: dict, versions: dict, settings: tuple) -> tuple:
    """What the sample frame and the shrunk group estimates depend on: the sample file, the
    aggregation's input (its filters and joins as SQL, joined tables at their versions), keys and
    aggregates, the partitions (fragment columns, covariates) and the estimator settings."""

    spj = spj_sql(shape.inner.child, shape.fact.scan_id, "sample",
                   lambda s: f"{s.table}@{versions.get(s.table)}")
    return (sample.path, sample_files.stamp(sample.path), spj, tuple(shape.keys), tuple(map(tuple, shape.aggs)),
            tuple(sorted(shape.args.items())), tuple(shape.strata),
            tuple(sorted((str(k), p.table, partition_key(p)) for k, p in parts.items())), settings)


def _pair_sizes(pdf, fcols: dict, sizes: dict, parts: dict, pairs) -> dict:
    """``estimators.pair_size.pair_estimate`` for each pair at each granularity both attributes have;
    the cell sizes come from the sample's rows (one per sampled row, weighted N_g / n_g)."""

    rows = pdf.drop_duplicates(SID)
    w = (rows["_n_g"] / rows.groupby("_stratum")[SID].transform("size")).to_numpy(dtype=float)
    out = {}
    for a, b in pairs:
        for (k, n) in sorted(sizes):
            if k != a or (b, n) not in sizes:
                continue
            pa, pb = parts[(a, n)], parts[(b, n)]
            if pa.n_fragments * pb.n_fragments > MAX_PAIR_CELLS:
                continue
            J = joint_counts(rows[fcols[(a, n)]].to_numpy(), rows[fcols[(b, n)]].to_numpy(), w,
                             np.asarray(pa.sizes, dtype=float), np.asarray(pb.sizes, dtype=float))
            out[(f"{a}&{b}", n)] = pair_estimate(sizes[(a, n)], sizes[(b, n)], J)
    return out
