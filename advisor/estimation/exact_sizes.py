"""Exact sketch sizes: every candidate (attribute, granularity) captured in as few Spark jobs as possible.

The OPT oracle (evaluation only) and ``method="exact"`` decide on these real sizes instead of the
bootstrap's estimates (``advisor.selection.cost_model`` module docstring); the cost model itself stays pure there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.estimation.candidate_sizes import SizeSummary
from advisor.layout.skip_prediction import boundary_values, read_fraction_of
from advisor.partition.fragment_runs import read_set
from advisor.partition.refine import store_partition
from advisor.sketch.capture import by_value_ok, capture_batch, capture_values, value_sketch

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog


def oracle(catalog: Catalog, query, parts: dict, versions: dict, units: dict | None = None) -> tuple[dict, float]:
    """OPT: capture every (attr, n) -> partition in ONE Spark job; returns real SizeSummary and seconds
    (with the real read fraction when the attributes' read ``units`` are given)."""
    sizes, _, secs = exact_sizes(catalog, query, parts, versions, units)
    return sizes, secs


def exact_sizes(catalog: Catalog, query, parts: dict, versions: dict, units: dict | None = None,
                answer: list | None = None) -> tuple[dict, dict, float]:
    """Capture every (attr, n) -> partition: (real SizeSummary per key, the unsaved sketches per key,
    seconds).  Attributes the capture can carry by value share ONE job whatever their number and
    granularities (``capture.capture_values``); the rest are captured together in one more job
    (``capture_batch``).  Used by the OPT oracle and by ``method="exact"``.  With an ``answer``
    list the first by-value job also answers the query (``capture.capture_values``)."""

    keys = sorted(parts)
    stored = {k: store_partition(catalog, parts[k]) for k in keys}
    by_val = [k for k in keys if by_value_ok(query, {stored[k].table: stored[k].attr}, {stored[k].table: stored[k]})]
    rest = [k for k in keys if k not in by_val]
    sketches, secs = {}, 0.0
    for table in sorted({stored[k].table for k in by_val}):
        mine = [k for k in by_val if stored[k].table == table]
        sink = answer if answer is not None and not answer else None
        vals, s1 = capture_values(catalog, query, table, sorted({stored[k].attr for k in mine}), versions, sink)
        secs += s1
        for k in mine:
            sketches[k] = value_sketch(query, table, stored[k], *vals[stored[k].attr], versions)
    if rest:
        items = [(query, {p.table: p.attr}, {p.table: p}) for p in (stored[k] for k in rest)]
        got, s2 = capture_batch(catalog, items, versions)
        sketches.update(zip(rest, got))
        secs += s2
    out = {}
    for k in keys:
        p, sk = stored[k], sketches[k]
        fr = sk.parts[0].fragments
        rows = sum(p.sizes[f] for f in fr if f < len(p.sizes))
        out[k] = SizeSummary.exact(p.n_target, p.n_fragments, rows / max(1, sum(p.sizes)), len(fr))
        if units and k[0] in units:  # what the scan reads: the filter's runs, bridged as ``use`` bridges them
            u = units[k[0]]
            out[k] = out[k].with_read(read_fraction_of(u.units, boundary_values(p), read_set(fr, p), p.null_id),
                                      u.source)
    return out, sketches, secs
