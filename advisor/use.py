"""Using a sketch: merged range conditions on the sketched attribute, pushed into every scan.

Adjacent fragments are merged into one `a >= lo AND a < hi` run (an infinite end drops its bound);
the NULL fragment adds `a IS NULL` (and NaN for floating columns). An empty sketch becomes `false`.
When a clustered layout exists, only the files whose min/max overlap a run are read at all.
"""

from __future__ import annotations

from advisor.partitions import RangePartition, kind_of, sql_literal
from advisor.plan.to_sql import q


def runs(fragments: frozenset, part: RangePartition) -> list[tuple[int, int]]:
    """Maximal runs [i, j] of consecutive range fragment ids (NULL fragment excluded)."""
    ids = sorted(f for f in fragments if f != part.null_id)
    out: list[tuple[int, int]] = []
    for f in ids:
        if out and out[-1][1] == f - 1:
            out[-1] = (out[-1][0], f)
        else:
            out.append((f, f))
    return out


# Bridging above this many OR'd ranges. With HotSpot's huge-method JIT on (advisor.session) 128-210
# ranges cost 0.3-0.4x of a plain scan at SF1 (without it 128 ranges were 4-19x slower). A cap of
# 512 was tried in a replay and some sketched big_orders queries took 4.5-27.9 s against 1.4 s
# plain (BENCHMARKS.md, session 10): not understood, so the measured-safe 128 stays.
MAX_RUNS = 128


def capped_runs(fragments: frozenset, part: RangePartition, max_runs: int = MAX_RUNS) -> list[tuple[int, int]]:
    """Runs of the sketch, with the cheapest gaps bridged until at most `max_runs` remain.

    Bridging adds fragments, and a superset of a safe sketch is safe (seed 001, Lemma 5), so the
    answer cannot change; we pick the gaps holding the fewest rows (fragment sizes) to lose little."""
    rs = runs(fragments, part)
    if len(rs) <= max_runs:
        return rs
    sizes = part.sizes

    def gap_rows(a, b):
        return sum(sizes[f] for f in range(a[1] + 1, b[0]) if f < len(sizes)) if sizes else b[0] - a[1]

    import heapq

    rs = list(rs)
    while len(rs) > max_runs:
        gaps = [(gap_rows(rs[k], rs[k + 1]), k) for k in range(len(rs) - 1)]
        # bridge the cheapest gaps in one sweep (non-overlapping), then re-evaluate
        need = len(rs) - max_runs
        chosen = sorted(k for _, k in heapq.nsmallest(need, gaps))
        merged, skip = [], set(chosen)
        k = 0
        while k < len(rs):
            lo, hi = rs[k]
            while k in skip:
                k += 1
                hi = rs[k][1]
            merged.append((lo, hi))
            k += 1
        rs = merged
    return rs


def range_condition(part: RangePartition, fragments: frozenset, column: str, max_runs: int = MAX_RUNS) -> str:
    """SQL condition selecting the rows in the given fragments of `part` (exactly, unless more than
    `max_runs` runs forced bridging of small gaps, which only adds rows)."""
    col = q(column)
    terms = []
    nb = len(part.boundaries)
    for i, j in capped_runs(fragments, part, max_runs):
        conds = []
        if i > 0:
            conds.append(f"{col} >= {sql_literal(part.boundaries[i - 1], part.dtype)}")
        if j < nb:
            conds.append(f"{col} < {sql_literal(part.boundaries[j], part.dtype)}")
        if not conds:
            conds.append(f"{col} IS NOT NULL")
        terms.append("(" + " AND ".join(conds) + ")")
    if part.null_id in fragments:
        nulls = f"{col} IS NULL"
        if kind_of(part.dtype) == "float":
            nulls = f"({nulls} OR isnan({col}))"
        terms.append(nulls)
    return " OR ".join(terms) if terms else "false"


def overlapping_files(manifest: list[dict], part: RangePartition, fragments: frozenset) -> list[str]:
    """Files of a clustered layout whose [min, max] of the attribute overlaps any run of the sketch."""
    from advisor.partitions import decode_value

    keep = []
    rs = capped_runs(fragments, part)
    has_null = part.null_id in fragments
    for f in manifest:
        if has_null and f.get("nulls", 0) > 0:
            keep.append(f["path"])
            continue
        if f["min"] is None:
            continue
        mn, mx = decode_value(f["min"], part.dtype), decode_value(f["max"], part.dtype)
        for i, j in rs:
            lo, _ = part.range_of(i)
            _, hi = part.range_of(j)
            if (hi is None or mn < hi) and (lo is None or mx >= lo):
                keep.append(f["path"])
                break
    return keep


LAYOUT_GAIN = 0.8


def scan_units(catalog, table: str, attr: str, version: int, part: RangePartition, fragments):
    """(units, read fraction, layout?) of the files a sketched scan opens: the clustered layout only
    when it skips clearly more than the base files do (reads at most ``LAYOUT_GAIN`` of their
    rows), since opening many small files costs more per row than skipping row groups and pages
    inside a few large ones.  At SF1, big_orders on an already l_orderkey-ordered lineitem took
    0.27x of plain from the base files and 0.85x from the layout."""
    from advisor.skipping import boundary_values, read_fraction_of, read_units

    b = boundary_values(part)
    units = read_units(catalog, table, attr, version)
    frac = read_fraction_of(units.units, b, fragments, part.null_id)
    if not units.source.startswith("layout"):
        return units, frac, False
    base = read_units(catalog, table, attr, version, layout=False)
    base_frac = read_fraction_of(base.units, b, fragments, part.null_id)
    return (units, frac, True) if frac <= LAYOUT_GAIN * base_frac else (base, base_frac, False)


def layout_pays(catalog, table: str, attr: str, version: int, part: RangePartition, fragments) -> bool:
    """Whether a sketched scan reads the clustered layout (``scan_units``)."""
    return scan_units(catalog, table, attr, version, part, fragments)[2]


def sketch_source(catalog, sketch, versions: dict[str, int], use_layout: bool = True):
    """Scan source function applying `sketch` to every access of each sketched table."""
    from advisor.execute import table_view
    from advisor.layout import find_layout
    from advisor.partitions import load_partition
    from advisor.plan.to_sql import Source

    conds: dict[str, str] = {}
    views: dict[str, str] = {}
    for p in sketch.parts:
        part = load_partition(catalog.store, p.partition_id)
        conds[p.table] = range_condition(part, p.fragments, p.attr)
        v = versions[p.table]
        lay = find_layout(catalog.store, p.table, p.attr, v) if use_layout else None
        if lay is not None and not layout_pays(catalog, p.table, p.attr, v, part, p.fragments):
            lay = None
        if lay is None:
            views[p.table] = table_view(catalog, p.table, v)
            continue
        files = overlapping_files(lay["manifest"], part, p.fragments)
        name = catalog.view_name(p.table, v, f"_use{sketch.id}_l{lay['id']}")
        base = catalog.spark.read.parquet(lay["path"]).limit(0) if not files else None
        if base is None:
            schema = catalog.spark.read.parquet(lay["path"]).schema
            base = catalog.spark.read.schema(schema).parquet(*files)
        catalog.read_on_top(base, p.table, lay["table_version"], v).createOrReplaceTempView(name)
        views[p.table] = name

    def source(scan):
        if scan.table in conds:
            return Source(f"{views[scan.table]} WHERE {conds[scan.table]}")
        return Source(table_view(catalog, scan.table, versions.get(scan.table)))

    return source
