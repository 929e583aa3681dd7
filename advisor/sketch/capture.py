"""Capture: run the instrumented query once and record, per sketched table, its fragment set.

Fragment ids come from a binary search (partitions.assign_column) added to the sketched scans'
source; to_sql.capture_sql propagates them through joins, aggregation, HAVING, DISTINCT, top-k
and UNION as arrays of fragment ids, and the single result row is decoded on the driver. All
accesses of one table share the table's sketch (their fragment sets are ORed), so `use` filters
every access.

When every aggregation above a sketched scan groups by the sketched attribute (``value_lineage``),
a group's provenance rows all share that attribute's value, so the sketch is the fragments of the
result groups' values: the capture carries values instead of per-row fragment ids
(``to_sql`` kind VAL) and costs about one plain run of the query.  Past an aggregation that does
not keep the attribute, values grouped below travel on as value sets (kind SET).  The choice is
made per sketched table (``carried_tables``), so one capture can carry one table by value and
another as fragment ids: TPC-H Q18 groups lineitem by l_orderkey (by value) and joins orders
without an aggregation above it (fragment ids), so lineitem's 6M rows need no fragment id and its
1.5M groups no array of ids.  A capture can also answer its query in the same job
(``answering_capture``): the result rows carry their provenance, and the sketch is read off them
on the driver, so the first use of a sketch costs one job, not two.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd
from advisor.engine.execute import RunResult, table_view, versions_now
from advisor.engine.scan_metrics import collect_scan_metrics
from advisor.errors import BadInput, Unsupported
from advisor.partition.assign_pandas import assign
from advisor.partition.range_partition import RangePartition, assign_column, build_partition, find_partition
from advisor.plan import ir
from advisor.plan.to_sql import IDS, INT, VAL, Source, answer_sql, capture_sql, lam_name, null_flag
from advisor.plan.value_lineage import SET, carried_kinds, groups_by_value
from advisor.safety.static_check import check_safety
from advisor.warehouse.column_stats import stats_for_query
from advisor.warehouse.sketch_records import Sketch, SketchPart, save_sketch
from advisor.warehouse.value_kinds import kind_of

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog

FRAG = "__frag"


@dataclass
class CaptureResult:
    sketch: Sketch
    seconds: float
    verdicts: dict
    answer: object = None  # execute.RunResult when the capture job also answered the query


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


def check_safe(catalog: Catalog, query: ir.Query, on: dict[str, str], versions: dict[str, int]):
    """Z3 safety verdict for sketching `on` (table -> attribute) in query."""
    X = sketch_attrs(query, on)
    return check_safety(query.root, X, stats_for_query(catalog, query, versions))


def ensure_partition(catalog: Catalog, table: str, attr: str, fragments: int, version: int) -> RangePartition:
    part = find_partition(catalog.store, table, attr, fragments)
    if part is None:
        part = build_partition(catalog, table, attr, fragments, version)
    return part


def value_lineage(query: ir.Query, on: dict[str, str]) -> bool:
    """True when the value of each sketched attribute is constant over the provenance of every
    result row (``advisor.plan.value_lineage``)."""

    names = {}
    for s in query.scans():
        if s.table in on:
            hit = [c.name for c in s.cols if c.source == on[s.table]]
            if not hit:
                return False
            names[s.scan_id] = hit[0]

    return groups_by_value(query.root, names)


def by_value_ok(query: ir.Query, on: dict[str, str], parts: dict[str, RangePartition]) -> bool:
    """``by_value_types_ok`` for the partitions' column types."""
    return by_value_types_ok(query, on, {t: parts[t].dtype for t in on})


def carried_tables(query: ir.Query, on: dict[str, str],
                   parts: dict[str, RangePartition]) -> tuple[dict[str, str], dict]:
    """The sketched tables a capture carries without fragment ids, each with its kind (VAL: its
    value lineage holds, ``by_value_ok``; SET: as value sets past aggregations that do not keep
    the attribute, ``value_lineage.carried_kinds``), and
    {id(aggregation): Λ columns turned into sets there} for ``to_sql.capture_sql``.  TPC-H's
    "count the orders with sum(l_quantity) > 300" on l_orderkey carries the passing orders' keys
    instead of a fragment id per lineitem row."""
    kinds, to_set = {}, {}
    for t, a in on.items():
        if kind_of(parts[t].dtype) == "ts":
            continue
        names = {s.scan_id: c.name for s in query.scans() if s.table == t for c in s.cols if c.source == a}
        if len(names) != sum(s.table == t for s in query.scans()):
            continue
        got, points = carried_kinds(query.root, names)
        if set(got) != set(names):
            continue
        kinds[t] = SET if SET in got.values() else VAL
        for nid, sids in points.items():
            to_set[nid] = to_set.get(nid, frozenset()) | {lam_name(sid) for sid in sids}
    return kinds, to_set


def by_value_types_ok(query: ir.Query, on: dict[str, str], dtypes: dict[str, str]) -> bool:
    """``value_lineage`` holds and no sketched attribute (Spark type per table in ``dtypes``) is a
    timestamp: collected timestamps come back in the session's time zone, fragment ids are
    computed on the stored instants."""

    return value_lineage(query, on) and all(kind_of(dtypes[t]) != "ts" for t in on)


def _capture_views(catalog: Catalog, on: dict[str, str], parts: dict[str, RangePartition], versions: dict[str, int],
                   by_value: bool | frozenset = False):
    """Source function for an instrumented query: sketched tables get a fragment-id column, or those
    carried by value (``by_value``: True for all, or a set of tables; see ``value_lineage``) the plain
    table whose sketched attribute is carried as is."""
    valued = _valued(on, by_value)
    views: dict[str, str] = {}
    for t, a in on.items():
        if t in valued:
            continue
        name = catalog.view_name(t, versions[t], f"_cap{parts[t].id}")
        if not catalog.spark.catalog.tableExists(name):
            df = catalog.read(t, versions[t])
            assign_column(df, a, parts[t], FRAG).createOrReplaceTempView(name)
        views[t] = name

    def source(scan: ir.Scan) -> Source:
        if scan.table in valued:
            return Source(table_view(catalog, scan.table, versions.get(scan.table)), on[scan.table], VAL)
        if scan.table in views:
            return Source(views[scan.table], FRAG)
        return Source(table_view(catalog, scan.table, versions.get(scan.table)))

    return source


def _valued(on: dict[str, str], by_value: bool | frozenset) -> frozenset:
    """The tables carried by value: all of ``on`` for True, none for False, else the set given."""
    if by_value is True:
        return frozenset(on)
    return frozenset(by_value or ())


def _all_versions(query: ir.Query, versions: dict[str, int]) -> dict[str, int]:
    """Versions of every table the query reads: a change to any of them can change the sketch."""
    return {t: versions[t] for t in sorted({s.table for s in query.scans()})}


def _decode(query: ir.Query, on: dict[str, str], row, lam_scans: dict[str, int], prefix: str = "",
            parts: dict[str, RangePartition] | None = None, by_value: bool | frozenset = False) -> dict:
    """Fragments per sketched table from a capture row: values mapped to their fragments for the
    tables carried by value (``_valued``), arrays of fragment ids (``to_sql`` kind IDS) for the others."""
    valued = _valued(on, by_value)
    scan_table = {s.scan_id: s.table for s in query.scans()}
    frags: dict[str, set] = {t: set() for t in on}
    for lam, sid in lam_scans.items():
        t = scan_table[sid]
        if t in valued:
            part = parts[t]
            frags[t] |= {int(f) for f in assign(pd.Series(list(row[prefix + lam] or [])), part)}
            if row[prefix + null_flag(lam)]:
                frags[t].add(part.null_id)
        else:
            frags[t] |= {int(f) for f in row[prefix + lam] or ()}
    return frags


def _lam_columns(query: ir.Query, on: dict[str, str], lam_scans: dict[str, int],
                 by_value: bool | frozenset) -> list[str]:
    """The capture row's columns: per Λ its value set and NULL flag (by value) or its fragment ids."""
    valued = _valued(on, by_value)
    scan_table = {s.scan_id: s.table for s in query.scans()}
    return [c for lam, sid in lam_scans.items()
            for c in ((lam, null_flag(lam)) if scan_table[sid] in valued else (lam,))]


def capture_batch(catalog: Catalog, items: list[tuple[ir.Query, dict[str, str], dict[str, RangePartition]]],
                  versions: dict[str, int], save: bool = False, by_value: bool = True) -> tuple[list[Sketch], float]:
    """Capture many (query, table->attr, partitions) at once in ONE Spark job (a cross join of the
    one-row capture queries). No safety check: callers (the OPT oracle, harnesses) check first.
    ``by_value=False`` forces the fragment-id path everywhere (tests compare the two).
    Returns the sketches in item order and the job's seconds."""
    selects, metas = [], []
    for i, (q, on, parts) in enumerate(items):
        kinds, to_set = carried_tables(q, on, parts) \
            if by_value else ({}, {})
        bv = frozenset(kinds)
        sql, lam_scans = capture_sql(q, _capture_views(catalog, on, parts, versions, bv), to_set)
        cols = ", ".join(f"`{c}` AS `c{i}_{c}`" for c in _lam_columns(q, on, lam_scans, bv))
        selects.append(f"(SELECT {cols} FROM ({sql}) s{i}) j{i}")
        metas.append((q, on, parts, lam_scans, bv))
    t0 = time.perf_counter()
    row = catalog.spark.sql("SELECT * FROM " + " CROSS JOIN ".join(selects)).first()
    secs = time.perf_counter() - t0
    out = []
    for i, (q, on, parts, lam_scans, bv) in enumerate(metas):
        frags = _decode(q, on, row, lam_scans, f"c{i}_", parts, bv)
        sk = Sketch(0, q.template, q.bindings, q.sql,
                    [SketchPart(t, on[t], parts[t].id, frozenset(frags[t])) for t in on],
                    _all_versions(q, versions))
        out.append(save_sketch(catalog.store, sk) if save else sk)
    return out, secs


def _one_row_capture(catalog: Catalog, query: ir.Query, source,
                     to_set: dict | None = None) -> tuple[object, dict[str, int], float]:
    """Run the one-row capture query (``to_sql.capture_sql``): (its row, {Λ: scan_id}, seconds)."""
    sql, lam_scans = capture_sql(query, source, to_set)
    t0 = time.perf_counter()
    row = catalog.spark.sql(sql).first()
    return row, lam_scans, time.perf_counter() - t0


def answering_capture(catalog: Catalog, query: ir.Query, source,
                      to_set: dict | None = None) -> tuple[object, dict, dict[str, int], float]:
    """Run the query once, instrumented (``to_sql.answer_sql``): its answer as an
    ``execute.RunResult`` (rows, scan metrics, seconds) and, per Λ column, the union over the
    result rows of what each carries -- distinct non-NULL values and whether a NULL was among
    them (VAL, SET), or fragment ids (INT, IDS): what the one-row capture gives, read off the
    answer instead of a second job.  Returns (run, a capture row {Λ: values or ids,
    null_flag(Λ): bool} for ``_decode``, {Λ: scan_id}, seconds)."""

    sql, lam_scans, kinds = answer_sql(query, source, to_set)
    n = len(query.output_names)
    t0 = time.perf_counter()
    df = catalog.spark.sql(sql)
    got = df.collect()
    secs = time.perf_counter() - t0
    row: dict = {}
    for j, lam in enumerate(lam_scans):
        col = [r[n + j] for r in got]
        kind = kinds[lam]
        if kind == SET:  # per row an array of one-field structs
            col = [s[0] for cell in col for s in cell or ()]
        elif kind == IDS:
            col = [f for cell in col for f in cell or ()]
        elif kind not in (VAL, INT):
            raise ValueError(f"an answering capture cannot read a Λ column of kind {kind}")
        row[lam] = list({v for v in col if v is not None})
        row[null_flag(lam)] = any(v is None for v in col)
    rows = [tuple(r[:n]) for r in got]
    run = RunResult(list(query.output_names), rows, collect_scan_metrics(df), secs, None,
                    "answered by the capture job")
    return run, row, lam_scans, secs


def capture_values(catalog: Catalog, query: ir.Query, table: str, attrs: list[str],
                   versions: dict[str, int], answer: list | None = None) -> tuple[dict[str, tuple[list, bool]], float]:
    """The distinct values (and whether NULL is among them) that each of ``attrs`` takes over the
    provenance of the query's result, for several attributes of one table in ONE Spark job: each
    attribute is carried by value (``to_sql`` kind VAL, extra columns ``Source.more_vals``).  A
    sketch on any partition of an attribute is then its values' fragments (``value_sketch``), so
    every candidate at every granularity is sized exactly for about one plain run of the query.
    Every attribute must pass ``by_value_ok`` on its own.  Returns ({attr: (values, has_null)}, seconds).
    With an ``answer`` list the job also answers the query (``answering_capture``): its
    ``RunResult`` is appended to the list."""
    attrs = list(attrs)
    if not attrs:
        raise ValueError("no attribute to capture")

    def source(scan: ir.Scan) -> Source:
        view = table_view(catalog, scan.table, versions.get(scan.table))
        return Source(view, attrs[0], VAL, tuple(attrs[1:])) if scan.table == table else Source(view)

    if answer is not None:
        run, row, lam_scans, secs = answering_capture(catalog, query, source)
        answer.append(run)
    else:
        row, lam_scans, secs = _one_row_capture(catalog, query, source)
    out: dict[str, tuple[list, bool]] = {a: ([], False) for a in attrs}
    for sid in sorted(set(lam_scans.values())):
        for j, a in enumerate(attrs):
            lam = lam_name(sid, j)
            vals, has_null = out[a]
            out[a] = (vals + list(row[lam] or []), has_null or bool(row[null_flag(lam)]))
    return out, secs


def value_sketch(query: ir.Query, table: str, part: RangePartition, values: list, has_null: bool,
                 versions: dict[str, int]) -> Sketch:
    """The (unsaved) sketch of ``query`` on ``part`` from its attribute's provenance values."""


    frags = {int(f) for f in assign(pd.Series(values), part)} if values else set()
    if has_null:
        frags.add(part.null_id)
    return Sketch(0, query.template, query.bindings, query.sql,
                  [SketchPart(table, part.attr, part.id, frozenset(frags))], _all_versions(query, versions))


def capture(catalog: Catalog, query: ir.Query, on: dict[str, str], fragments: int = 1000,
            versions: dict[str, int] | None = None, check: bool = True,
            partitions: dict[str, RangePartition] | None = None, by_value: bool = True,
            answer: bool = False) -> CaptureResult:
    """Capture and store the sketch of `query` on the given table.attr pairs (each table by value
    or by value sets where ``carried_tables`` allows and ``by_value`` is left on, by fragment ids
    otherwise).  With ``answer``, the capture also answers the query in the same job
    (``CaptureResult.answer``): its result rows carry their provenance (``answering_capture``)."""
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
    kinds, to_set = carried_tables(query, on, parts) \
        if by_value else ({}, {})
    bv = frozenset(kinds)
    source = _capture_views(catalog, on, parts, versions, bv)
    run = None
    if answer:
        run, row, lam_scans, secs = answering_capture(catalog, query, source, to_set)
    else:
        row, lam_scans, secs = _one_row_capture(catalog, query, source, to_set)
    frags = _decode(query, on, row, lam_scans, "", parts, bv)
    sk = Sketch(0, query.template, query.bindings, query.sql,
                [SketchPart(t, on[t], parts[t].id, frozenset(frags[t])) for t in on],
                _all_versions(query, versions))
    save_sketch(catalog.store, sk)
    return CaptureResult(sk, secs, verdicts, run)
