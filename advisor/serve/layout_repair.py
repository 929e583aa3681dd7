"""A stored sketch the finder refuses only because the table's files spread its fragments (every
row group holds some): price the copy that would let it skip (a narrow copy of the columns the
query reads, or a full layout: ``advisor.selection.copy_pricing``), build it when the cost model
says it pays, otherwise say how many uses would make it pay and which command builds it.

The sketch is already captured, so the copy is weighed alone: this template's share of its build
(``advisor.selection.layout_cost``) against the predicted uses times the rows it would skip."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from advisor.layout.hypothetical import clustered_units, unit_rows
from advisor.layout.skip_prediction import boundary_values, read_fraction_of
from advisor.partition.range_partition import load_partition
from advisor.plan.read_columns import read_columns
from advisor.selection.cost_model import CostParams
from advisor.selection.forecast import predict_workload
from advisor.selection.copy_pricing import build_copy, can_copy, price_copy
from advisor.selection.layout_cost import PRIOR_LAYOUT_USES
from advisor.sketch.lookup import MAX_USE_READ, SPREAD, read_fraction
from advisor.warehouse.column_stats import column_stats

if TYPE_CHECKING:
    from advisor.context import Context
    from advisor.serve.settings import AdviseSettings


def layout_bound(bad: list) -> list:
    """The refused sketches a clustered layout on their attribute would make usable."""
    return [sk for sk, why in bad if SPREAD in why and len(sk.parts) == 1]


def repair(ctx: Context, s: AdviseSettings, q, versions: dict, sk) -> tuple[dict | None, str]:
    """(the layout built or None, the sentence saying what was weighed).  ``sk`` is current and
    refused only for its spread (``layout_bound``)."""
    cat, store = ctx.catalog, ctx.catalog.store
    p = sk.parts[0]
    if not can_copy(cat, p.table):
        return None, (f"sketch {sk.id} ({p.table}.{p.attr}) is spread over the Delta table's files; the advisor "
                      f"copies a Delta table only with a declared key (`--key`), which its copy follows the commits "
                      f"by (OPTIMIZE ... ZORDER BY ({p.attr}) would cluster the table itself)")
    v = versions.get(p.table) or cat.current_version(p.table)
    part = load_partition(store, p.partition_id)
    T = cat.version(p.table, v).rows
    lo = column_stats(cat, p.table, v).get(p.attr, (None,))[0]
    units = clustered_units(part, lo, unit_rows(cat, p.table, p.attr, v))
    after = read_fraction_of(units.units, boundary_values(part), p.fragments, part.null_id)
    reads = read_columns(q)
    now = read_fraction(cat, sk, versions, reads)
    params = CostParams(measured=s.measured_costs, **({"prior_reuses": s.uses} if s.uses is not None else {}))
    w = predict_workload(store, q, p.table, params, upto=v, table_rows=T)
    lay = price_copy(cat, p.table, p.attr, v, reads.get(p.table) or {p.attr}, w, q.template)
    build, share, others = lay["build_rows"], lay["share_rows"], lay["other_uses"]
    saving = w.reuses * (1.0 - after) * T
    what = (f"a narrow copy of {p.table} ({', '.join(lay['columns'])}) sorted on {p.attr}"
            if lay.get("columns") is not None else f"a layout clustered on {p.attr}")
    head = (f"sketch {sk.id} ({p.table}.{p.attr}) reads {now:.0%} of {p.table} on its current files; {what} "
            f"would cut that to {after:.1%}, its build ~{build / max(T, 1):.1f} scans ({lay['source']})")
    if after > MAX_USE_READ:
        return None, head + f", still above {MAX_USE_READ:.0%}: not worth building"
    if not s.build_layouts or saving <= share:
        per_use = max((1.0 - after) * T, 1.0)
        need = max(1, math.ceil(build / per_use - others))
        verdict = ("layouts are not built on this path" if not s.build_layouts else
                   f"{w.reuses:g} predicted use(s) save {saving / max(T, 1):.2f} scans against this "
                   f"query's share {share / max(T, 1):.2f} of the build")
        return None, (head + f"; {verdict}: it pays after ~{need} uses; to change it: `advisor layout {p.table} "
                      f"{p.attr}`, or tell the advisor how often the query runs (--uses N)")
    build_copy(cat, lay, v, None if s.copy_budget_mb is None else s.copy_budget_mb * 1e6)
    uses = max(PRIOR_LAYOUT_USES, w.reuses + others)
    return (lay, head + f"; built it (layout {lay['id']}, {lay['seconds']:.1f} s): {w.reuses:g} predicted use(s) "
                        f"save {saving / max(T, 1):.2f} scans against this query's share {share / max(T, 1):.2f} "
                        f"of the build over {uses:g} predicted uses")
