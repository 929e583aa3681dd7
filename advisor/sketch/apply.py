"""Using a sketch: merged range conditions on the sketched attribute, pushed into every scan.

Adjacent fragments are merged into one `a >= lo AND a < hi` run (an infinite end drops its bound),
and runs of a few integer or date values are listed in one `a IN (...)` instead; the NULL fragment
adds `a IS NULL` (and NaN for floating columns). An empty sketch becomes `false`.
When a clustered layout pays (``layout_pays``) the scan reads those of its files the sketch can
touch instead of the base files; Spark skips their row groups by their min/max.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import TYPE_CHECKING

from advisor.engine.execute import registered, table_view
from advisor.layout import blocks
from advisor.layout.file_selection import touched_files
from advisor.layout.registry import find_layout
from advisor.layout.skip_prediction import boundary_values, read_fraction_of, read_units
from advisor.partition.fragment_runs import MAX_RUNS, capped_runs, read_set
from advisor.partition.range_partition import RangePartition, load_partition
from advisor.plan.to_sql import Source, in_lists, q
from advisor.warehouse.value_kinds import decode_value, encode_value, kind_of, sql_literal

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog

# Runs OR'd flat at the leaves of ``range_condition``'s search tree.
TREE_LEAF = 4
# A bounded run over an integer or date column holding at most POINT_WIDTH values is written as those
# values, all such runs in one IN list (at most MAX_POINTS values; the rest stay ranges).  Spark
# tests an IN list per row in a hash set, and pushes it to Parquet as a value set when it holds at
# most ``spark.sql.parquet.pushdown.inFilterThreshold`` values; longer lists are cut into such
# lists (``in_lists``).  A sketch on l_suppkey at 10,002 fragments is mostly one-value runs: at SF1, 216 of
# them as a search tree took 0.73-1.5 s per sketched run, as one IN list 0.64-0.75 s, and counting
# the layout's rows 0.34-0.50 s against 0.17-0.22 s (BENCHMARKS.md).
POINT_WIDTH = 4
MAX_POINTS = 1024


def _points(part: RangePartition, i: int, j: int) -> list | None:
    """The values of run [i, j] if it is a bounded run of at most ``POINT_WIDTH`` integer or date values."""


    kind = kind_of(part.dtype)
    if kind not in ("int", "date") or i == 0 or j >= len(part.boundaries):
        return None
    lo, hi = (decode_value(part.boundaries[k], part.dtype) for k in (i - 1, j))
    width = (hi - lo).days if kind == "date" else int(hi) - int(lo)
    if width > POINT_WIDTH:
        return None
    if kind == "date":  # encoded like the boundaries, for ``sql_literal``
        return [encode_value(lo + dt.timedelta(days=d)) for d in range(width)]
    return list(range(int(lo), int(hi)))


def range_condition(part: RangePartition, fragments: frozenset, column: str, max_runs: int = MAX_RUNS) -> str:
    """SQL condition selecting the rows in the given fragments of `part` (exactly, unless more than
    `max_runs` runs forced bridging of small gaps, which only adds rows)."""
    col = q(column)
    nb = len(part.boundaries)
    lit = lambda i: sql_literal(part.boundaries[i], part.dtype)  # noqa: E731

    def leaf(i: int, j: int) -> str:
        conds = ([f"{col} >= {lit(i - 1)}"] if i > 0 else []) + ([f"{col} < {lit(j)}"] if j < nb else [])
        return "(" + " AND ".join(conds or [f"{col} IS NOT NULL"]) + ")"

    def tree(rs: list[tuple[int, int]]) -> str:
        # runs are sorted and disjoint: a value below run m's lower bound can only be in runs < m,
        # one at or above it only in runs >= m, so each row tests O(log runs) bounds, not all of them
        m = len(rs) // 2
        cut = lit(rs[m][0] - 1)
        return f"(({col} < {cut} AND {branch(rs[:m])}) OR ({col} >= {cut} AND {branch(rs[m:])}))"

    def branch(rs: list[tuple[int, int]]) -> str:
        return " OR ".join(leaf(i, j) for i, j in rs) if len(rs) <= TREE_LEAF else tree(rs)

    points, ranged = [], []
    for i, j in capped_runs(fragments, part, max_runs):
        vals = _points(part, i, j)
        if vals is not None and len(points) + len(vals) <= MAX_POINTS:
            points += vals
        else:
            ranged.append((i, j))
    terms = [in_lists(col, [sql_literal(v, part.dtype) for v in points])] if points else []
    terms += [branch(ranged)] if ranged else []
    if part.null_id in fragments:
        nulls = f"{col} IS NULL"
        if kind_of(part.dtype) == "float":
            nulls = f"({nulls} OR isnan({col}))"
        terms.append(nulls)
    return " OR ".join(terms) if terms else "false"


LAYOUT_GAIN = 0.8
# A sketch finer than the layout's blocks reads every page its blocks touch: TPC-H Q18 at SF1 with
# 10,000 fragments (57 orders, ~600-row fragments, 1,000-row blocks) read 2.5 % of lineitem per
# access through its block list, where the pages its ranges overlap are 1.5 %.  ANDing the ranges
# to the block list (``layout_condition``) makes Parquet intersect the two columns' page ranges, so
# the scan reads the ranges' pages -- but the ranges are new code for Spark at every capture and
# maintained version, and tested per row.  Measured at SF1 over the l_orderkey layout (random
# fragments of 10,000; first run of a fresh filter, then the same text again): 30 runs cost +0.04 s
# over the block list alone, 60 runs +0.22 s, 120 runs +0.56 s, 250 runs +1.06 s (+0.33 s repeated),
# about 4 ms a run, the time a plain scan takes for ~16,000 rows of lineitem.  In the selective SF1
# replay, ANDing them whenever their pages were fewer than 0.8 of the blocks' ran big_orders' reuses
# 2.0-3.5 s on each new sketch version's first run, above the plain run; with the rule below they
# take 0.88 s each.  So the ranges are ANDed only when the rows they spare pay for their runs
# (``FINER`` and ``RUN_ROWS``).
FINER = 0.8
RUN_ROWS = 16_000


def ands_ranges(frac: float, bfrac: float | None, rows: float, runs: int) -> bool:
    """Whether a layout scan ANDs the sketch's ranges (read fraction ``frac`` of ``rows``) to its
    block list (``bfrac``): when their pages are clearly fewer and the rows they spare outweigh their
    ``runs`` (``RUN_ROWS`` each).

    >>> ands_ranges(0.015, 0.025, 6_000_000, 57), ands_ranges(0.015, 0.025, 600_000_000, 57)
    (False, True)
    """
    return bfrac is not None and frac < FINER * bfrac and (bfrac - frac) * rows >= runs * RUN_ROWS


def _fractions(catalog: Catalog, table: str, attr: str, version: int, part: RangePartition, fragments,
               columns=None):
    """(units, read fraction of the bridged ranges, read fraction of the layout's block list or None)
    of a sketched scan; the block list only when the scan reads a layout with blocks on ``attr``."""
    b = boundary_values(part)
    exact, fragments = fragments, read_set(fragments, part)
    units = read_units(catalog, table, attr, version, columns=columns)
    frac = read_fraction_of(units.units, b, fragments, part.null_id)
    if not units.source.startswith("layout"):
        return units, frac, None
    lay = find_layout(catalog.store, table, attr, version, columns)
    starts = blocks.load_starts(lay["path"]) if lay is not None and lay["attr"] == attr else None
    ids = None if starts is None else blocks.sketch_blocks(starts, part, exact)
    if ids is not None and len(ids) <= blocks.MAX_IDS:  # read as its blocks (``block_condition``)
        return units, frac, blocks.read_fraction(units.units, starts, part.dtype, ids)
    return units, frac, None


def scan_units(catalog: Catalog, table: str, attr: str, version: int, part: RangePartition, fragments,
               columns=None):
    """(units, read fraction, layout?) of the files a sketched scan opens: the clustered layout only
    when it skips clearly more than the base files do (reads at most ``LAYOUT_GAIN`` of their
    rows), since a layout is more files to open and list than the base files' few large ones.
    Read fractions are those of what the scan filters on: the layout's block list
    (``block_condition``), with the ranges ANDed when they are finer (``layout_condition``), else
    the bridged ranges (``read_set``)."""

    units, frac, bfrac = _fractions(catalog, table, attr, version, part, fragments, columns)
    if not units.source.startswith("layout"):
        return units, frac, False
    if bfrac is not None and not ands_ranges(frac, bfrac, units.rows, _runs(part, fragments)):
        frac = bfrac
    b = boundary_values(part)
    base = read_units(catalog, table, attr, version, layout=False)
    base_frac = read_fraction_of(base.units, b, read_set(fragments, part), part.null_id)
    return (units, frac, True) if frac <= LAYOUT_GAIN * base_frac else (base, base_frac, False)


def layout_pays(catalog: Catalog, table: str, attr: str, version: int, part: RangePartition, fragments,
                columns=None) -> bool:
    """Whether a sketched scan reading ``columns`` reads the clustered layout (``scan_units``)."""
    return scan_units(catalog, table, attr, version, part, fragments, columns)[2]


def layout_view(catalog: Catalog, lay: dict, version: int, part: RangePartition | None = None,
                fragments=None) -> str:
    """Register (once per layout, table version and set of files) and return the view of a
    clustered layout brought to ``version``.  With a sketch (``part`` on the layout's attribute and
    its ``fragments``) the view holds only the layout files the fragments can touch
    (``file_selection``): Spark reads every opened file's footer and column index.  Sketches that
    touch the same files share a view, with DataFrames cached by the catalog: building one over the
    layout and the batches since is file listing, 0.5-0.8 s per query at SF1 when it was per sketch."""

    full = len(lay["manifest"])
    files = tuple(touched_files(lay["manifest"], part, fragments)) if (
        part is not None and part.attr == lay["attr"] and full) else None
    if files is not None and len(files) == full:
        files = None
    tag = "" if files is None else "_" + hashlib.sha1("\n".join(files).encode()).hexdigest()[:12]
    name = catalog.view_name(lay["table"], version, f"_l{lay['id']}{tag}")
    starts = blocks.load_starts(lay["path"])
    dtype = catalog.column_type(lay["table"], lay["attr"])
    numbered = None if starts is None else (  # later inserts get their block ids too
        lambda f: blocks.ontop_file(lay, f, lay["attr"], dtype, starts))
    numbered_rows = None if starts is None else (lambda t: blocks.with_block_ids(t, lay["attr"], dtype, starts))

    def frame():
        every = catalog.parquet(lay["path"])
        if files is None:
            return every
        return catalog.parquet_of(lay["path"], files, every.schema) if files else every.limit(0)

    return registered(catalog, name, lambda: catalog.read_on_top(
        frame(), lay["table"], lay["table_version"], version, map_ins=numbered, map_rows=numbered_rows))


def layout_condition(catalog: Catalog, lay: dict, version: int, part: RangePartition, fragments, ranges: str,
                     columns=None) -> str:
    """The filter of a sketched scan of the layout: its block list (``block_condition``), with the
    sketch's ``ranges`` ANDed when the rows they spare pay for them (``ands_ranges``); the ranges alone when
    the layout has no block list for the sketch."""
    blk = block_condition(lay, part, fragments)
    if blk is None:
        return ranges
    units, frac, bfrac = _fractions(catalog, lay["table"], part.attr, version, part, fragments, columns)
    return f"({blk}) AND ({ranges})" if ands_ranges(frac, bfrac, units.rows, _runs(part, fragments)) else blk


def _runs(part: RangePartition, fragments) -> int:
    """Runs in the sketch's range filter (``range_condition``: bridged at ``MAX_RUNS``)."""
    return len(capped_runs(fragments, part, MAX_RUNS))


def block_condition(lay: dict, part: RangePartition, fragments) -> str | None:
    """The sketch as the layout's block ids (``advisor.layout.blocks``: one code text for every sketch),
    or None when the layout has no blocks or the ids are too many."""

    starts = blocks.load_starts(lay["path"]) if lay["attr"] == part.attr else None
    return None if starts is None else blocks.condition(starts, part, fragments)


def sketch_source(catalog: Catalog, sketch, versions: dict[str, int], use_layout: bool = True,
                  reads: dict | None = None):
    """Scan source function applying `sketch` to every access of each sketched table.  ``reads``
    ({table: columns}, ``advisor.plan.read_columns``) lets a narrow copy holding those columns
    serve the scan; without it only a full layout does."""
    conds: dict[str, str] = {}
    views: dict[str, str] = {}
    narrow: dict[str, frozenset] = {}  # tables read from a narrow copy: the columns it holds
    for p in sketch.parts:
        part = load_partition(catalog.store, p.partition_id)
        cond = range_condition(part, p.fragments, p.attr)
        if p.table in conds:  # a two-attribute sketch (``advisor.selection.attribute_pairs``): both filters, the first's layout
            conds[p.table] = f"({conds[p.table]}) AND ({cond})"
            continue
        conds[p.table] = cond
        v = versions[p.table]
        cols = (reads or {}).get(p.table)
        lay = find_layout(catalog.store, p.table, p.attr, v, cols) if use_layout else None
        if lay is not None and layout_pays(catalog, p.table, p.attr, v, part, p.fragments, cols):
            views[p.table] = layout_view(catalog, lay, v, part, p.fragments)
            conds[p.table] = layout_condition(catalog, lay, v, part, p.fragments, cond, cols)
            if lay["columns"] is not None:
                narrow[p.table] = frozenset(lay["columns"])
        else:
            views[p.table] = table_view(catalog, p.table, v)

    def source(scan):
        if scan.table in conds:
            return Source(f"{views[scan.table]} WHERE {conds[scan.table]}", absent=frozenset(
                c.source for c in scan.cols if c.source not in narrow[scan.table]) if scan.table in narrow else frozenset())
        return Source(table_view(catalog, scan.table, versions.get(scan.table)))

    return source
