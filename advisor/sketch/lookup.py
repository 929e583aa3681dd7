"""Which stored sketch may serve a query: same template, current data, and identical bindings or a
Z3-proven reuse (seed 001 §5), and a scan that still skips: a sketch that covers more than 90% of the
rows, or whose fragments are spread over layout files / row groups holding more than half of them
(``MAX_USE_READ``), is refused (the filter would cost more than it saves).  A sketch whose data versions differ from those it was
captured at (a maintained one) is re-checked for safety on the current statistics: a batch can
bring NULLs or negative values that the capture-time proof relied on being absent.  Usable ones
come in order of rows read.  Every rejected sketch comes with the reason."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.caches import BoundedMemo
from advisor.errors import BadInput
from advisor.partition.range_partition import load_partition
from advisor.plan import ir
from advisor.plan.parse import parse_sql
from advisor.plan.read_columns import read_columns
from advisor.safety.reuse_check import check_reuse
from advisor.safety.static_check import NOT_NULL, check_safety
from advisor.sketch.sketched_scan import SketchedScan
from advisor.sketch.capture import sketch_attrs
from advisor.warehouse.column_stats import stats_for_query
from advisor.warehouse.sketch_records import Sketch, latest_versions

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog


def sketch_rows(catalog: Catalog, s: Sketch) -> int:
    """Rows the sketch lets a scan read (sum of its fragments' sizes over all sketched tables)."""
    total = 0
    for p in s.parts:
        part = load_partition(catalog.store, p.partition_id)
        total += sum(part.sizes[f] for f in p.fragments if f < len(part.sizes))
    return total


def _still_safe(catalog: Catalog, query: ir.Query, versions: dict[str, int], good: list, bad: list, stats) -> list:
    """The sketches of ``good`` that are safe for ``query`` on the current data; the others go to
    ``bad``.  Only maintained sketches need the check (a capture checked these very statistics);
    verdicts are cached per statistics, so an unchanged domain costs no solver call."""

    out = []
    for s in good:
        if s.how in ("capture", "recapture"):
            out.append(s)
            continue
        stats = stats if stats is not None else stats_for_query(catalog, query, versions)
        v = check_safety(query.root, sketch_attrs(query, {p.table: p.attr for p in s.parts}), stats)
        if v.safe:
            out.append(s)
        else:
            bad.append((s, f"no longer safe on the current data: {v.reason}"))
    return out


MAX_USE_SELECTIVITY = 0.9  # a sketch covering more than this reads nearly everything: run plainly
# A scan through a sketch filter that still reads more than this share of the rows ran slower than a
# plain scan at TPC-H SF1 (big_orders' scattered l_orderkey sketches: 62 % read 1.08x, 73 % 1.56x of
# plain in one replay; 60-65 % read 1.6-2.0x in another; 22-32 % read 0.71-1.0x)
MAX_USE_READ = 0.5
SPREAD = "its fragments are spread over files holding"  # a refusal a clustered layout would lift


# Reuse verdicts by (captured SQL, new SQL, schemas and statistics of the tables): a verdict is a
# function of these alone, and a replay asks the same pairs on every query of a template (a parse
# and a Z3 call per stored sketch otherwise).
_VERDICTS_MAX = 4096
_VERDICTS = BoundedMemo("reuse verdicts", _VERDICTS_MAX)  # first in, first out


def _reuse_context(catalog: Catalog, query: ir.Query, stats: dict) -> tuple:
    """What a reuse verdict depends on besides the two SQL texts: column types and statistics."""
    tables = sorted({sc.table for sc in query.scans()})
    return (tuple((t, tuple(catalog.schema(t))) for t in tables),
            tuple(sorted((k, repr(v)) for k, v in stats.items() if k != NOT_NULL)),
            tuple(sorted(stats.get(NOT_NULL, ()))))


def usable_sketches(catalog: Catalog, query: ir.Query, versions: dict[str, int],
                    allow_stale: bool = False) -> tuple[list[Sketch], list[tuple[Sketch, str]]]:
    """(usable sketches, smallest first; [(rejected sketch, reason)])."""
    good, bad = [], []
    stats, context = None, None
    for s in latest_versions(catalog.store):
        if s.template != query.template:
            continue
        stale = [t for t, v in s.data_versions.items() if versions.get(t) != v]
        if stale and not allow_stale:
            bad.append((s, "stale: " + ", ".join(
                f"{t} captured at version {s.data_versions[t]}, now {versions.get(t)}" for t in stale)))
            continue
        if tuple(s.bindings) == tuple(query.bindings):
            good.append(s)
            continue
        if stats is None:
            stats = stats_for_query(catalog, query, versions)
            context = _reuse_context(catalog, query, stats)
        key = (s.sql, query.sql, context)
        v = _VERDICTS.get(key)
        if v is None:
            try:
                captured = parse_sql(s.sql, lambda t: catalog.schema(t))
            except BadInput as e:
                bad.append((s, f"its query no longer parses: {e}"))
                continue
            v = check_reuse(captured.root, query.root, stats)
            _VERDICTS.put(key, v)
        if v.safe:
            good.append(s)
        else:
            bad.append((s, f"reuse not proven: {v.reason}"))
    good = _still_safe(catalog, query, versions, good, bad, stats)
    reads = read_columns(query)
    kept = []
    for s in good:
        total = sum(catalog.version(p.table, versions.get(p.table)).rows for p in s.parts)
        sel = sketch_rows(catalog, s) / max(1, total)
        read = read_fraction(catalog, s, versions, reads)
        if sel > MAX_USE_SELECTIVITY:
            bad.append((s, f"covers {sel:.1%} of the rows (> {MAX_USE_SELECTIVITY:.0%}): a plain scan is cheaper"))
        elif read > MAX_USE_READ and not _has_companion(s, good, query):
            bad.append((s, f"covers {sel:.1%} of the rows, but {SPREAD} "
                           f"{read:.1%} of them (> {MAX_USE_READ:.0%}): a plain scan is cheaper"))
        else:
            kept.append((read, sketch_rows(catalog, s), s.id, s))
    kept.sort(key=lambda k: k[:3])
    return [k[3] for k in kept], bad


def _has_companion(s: Sketch, good: list, query: ir.Query) -> bool:
    """Whether another usable sketch may join ``s`` as a pair (``advisor.selection.attribute_pairs.combine``): the
    conjunction of two sketches each reading half the rows can read a quarter, so ``MAX_USE_READ``
    does not refuse such a sketch on its own read share."""

    return bool(companions(s, [o for o in good if o is not s], query.bindings))


def read_fraction(catalog: Catalog, s: Sketch, versions: dict[str, int], reads: dict | None = None) -> float:
    """Share of the sketched tables' rows a scan with the sketch still reads: rows of the layout
    files (a narrow copy's when it holds the columns in ``reads``), or of the stored files' pages
    or row groups when the scan reads those (``SketchedScan.plan``), whose min/max overlap the
    sketch's fragments (``advisor.layout.skip_prediction``)."""

    read = total = 0.0
    for p in s.parts:
        part = load_partition(catalog.store, p.partition_id)
        v = versions.get(p.table) or catalog.current_version(p.table)
        units, frac, _ = SketchedScan(catalog, p.table, p.attr, v, part, p.fragments, (reads or {}).get(p.table)).plan
        rows = units.rows
        read += rows * frac
        total += rows
    return read / total if total else 0.0


def companions(best, others: list, bindings: tuple) -> list:
    """Sketches of ``others`` that may join ``best``: one part, its table, another attribute, same bindings."""
    if len(best.parts) != 1 or tuple(best.bindings) != tuple(bindings):
        return []
    p = best.parts[0]
    return [o for o in others if len(o.parts) == 1 and o.parts[0].table == p.table
            and o.parts[0].attr != p.attr and tuple(o.bindings) == tuple(bindings)]
