"""A sketch in use that reads the table's files as stored: once its template's predicted uses have
grown past those its decision was made for, weigh again the copy that would let it skip more, and
build it when it now pays.

A decision prices a copy for the uses predicted then (a new template: the prior, a few); a template
that keeps running earns more (``advisor.selection.forecast``), and the sketch's real read on the
files is known by then, not estimated.  The copy is weighed alone, as ``layout_repair`` weighs a
layout: the template's share of its build (``copy_pricing.price_copy``) against the predicted uses
times the rows it would spare per use.  Checked again only when the predicted uses have grown by
``REGROW`` since the last check of the same (template, table, attribute).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from advisor.layout.hypothetical import clustered_units, unit_rows
from advisor.layout.registry import find_layout
from advisor.layout.skip_prediction import boundary_values, read_fraction_of
from advisor.partition.range_partition import load_partition
from advisor.plan.read_columns import read_columns
from advisor.selection.copy_pricing import build_copy, can_copy, price_copy
from advisor.selection.cost_model import CostParams
from advisor.selection.forecast import predict_workload
from advisor.sketch.lookup import read_fraction
from advisor.warehouse.column_stats import column_stats

if TYPE_CHECKING:
    from advisor.context import Context
    from advisor.serve.settings import AdviseSettings

REGROW = 1.5   # re-weigh once the predicted uses are this many times those last weighed
_weighed: dict[tuple, float] = {}   # (warehouse, template, table, attr) -> predicted uses last weighed


def revisit_copy(ctx: Context, s: AdviseSettings, q, versions: dict, sk) -> dict | None:
    """The copy built for the sketch ``sk`` now in use (its priced record with ``reason``), or None
    when none is built: not a one-table sketch on the files as stored, a table the advisor may not copy, weighed
    recently, or not paying yet."""
    cat, store = ctx.catalog, ctx.catalog.store
    if not s.build_layouts or len(sk.parts) != 1:
        return None
    p = sk.parts[0]
    if not can_copy(cat, p.table):
        return None
    v = versions.get(p.table) or cat.current_version(p.table)
    reads = read_columns(q)
    if find_layout(store, p.table, p.attr, v, reads.get(p.table)) is not None:
        return None
    params = CostParams(measured=s.measured_costs, **({"prior_reuses": s.uses} if s.uses is not None else {}))
    T = cat.version(p.table, v).rows
    w = predict_workload(store, q, p.table, params, upto=v, table_rows=T)
    key = (str(store.warehouse), q.template, p.table, p.attr)
    if w.reuses < REGROW * _weighed.get(key, 0.0):
        return None
    _weighed[key] = w.reuses
    part = load_partition(store, p.partition_id)
    lo = column_stats(cat, p.table, v).get(p.attr, (None,))[0]
    after = read_fraction_of(clustered_units(part, lo, unit_rows(cat, p.table, p.attr, v)).units,
                             boundary_values(part), p.fragments, part.null_id)
    now = read_fraction(cat, sk, versions, reads)
    saving = w.reuses * max(now - after, 0.0) * T
    lay = price_copy(cat, p.table, p.attr, v, reads.get(p.table) or {p.attr}, w, q.template)
    if saving <= lay["share_rows"]:
        return None
    t0 = time.perf_counter()
    build_copy(cat, lay, v, None if s.copy_budget_mb is None else s.copy_budget_mb * 1e6)
    what = (f"a narrow copy of {p.table} ({', '.join(lay['columns'])})" if lay.get("columns") is not None
            else f"a layout of {p.table}")
    lay["reason"] = (f"the template's predicted uses grew to {w.reuses:g}: sketch {sk.id} reads {now:.1%} of "
                     f"{p.table} on its files as stored, {after:.1%} through {what} sorted on {p.attr}; built it "
                     f"(~{lay['build_scans']:g} scans priced, {time.perf_counter() - t0:.1f} s): {w.reuses:g} uses "
                     f"save {saving / max(T, 1):.2f} scans against this query's share {lay['share_rows'] / max(T, 1):.2f}")
    return lay


def revisit_timed(ctx: Context, s: AdviseSettings, q, versions: dict, sk, secs: dict) -> dict | None:
    """``revisit_copy``, the build's time counted as capturing (work done for the sketch)."""
    t0 = time.perf_counter()
    copy = revisit_copy(ctx, s, q, versions, sk)
    if copy is not None:
        secs["capture"] += time.perf_counter() - t0
    return copy
