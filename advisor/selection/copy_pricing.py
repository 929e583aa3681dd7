"""What a copy that lets a sketch skip costs, how the decision says so, and building it.

A candidate its table's files cannot skip on is priced with a copy sorted on it: a narrow copy of
the columns the query reads (widened by the copies already kept on the attribute, which it
replaces) when that is fewer than all columns and cheaper, else a full layout
(``advisor.selection.layout_cost``).  The decision line names what the files as stored leave to
read, the copy, the full layout's price and after how many uses the copy pays.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Iterable

from advisor.layout.clustered_copy import build_layout, on_driver
from advisor.layout.hypothetical import byte_share
from advisor.layout.registry import layouts_of
from advisor.layout.skip_prediction import read_units, skip_ceiling
from advisor.selection.copy_budget import enforce
from advisor.errors import BadInput, Unsupported
from advisor.estimation.size_estimates import split_key
from advisor.plan.parse import parse_sql
from advisor.plan.read_columns import read_columns
from advisor.selection.layout_cost import (
    PRIOR_LAYOUT_USES,
    build_rows,
    layout_share,
    log_build,
    narrow_build_rows,
    other_uses,
)
from advisor.warehouse.column_stats import column_stats
from advisor.warehouse.sketch_records import latest_versions

if TYPE_CHECKING:
    from advisor.selection.cost_model import UseForecast
    from advisor.warehouse.catalog import Catalog


def can_copy(cat: Catalog, t: str) -> bool:
    """Whether the advisor may keep a copy of ``t``: a table of its own store, or a Delta table read
    in place with a declared key (the copy follows its commits by key: ``warehouse.delta_copies``)."""
    return not cat.is_delta(t) or bool(cat.key(t))


def sketched_reads(cat: Catalog, t: str, attr: str) -> set:
    """The columns of ``t`` read by the templates with a live sketch on ``t.attr``: a copy built for
    one of them holds the others' columns too, so that it is not rebuilt wider at their next use."""
    cols: set = set()
    for sk in latest_versions(cat.store):
        if any(p.table == t and p.attr == attr for p in sk.parts):
            try:
                cols |= set(read_columns(parse_sql(sk.sql, cat.schema)).get(t, ()))
            except (BadInput, Unsupported):  # SQL that no longer parses on the schema: not widened by it
                continue
    return cols


def copy_columns(cat: Catalog, t: str, attr: str, reads: Iterable[str]) -> list | None:
    """The columns a narrow copy of ``t`` on ``attr`` would hold: ``reads`` (what the query reads of
    it), widened by the columns of the copies already kept on the attribute (the new copy replaces
    them) and by those the templates with a live sketch on it read; None when that is every column
    (a full layout then serves as well)."""
    cols = set(reads) | {attr} | sketched_reads(cat, t, attr)
    for lay in layouts_of(cat.store, t, attr):
        if lay["columns"] is not None:
            cols |= set(lay["columns"])
    every = {c for c, _ in cat.schema(t)}
    return None if cols >= every else sorted(cols)


def price_copy(cat: Catalog, t: str, attr: str, version: int, reads: Iterable[str], w: UseForecast,
               template: str) -> dict:
    """The copy a sketch on ``t.attr`` would skip on, priced: a narrow copy when it holds fewer than
    all columns and costs less than a full layout, else the full layout; both prices are kept so
    that the decision line can name the cheaper."""
    reads = set(reads)
    store = cat.store
    rows = cat.version(t, version).rows
    full, full_source = build_rows(store, rows, w.scan_rate, w.fixed_rows, on_driver(cat, t, attr, version))
    cols = copy_columns(cat, t, attr, reads)
    build, source, share_b = full, full_source, None
    if cols is not None:
        share_b = byte_share(cat, t, version, cols)
        read_b = byte_share(cat, t, version, reads | {attr})
        narrow, narrow_source = narrow_build_rows(store, rows, share_b, read_b, w.scan_rate, w.fixed_rows,
                                                  on_driver(cat, t, attr, version, cols), table=t)
        if narrow < full:
            build, source = narrow, narrow_source
        else:
            cols = share_b = None
    others = other_uses(store, t, attr, template)
    return {"table": t, "attr": attr, "build_rows": build, "share_rows": layout_share(build, w.reuses, others),
            "build_scans": round(build / max(rows, 1), 2), "source": source, "other_uses": others,
            "built": False, "columns": cols, "byte_share": share_b, "full_build_scans": round(full / max(rows, 1), 2)}


def pays_after_uses(lay: dict, costing) -> int | None:
    """Uses after which capture plus the whole copy's build are repaid by the per-use net saving
    (None when a use saves nothing).

    >>> from types import SimpleNamespace as N
    >>> pays_after_uses({"build_rows": 300.0}, N(saving_rows=100.0, overhead_rows=5.0, maintenance_rows=5.0,
    ...                                         capture_rows=60.0))
    4"""
    if costing is None:
        return None
    per_use = costing.saving_rows - costing.overhead_rows - costing.maintenance_rows
    if per_use <= 0:
        return None
    return max(1, math.ceil((costing.capture_rows + lay["build_rows"]) / per_use))


def layout_phrase(lay: dict, reuses: float, rows: float, costing=None, files: str | None = None) -> str:
    """How the decision priced making the sketch skip: the files as stored (why they cannot), a
    narrow copy and a full layout, naming the cheaper copy and after how many uses it pays."""
    uses = max(PRIOR_LAYOUT_USES, reuses + lay["other_uses"])
    narrow = lay.get("columns") is not None
    what = (f"a narrow copy of {lay['table']} ({', '.join(lay['columns'])}) sorted on {lay['attr']}" if narrow
            else f"a new layout of {lay['table']} clustered on {lay['attr']}")
    other = (f"; a full layout ~{lay['full_build_scans']:g} scans" if narrow and lay.get("full_build_scans") else "")
    n = pays_after_uses(lay, costing)
    after = f", pays after {n} use(s)" if n is not None else ", no number of uses repays it"
    stored = f"the files as stored: {files}; " if files else ""
    return (f"{stored}the sketch skips on {what}: its build ~{lay['build_scans']:g} scans ({lay['source']}){other}"
            f"{after}; shared over {uses:g} predicted uses, {lay['share_rows'] / max(rows, 1):.2f} scans "
            f"charged to this query; to change it: `advisor layout {lay['table']} {lay['attr']}` or more "
            f"expected uses (--uses N)")


def build_copy(cat: Catalog, lay: dict, version: int, budget_bytes: float | None = None) -> dict:
    """Build the priced copy ``lay`` (updated in place: built, id, seconds, and the copies dropped
    under ``budget_bytes``), timed and logged so the next pricing uses the measurement."""
    t, attr = lay["table"], lay["attr"]
    t0 = time.perf_counter()
    built = build_layout(cat, t, attr, version, columns=lay.get("columns"))
    secs = time.perf_counter() - t0
    log_build(cat.store, built, cat.version(t, version).rows, secs, lay.get("byte_share"))
    lay.update(built=True, id=built["id"], seconds=round(secs, 3))
    if budget_bytes is not None:
        dropped = enforce(cat, budget_bytes, keep=built["id"])
        if dropped:
            lay["dropped"] = dropped
    return lay


def layout_check(cat: Catalog, table: str, keys: list, versions: dict, max_sel: float,
                  reads: dict) -> tuple[dict, dict]:
    """Read units per plan key, and the keys no sketch could skip on: even a one-value sketch
    would leave more than ``max_sel`` of the rows to read (e.g. no layout clusters them), so they
    are dropped before sampling."""

    units, bad, stats = {}, {}, {}
    for key in keys:
        t, a = split_key(key, table)
        if t not in stats:
            stats[t] = column_stats(cat, t, versions[t])
        u = units[key] = read_units(cat, t, a, versions[t], columns=reads.get(t))
        lo, hi, _ = stats[t].get(a, (None, None, None))
        ceil = skip_ceiling(u.units, lo, hi)
        if ceil is not None and ceil > max_sel:
            bad[key] = (f"{a}: even a one-value sketch would read ~{ceil:.0%} of {t} ({u.source}; "
                        f"no layout clusters it)")
    return units, bad
