"""Capture: run the instrumented query once and record, per sketched table, its fragment set.

Fragment ids come from a binary search (partitions.assign_column) added to the sketched scans'
source; to_sql.capture_sql propagates them through joins, aggregation, HAVING, DISTINCT, top-k
and UNION as Spark bitmaps, and the single result row is decoded on the driver. All accesses of
one table share the table's sketch (their fragment sets are ORed), so `use` filters every access.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from advisor.errors import BadInput, Unsupported
from advisor.execute import table_view, versions_now
from advisor.partitions import RangePartition, assign_column, build_partition, find_partition
from advisor.plan import ir
from advisor.plan.to_sql import Source, capture_sql
from advisor.sketches import Sketch, SketchPart, decode_bitmap, save_sketch

FRAG = "__frag"


@dataclass
class CaptureResult:
    sketch: Sketch
    seconds: float
    verdicts: dict


def sketch_attrs(query: ir.Query, on: dict[str, str]) -> set[str]:
    """Internal attribute names (one per scan of each sketched table) for the safety check."""
    X = set()
    tables = {s.table for s in query.scans()}
    for t, a in on.items():
        if t not in tables:
            raise BadInput(f"the query does not read table {t!r} (it reads {', '.join(sorted(tables))})")
        for s in query.scans():
            if s.table == t:
                hit = [c.name for c in s.cols if c.source == a]
                if not hit:
                    raise BadInput(f"unknown column {a!r} in table {t!r}")
                X.add(hit[0])
    return X


def check_safe(catalog, query: ir.Query, on: dict[str, str], versions: dict[str, int]):
    """Z3 safety verdict for sketching `on` (table -> attribute) in query."""
    from advisor.safety import check_safety
    from advisor.stats import stats_for_query

    X = sketch_attrs(query, on)
    return check_safety(query.root, X, stats_for_query(catalog, query, versions))


def ensure_partition(catalog, table: str, attr: str, fragments: int, version: int) -> RangePartition:
    part = find_partition(catalog.store, table, attr, fragments)
    if part is None:
        part = build_partition(catalog, table, attr, fragments, version)
    return part


def _capture_views(catalog, on: dict[str, str], parts: dict[str, RangePartition], versions: dict[str, int]):
    """Source function for an instrumented query: sketched tables get a fragment-id column."""
    views: dict[str, str] = {}
    for t, a in on.items():
        name = catalog.view_name(t, versions[t], f"_cap{parts[t].id}")
        if not catalog.spark.catalog.tableExists(name):
            df = catalog.read(t, versions[t])
            assign_column(df, a, parts[t], FRAG).createOrReplaceTempView(name)
        views[t] = name

    def source(scan: ir.Scan) -> Source:
        if scan.table in views:
            return Source(views[scan.table], FRAG)
        return Source(table_view(catalog, scan.table, versions.get(scan.table)))

    return source


def _all_versions(query: ir.Query, versions: dict[str, int]) -> dict[str, int]:
    """Versions of every table the query reads: a change to any of them can change the sketch."""
    return {t: versions[t] for t in sorted({s.table for s in query.scans()})}


def _decode(query: ir.Query, on: dict[str, str], row, lam_scans: dict[str, int], prefix: str = "") -> dict:
    scan_table = {s.scan_id: s.table for s in query.scans()}
    frags: dict[str, set] = {t: set() for t in on}
    for lam, sid in lam_scans.items():
        frags[scan_table[sid]] |= decode_bitmap(row[prefix + lam])
    return frags


def capture_batch(catalog, items: list[tuple[ir.Query, dict[str, str], dict[str, RangePartition]]],
                  versions: dict[str, int], save: bool = False) -> tuple[list[Sketch], float]:
    """Capture many (query, table->attr, partitions) at once in ONE Spark job (a cross join of the
    one-row capture queries). No safety check: callers (the OPT oracle, harnesses) check first.
    Returns the sketches in item order and the job's seconds."""
    selects, metas = [], []
    for i, (q, on, parts) in enumerate(items):
        sql, lam_scans = capture_sql(q, _capture_views(catalog, on, parts, versions))
        cols = ", ".join(f"`{lam}` AS `c{i}_{lam}`" for lam in lam_scans)
        selects.append(f"(SELECT {cols} FROM ({sql}) s{i}) j{i}")
        metas.append((q, on, parts, lam_scans))
    t0 = time.perf_counter()
    row = catalog.spark.sql("SELECT * FROM " + " CROSS JOIN ".join(selects)).first()
    secs = time.perf_counter() - t0
    out = []
    for i, (q, on, parts, lam_scans) in enumerate(metas):
        frags = _decode(q, on, row, lam_scans, f"c{i}_")
        sk = Sketch(0, q.template, q.bindings, q.sql,
                    [SketchPart(t, on[t], parts[t].id, frozenset(frags[t])) for t in on],
                    _all_versions(q, versions))
        out.append(save_sketch(catalog.store, sk) if save else sk)
    return out, secs


def capture(catalog, query: ir.Query, on: dict[str, str], fragments: int = 1000,
            versions: dict[str, int] | None = None, check: bool = True,
            partitions: dict[str, RangePartition] | None = None) -> CaptureResult:
    """Capture and store the sketch of `query` on the given table.attr pairs."""
    if query.unsupported:
        raise Unsupported(query.unsupported)
    versions = versions or versions_now(catalog, query)
    verdicts = {}
    if check:
        v = check_safe(catalog, query, on, versions)
        verdicts = {f"{t}.{a}": v.reason for t, a in on.items()}
        if not v.safe:
            raise BadInput(f"cannot sketch {', '.join(f'{t}.{a}' for t, a in on.items())}: {v.reason}")
    parts = dict(partitions or {})
    for t, a in on.items():
        if t not in parts:
            parts[t] = ensure_partition(catalog, t, a, fragments, versions[t])
    sql, lam_scans = capture_sql(query, _capture_views(catalog, on, parts, versions))
    t0 = time.perf_counter()
    row = catalog.spark.sql(sql).first()
    secs = time.perf_counter() - t0
    frags = _decode(query, on, row, lam_scans)
    sk = Sketch(0, query.template, query.bindings, query.sql,
                [SketchPart(t, on[t], parts[t].id, frozenset(frags[t])) for t in on],
                _all_versions(query, versions))
    save_sketch(catalog.store, sk)
    return CaptureResult(sk, secs, verdicts)
