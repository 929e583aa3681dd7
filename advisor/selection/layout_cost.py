"""What making a sketch skip costs when the table's files do not cluster its attribute: building a
copy sorted on it (``advisor.layout.clustered_copy``), priced once and shared by every template
whose sketches would skip on it.

A full layout rewrites every column of the table, while a query scans a few columns: at TPC-H SF
0.1 a lineitem layout took 6.3 s where the HAVING query it served scanned in 0.25-0.5 s, about
``LAYOUT_PRIOR_SCANS`` scans.  A narrow copy holds only the columns the templates deciding on the
attribute read, so it is priced from their bytes: ``NARROW_PRIOR_SCANS`` scans of a query reading
exactly those columns (read, sort, write, then a pass for the manifest), scaled by the copy's
bytes over the query's.  Measured builds (logged as ``layout`` runs) replace the priors: full
builds per row; narrow ones per row as ``a + b * share`` of the table's bytes (a copy's reading,
sorting and writing cost per row whatever its width, its bytes on top: at SF 1 lineitem copies of
4.5-20 % of the bytes took 1.7-2.7 s, so a per-byte price alone overpriced the wider ones 3x).
The build is charged to this template in proportion to its share of the layout's predicted uses:
its own, plus those remembered for other templates deciding on the same ``table.attr``, and never
fewer than ``PRIOR_LAYOUT_USES`` in all (a layout outlives the query that asked for it: it serves
any later template that sketches, or filters, on that attribute).

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
NARROW_PRIOR_SCANS = 3.0   # a narrow copy's build in scans by a query reading its columns [INFERRED]
# The same builds written on the driver (``advisor.layout.arrow_copy``: no shuffle): at TPC-H SF1 a
# narrow lineitem copy of two columns took 0.7-1.1 runs of a query reading them, a full layout 2.9
# runs of a two-column query (BENCHMARKS.md, "Narrow copies").
DRIVER_LAYOUT_PRIOR_SCANS = 4.0
DRIVER_NARROW_PRIOR_SCANS = 1.5
PRIOR_LAYOUT_USES = 10.0   # uses a new layout is expected to serve at the least [INFERRED]


def layout_share(build_rows: float, reuses: float, others: float) -> float:
    """This template's part of a layout's build: ``reuses`` of at least ``PRIOR_LAYOUT_USES`` uses
    in all (``others``: the other templates' predicted uses of the same layout)."""
    total = max(PRIOR_LAYOUT_USES, reuses + others)
    return build_rows * min(1.0, reuses / total) if total > 0 else build_rows


def _builds(store: Store, narrow: bool, driver: bool = False, table: str | None = None) -> list[tuple[float, float]]:
    """(seconds per row, byte share) of the newest builds written the same way (on the driver, or by
    Spark), full layouts (share 1) or narrow copies; those of ``table`` when it has any."""
    out = []
    for r in store.query("SELECT record_json FROM runs WHERE kind='layout' ORDER BY id DESC LIMIT 40"):
        try:
            rec = json.loads(r["record_json"])
        except ValueError:
            continue
        share = rec.get("byte_share")
        if not (rec.get("rows") and rec.get("seconds")) or bool(share) != narrow:
            continue
        if (rec.get("built_on") == "driver") != driver:
            continue
        out.append((rec.get("table"), float(rec["seconds"]) / float(rec["rows"]), float(share) if narrow else 1.0))
    own = [o for o in out if table is not None and o[0] == table]
    return [(per, sh) for _, per, sh in (own or out)][:8]


def _measured(store: Store, narrow: bool, driver: bool = False) -> list[float]:
    """Seconds per row of the newest full builds written the same way."""
    return [per for per, _ in _builds(store, narrow, driver)][:5]


SHARE_SPREAD = 1.5  # measured shares this far apart fit the per-byte part; closer ones do not


def per_row_at(builds: list[tuple[float, float]], share: float) -> float:
    """A narrow copy's seconds per row at ``share`` of the table's bytes from measured (seconds per
    row, share) builds: ``a + b * share`` fitted by non-negative least squares when the shares
    spread, else the median build's per-row cost, scaled up (never down) by the share over its own.

    >>> round(per_row_at([(1.0, 0.05), (1.2, 0.1), (1.6, 0.2)], 0.15), 3)
    1.4
    >>> per_row_at([(2.0, 0.1)], 0.05), per_row_at([(2.0, 0.1)], 0.2)
    (2.0, 4.0)"""
    shares = [sh for _, sh in builds]
    if len(builds) >= 2 and max(shares) >= SHARE_SPREAD * min(shares):
        import numpy as np  # scipy's nnls: heavy to import where no copy is priced (start-up time)
        from scipy.optimize import nnls
        (a, b), _ = nnls(np.array([[1.0, sh] for sh in shares]), np.array([per for per, _ in builds]))
        return float(a + b * share)
    per, sh = sorted(builds)[len(builds) // 2]
    return per * max(1.0, share / sh)


def narrow_build_rows(store: Store, table_rows: float, byte_share: float, read_share: float, scan_rate: float,
                      fixed_rows: float = 0.0, driver: bool = False, table: str | None = None) -> tuple[float, str]:
    """A narrow copy's build in rows of scanning: ``byte_share`` is the copy's columns' share of the
    table's bytes, ``read_share`` that of the columns the query reads (a scan of the query costs
    ``table_rows`` rows).  Measured narrow builds written the same way (``driver``; of ``table``
    when it has some) price it per row and share (``per_row_at``); else the prior.

    >>> narrow_build_rows(_NoRuns(), 1000.0, 0.2, 0.2, 1.0)
    (3000.0, 'prior: 3 scans of the query')
    >>> narrow_build_rows(_NoRuns(), 1000.0, 0.2, 0.2, 1.0, driver=True)
    (1500.0, 'prior: 1.5 scans of the query (written on the driver)')"""
    builds = _builds(store, narrow=True, driver=driver, table=table)
    if builds:
        s = per_row_at(builds, byte_share) * table_rows
        return s * scan_rate + fixed_rows, f"{len(builds)} measured narrow build(s): ~{s:.1f} s"
    scale = byte_share / read_share if read_share > 0 else 1.0
    prior = DRIVER_NARROW_PRIOR_SCANS if driver else NARROW_PRIOR_SCANS
    return prior * scale * table_rows + fixed_rows, f"prior: {prior:g} scans of the query" + (
        " (written on the driver)" if driver else "")


class _NoRuns:
    """A store with no logged builds (for the examples)."""

    def query(self, *_):
        return []


def build_rows(store: Store, table_rows: float, scan_rate: float, fixed_rows: float = 0.0,
               driver: bool = False) -> tuple[float, str]:
    """A layout build of a table of ``table_rows`` rows in rows of scanning (cost-model units): the
    newest measured builds written the same way (``driver``) in seconds per row times the scan
    rate, else the prior; with the source."""
    per_row = _measured(store, narrow=False, driver=driver)
    if per_row:
        per_row.sort()
        s = per_row[len(per_row) // 2] * table_rows
        return s * scan_rate + fixed_rows, f"{len(per_row)} measured build(s): ~{s:.1f} s"
    prior = DRIVER_LAYOUT_PRIOR_SCANS if driver else LAYOUT_PRIOR_SCANS
    return prior * table_rows + fixed_rows, f"prior: {prior:g} scans" + (" (written on the driver)" if driver else "")


def other_uses(store: Store, table: str, attr: str, template: str) -> float:
    """Predicted uses of a layout on ``table.attr`` by other templates: the horizons of their
    remembered decisions on that attribute."""
    rows = store.query("SELECT horizon FROM decisions WHERE table_name=? AND attr=? AND template<>?",
                       (table, attr, template))
    return float(sum(r["horizon"] for r in rows))


def log_build(store: Store, lay: dict, rows: int, seconds: float, byte_share: float | None = None) -> None:
    """Record a layout build's time (a narrow copy's with its byte share; where it was written), so
    the next pricing uses it."""
    store.log_run("layout", None, {"layout_id": lay["id"], "table": lay["table"], "attr": lay["attr"],
                                   "rows": int(rows), "seconds": round(seconds, 4),
                                   "built_on": lay.get("built_on", "spark"),
                                   **({"byte_share": round(byte_share, 6), "columns": lay.get("columns")}
                                      if byte_share else {})})
