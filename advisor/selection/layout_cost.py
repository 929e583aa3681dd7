"""What making a sketch skip costs when the table's files do not cluster its attribute: building a
clustered layout (``advisor.layout.clustered_copy``), priced once and shared by every template
whose sketches would skip on it.

A layout rewrites every column of the table sorted on one attribute, while a query scans a few
columns: at TPC-H SF 0.1 a lineitem layout took 6.3 s where the HAVING query it served scanned in
0.25-0.5 s, about ``LAYOUT_PRIOR_SCANS`` scans.  Measured builds (logged as ``layout`` runs) replace
the prior, scaled by rows.  The build is charged to this template in proportion to its share of
the layout's predicted uses: its own, plus those remembered for other templates deciding on the
same ``table.attr``, and never fewer than ``PRIOR_LAYOUT_USES`` in all (a layout outlives the query
that asked for it: it serves any later template that sketches, or filters, on that attribute).

>>> layout_share(1000.0, 3.0, 0.0)
300.0
>>> layout_share(1000.0, 3.0, 27.0)
100.0
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from advisor.warehouse.store import Store

LAYOUT_PRIOR_SCANS = 15.0  # a layout build in scans of the table by a query (module docstring)
PRIOR_LAYOUT_USES = 10.0   # uses a new layout is expected to serve at the least [INFERRED]


def layout_share(build_rows: float, reuses: float, others: float) -> float:
    """This template's part of a layout's build: ``reuses`` of at least ``PRIOR_LAYOUT_USES`` uses
    in all (``others``: the other templates' predicted uses of the same layout)."""
    total = max(PRIOR_LAYOUT_USES, reuses + others)
    return build_rows * min(1.0, reuses / total) if total > 0 else build_rows


def build_rows(store: Store, table_rows: float, scan_rate: float, fixed_rows: float = 0.0) -> tuple[float, str]:
    """A layout build of a table of ``table_rows`` rows in rows of scanning (cost-model units): the
    newest measured builds' seconds per row times the scan rate, else the prior; with the source."""
    per_row = []
    for r in store.query("SELECT record_json FROM runs WHERE kind='layout' ORDER BY id DESC LIMIT 5"):
        try:
            rec = json.loads(r["record_json"])
        except ValueError:
            continue
        if rec.get("rows") and rec.get("seconds"):
            per_row.append(float(rec["seconds"]) / float(rec["rows"]))
    if per_row:
        per_row.sort()
        s = per_row[len(per_row) // 2] * table_rows
        return s * scan_rate + fixed_rows, f"{len(per_row)} measured build(s): ~{s:.1f} s"
    return LAYOUT_PRIOR_SCANS * table_rows + fixed_rows, f"prior: {LAYOUT_PRIOR_SCANS:g} scans"


def other_uses(store: Store, table: str, attr: str, template: str) -> float:
    """Predicted uses of a layout on ``table.attr`` by other templates: the horizons of their
    remembered decisions on that attribute."""
    rows = store.query("SELECT horizon FROM decisions WHERE table_name=? AND attr=? AND template<>?",
                       (table, attr, template))
    return float(sum(r["horizon"] for r in rows))


def log_build(store: Store, lay: dict, rows: int, seconds: float) -> None:
    """Record a layout build's time, so the next pricing uses it."""
    store.log_run("layout", None, {"layout_id": lay["id"], "table": lay["table"], "attr": lay["attr"],
                                   "rows": int(rows), "seconds": round(seconds, 4)})
