"""Keep the copies the advisor built (narrow copies and full layouts) under a disk budget.

When the copies of the warehouse take more than the budget, the ones with the least predicted
saving go first: a copy's saving is the predicted uses still expected of it, the horizons of the
go decisions remembered on its table and attribute (``advisor.selection.decision_memory``), times
the rows of its table.  The copy just built for the query being decided is kept (dropping it would
refuse the very sketch that paid for it); each drop is reported in a line.

>>> victims([(1, 500, 10.0), (2, 300, 1.0), (3, 400, 0.0)], budget=600, keep=1)
[3, 2]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.layout.clustered_copy import drop_layout, layout_bytes
from advisor.layout.registry import layout_row

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog


def victims(copies: list[tuple[int, int, float]], budget: float, keep: int | None = None) -> list[int]:
    """Ids to drop from ``copies`` [(id, bytes, predicted saving)] to fit ``budget`` bytes, least
    saving first (larger first among equals), never ``keep``."""
    total = sum(b for _, b, _ in copies)
    out = []
    for lid, size, _ in sorted(copies, key=lambda c: (c[2], -c[1])):
        if total <= budget:
            break
        if lid == keep:
            continue
        out.append(lid)
        total -= size
    return out


def predicted_saving(catalog: Catalog, table: str, attr: str) -> float:
    """Rows a copy on ``table.attr`` is still predicted to save: go decisions' horizons times rows."""
    rows = catalog.store.query("SELECT horizon FROM decisions WHERE table_name=? AND attr=? AND go=1", (table, attr))
    return float(sum(r["horizon"] for r in rows)) * float(catalog.version(table).rows)


def enforce(catalog: Catalog, budget_bytes: float, keep: int | None = None) -> list[str]:
    """Drop copies until they fit ``budget_bytes``; one line per copy dropped."""
    lays = [layout_row(catalog.store, r) for r in catalog.store.query("SELECT * FROM layouts")]
    copies = [(lay["id"], layout_bytes(lay), predicted_saving(catalog, lay["table"], lay["attr"])) for lay in lays]
    by_id = {lay["id"]: lay for lay in lays}
    sizes = {c[0]: c for c in copies}
    lines = []
    for lid in victims(copies, budget_bytes, keep):
        lay = by_id[lid]
        kind = "narrow copy" if lay["columns"] is not None else "layout"
        drop_layout(catalog, lid)
        lines.append(f"dropped {kind} {lid} of {lay['table']} on {lay['attr']} ({sizes[lid][1] / 1e6:.1f} MB, "
                     f"predicted saving {sizes[lid][2] / max(catalog.version(lay['table']).rows, 1):.1f} scans) "
                     f"to keep copies within {budget_bytes / 1e6:.0f} MB")
    return lines
