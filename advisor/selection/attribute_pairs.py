"""Two-attribute candidates: offered, sized, captured and used as ``a IN F_a AND b IN F_b``.

Where the best single attribute of the sampled table is weak (its estimated sketch covers at least
``PAIR_WEAK`` of the table), ``recommend`` also sizes every pair of the strategy's safe candidates
on that table (``estimators.pair_size``), checks the attribute *set* with Z3 (a product partition on
``{a, b}``; seed 001 Def. 5), and lets the cost model weigh each pair like any candidate.  A picked
pair is captured as two ordinary single-attribute sketches of the query, so each is stored, reused
and maintained incrementally as before; ``combine`` applies them together, as the conjunction of
their filters, whenever both are usable for a query with identical bindings and the pair is safe.
Pairs are sized from the bootstrap / CLT replicates only: OPT and method exact do not offer them,
and replays do not yet (the template memo and sketch derivation there are per attribute).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np

from advisor.engine.execute import table_view, versions_now
from advisor.estimation.candidate_sizes import Candidate, SizeSummary
from advisor.layout.skip_prediction import read_units, sketch_keep_probability
from advisor.maintain.spark.service import maintain_sketch
from advisor.partition.range_partition import load_partition
from advisor.partition.refine import store_partition
from advisor.safety.static_check import check_safety
from advisor.selection.candidates import every_read
from advisor.sketch.range_filter import range_condition
from advisor.sketch.capture import capture_batch, sketch_attrs
from advisor.sketch.lookup import companions, usable_sketches
from advisor.warehouse.column_stats import stats_for_query
from advisor.warehouse.sketch_records import Sketch
from estimators.pair_size import MAX_PAIR_CELLS, pair_read_fraction

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog

PAIR_WEAK = 0.2           # a best single estimate below this needs no second attribute [INFERRED]
MAX_PAIR_ATTRS = 5        # pairs among at most this many of the pool's candidates (<= 10 pairs)


def pair_keys(pool: list, plan: dict):
    """A function of the single estimates (``estimate``'s ``pairs``): when even the best single
    candidate of the sampled table covers ``PAIR_WEAK`` or more, the pairs among its
    ``MAX_PAIR_ATTRS`` best whose product partition stays small, else none."""
    fact = {c.key for c in pool if not c.dim and c.key in plan}

    def pick(sizes: dict) -> list:
        best: dict = {}
        for (k, n), se in sizes.items():
            if k in fact:
                best[k] = min(best.get(k, 1.0), se.selectivity_expected)
        if not best or min(best.values()) < PAIR_WEAK:
            return []
        keys = sorted(sorted(best, key=lambda k: (best[k], k))[:MAX_PAIR_ATTRS])
        return [(a, b) for a, b in itertools.combinations(keys, 2)
                if any((sizes[(a, n)].n_fragments * sizes[(b, n)].n_fragments) <= MAX_PAIR_CELLS
                       for n in set(plan[a]) & set(plan[b]))]
    return pick


def pair_candidates(cat: Catalog, q, shape, versions: dict, est, by: dict, units: dict, table: str, bridged) -> list:
    """Candidates ``a&b`` for the pairs ``est`` sized (``pair_keys`` chose them), each with its Z3
    verdict on the attribute set and, per granularity, sizes and a layout-aware read fraction."""

    if not est.pair_sizes:
        return []
    stats = stats_for_query(cat, q, versions)
    out = {}
    for (key, n), se in sorted(est.pair_sizes.items()):
        a, b = key.split("&")
        ca, cb = by[a], by[b]
        if key not in out:
            v = check_safety(q.root, every_read(q, table, a) | every_read(q, table, b), stats, per_scan_max=2)
            out[key] = Candidate(table, key, bool(v.safe), v.reason, min(ca.ndv, cb.ndv), ca.roles & cb.roles,
                                 attrs=(a, b))
        c = out[key]
        if not c.safe:
            continue
        lo, hi = se.selectivity_ci
        sel = min(max(se.selectivity_expected, lo), hi)
        s = SizeSummary(n, se.n_fragments, sel, lo, hi, se.selectivity_point, se.fragments_expected)
        read, source = pair_read(cat, table, versions[table], (a, b), est, n, units, bridged)
        c.sizes[n] = s.with_read(read, source)
    return list(out.values())


def pair_read(cat: Catalog, table: str, version: int, attrs: tuple, est, n: int, units: dict, bridged) -> tuple:
    """(expected read fraction, source) of ``a AND b``: each unit of the layout the scan reads (the
    leading attribute's) is kept only if both filters keep it by its min/max."""

    best = None
    for lead, other in (attrs, attrs[::-1]):
        ua = units[lead]
        ub = read_units(cat, table, other, version, layout_attr=lead)
        if len(ua.units) != len(ub.units):
            continue
        keep = []
        for attr, u in ((lead, ua), (other, ub)):
            se, part = est.sizes[(attr, n)], est.partitions[(attr, n)]
            keep.append(sketch_keep_probability(u.units, part, se.fragment_probability, bridged(se, part)))
        frac = pair_read_fraction(np.array([x.rows for x in ua.units]), keep[0], keep[1])
        if best is None or frac < best[0]:
            best = (frac, f"{ua.source}, {lead} leads")
    return best or (1.0, "no common read units")


def lead_first(pick: Candidate, units_source: str) -> tuple:
    """The pair's attributes with the one whose layout the scan reads first."""
    a, b = pick.attrs
    return (b, a) if units_source.endswith(f"{b} leads") else (a, b)


def capture_pair(cat: Catalog, q, pick: Candidate, n_target: int, parts: dict, versions: dict, source: str) -> dict:
    """Capture the pair as two single-attribute sketches (leading attribute first) on the partitions
    they were sized with, in ONE Spark job (``capture.capture_batch``; both attributes are safe alone,
    being in the pool, and as a set, checked in ``pair_candidates``).  The selectivity is that of the
    conjunction, counted on the table."""

    table = pick.table
    items = [(q, {table: attr}, {table: store_partition(cat, parts[(attr, n_target)])})
             for attr in lead_first(pick, source)]
    sketches, secs = capture_batch(cat, items, versions, save=True)
    rows = conjunction_rows(cat, table, versions[table], sketches)
    return {"sketch_id": sketches[0].id, "sketch_ids": [sk.id for sk in sketches],
            "selectivity": rows / max(1, cat.version(table, versions[table]).rows), "seconds": round(secs, 3)}


def conjunction_rows(cat: Catalog, table: str, version: int, sketches: list) -> int:
    """Rows of ``table`` in every sketch's fragments (exact: no bridging of gaps)."""
    conds = []
    for sk in sketches:
        p = sk.part(table)
        part = load_partition(cat.store, p.partition_id)
        conds.append(f"({range_condition(part, p.fragments, p.attr, max_runs=part.n_fragments + 1)})")
    sql = f"SELECT count(*) FROM {table_view(cat, table, version)} WHERE {' AND '.join(conds)}"
    return int(cat.spark.sql(sql).first()[0])


def combine(cat: Catalog, q, versions: dict, good: list):
    """The best usable sketch, joined by a second usable sketch of the same query (identical
    bindings, current data) on another attribute of the same single table when Z3 proves that
    attribute set safe: the conjunction is a union of product-partition cells that holds the
    provenance.  Returns a transient ``Sketch`` with both parts (the best first), or ``good[0]``."""

    if not good:
        return None
    best = good[0]
    for other in companions(best, good[1:], q.bindings):
        if other.data_versions != best.data_versions:
            continue
        p, o = best.parts[0], other.parts[0]
        X = sketch_attrs(q, {p.table: p.attr}) | sketch_attrs(q, {o.table: o.attr})
        if check_safety(q.root, X, stats_for_query(cat, q, versions), per_scan_max=2).safe:
            return Sketch(best.id, best.template, best.bindings, best.sql, [p, o], dict(best.data_versions),
                          best.parent_id, f"{best.how}+{other.id}", best.created)
    return best


def catch_up(cat: Catalog, q, measured: bool = True) -> list:
    """Maintain the stale sketches that would join the query's best one (``combine``): a pair's two
    sketches are maintained together, while ``hooks.before_use`` maintains only the best
    (``measured``: as ``maintain_sketch``'s)."""

    versions = versions_now(cat, q)
    good, _ = usable_sketches(cat, q, versions, allow_stale=True)
    if not good:
        return []
    return [maintain_sketch(cat, o.id, measured=measured) for o in companions(good[0], good[1:], q.bindings)
            if any(versions.get(t) != v for t, v in o.data_versions.items())]
