"""One sketched access of one table: what its filter needs to know, each fact worked out once.

A sketch part's scan filter is built from a handful of facts about its partition and the table's
files: the fragments' runs (bridged at ``MAX_RUNS``), the fragments those runs admit, the units the
scan reads (pages, row groups or a layout's files), the clustered layout on the attribute and its
value-aligned blocks.  ``SketchedScan`` owns them, so choosing between the stored files and a
layout, predicting the read and writing the filter ask each layer once.

>>> from advisor.partition.range_partition import RangePartition
>>> part = RangePartition(0, "t", "a", "int", (10, 20, 30, 40), (5, 5, 5, 5, 5, 0))
>>> s = SketchedScan(None, "t", "a", 1, part, frozenset({1, 2, 4}))
>>> s.runs, sorted(s.read_set)
([(1, 2), (4, 4)], [1, 2, 4])
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from advisor.engine.execute import registered, table_view
from advisor.layout import blocks
from advisor.layout.file_selection import touched_files
from advisor.layout.registry import find_layout
from advisor.layout.skip_prediction import boundary_values, read_fraction_of, read_units
from advisor.partition.fragment_runs import MAX_RUNS, admitted, capped_runs
from advisor.partition.range_partition import RangePartition
from advisor.sketch.range_filter import ranges_text

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog

# The layout is read only when it reads at most this share of the rows the stored files would:
# a layout is more files to open and list than the stored files' few large ones.
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


@dataclass
class SketchedScan:
    """The scan of ``table`` at ``version`` restricted to ``fragments`` of ``part`` (on ``attr``),
    reading ``columns`` (None: all), from a clustered layout when ``use_layout`` and one pays."""

    catalog: Catalog | None
    table: str
    attr: str
    version: int
    part: RangePartition
    fragments: frozenset
    columns: frozenset | None = None
    use_layout: bool = True
    max_runs: int = field(default=MAX_RUNS, repr=False)

    # -- the partition's facts --------------------------------------------------------------------
    @cached_property
    def runs(self) -> list[tuple[int, int]]:
        """The filter's runs of consecutive fragments, cheapest gaps bridged down to ``max_runs``."""
        return capped_runs(self.fragments, self.part, self.max_runs)

    @cached_property
    def read_set(self) -> frozenset:
        """The fragments the range filter admits: its runs after bridging, plus NULLs."""
        return admitted(self.runs, self.fragments, self.part)

    @cached_property
    def bounds(self) -> tuple:
        """The partition's interior boundaries as typed values, comparable with unit statistics."""
        return boundary_values(self.part)

    @cached_property
    def ranges(self) -> str:
        """The range filter (``advisor.sketch.range_filter.range_condition``) of the sketch."""
        return ranges_text(self.part, self.runs, self.fragments, self.attr)

    # -- the files' facts ----------------------------------------------------------------------------
    @cached_property
    def units(self):
        """Read units of the files a scan of ``columns`` would open (a layout's when one holds them)."""
        return read_units(self.catalog, self.table, self.attr, self.version, columns=self.columns)

    @cached_property
    def range_fraction(self) -> float:
        """Rows the range filter reads over ``units``' rows."""
        return read_fraction_of(self.units.units, self.bounds, self.read_set, self.part.null_id)

    @cached_property
    def layout(self) -> dict | None:
        """The clustered layout (or narrow copy holding ``columns``) on the attribute, if any."""
        if not self.use_layout:
            return None
        return find_layout(self.catalog.store, self.table, self.attr, self.version, self.columns)

    @cached_property
    def starts(self):
        """The layout's block starts when it is blocked on the sketch's attribute, else None."""
        lay = self.layout
        return blocks.load_starts(lay["path"]) if lay is not None and lay["attr"] == self.attr else None

    @cached_property
    def block_ids(self) -> list[int] | None:
        """The layout's blocks holding a sketched row, or None without blocks."""
        return None if self.starts is None else blocks.sketch_blocks(self.starts, self.part, self.fragments)

    @cached_property
    def block_fraction(self) -> float | None:
        """Rows ``__blk IN (ids)`` reads over the layout's rows (None when the scan does not read a
        blocked layout or the ids are too many to list)."""
        if not self.units.source.startswith("layout") or self.block_ids is None or len(self.block_ids) > blocks.MAX_IDS:
            return None
        return blocks.read_fraction(self.units.units, self.starts, self.part.dtype, self.block_ids)

    @cached_property
    def finer_ranges(self) -> bool:
        """Whether the layout scan ANDs the ranges to its block list (``ands_ranges``)."""
        return ands_ranges(self.range_fraction, self.block_fraction, self.units.rows, len(self.runs))

    @cached_property
    def stored(self):
        """(units, read fraction) of the table's stored files under the range filter."""
        base = read_units(self.catalog, self.table, self.attr, self.version, layout=False)
        return base, read_fraction_of(base.units, self.bounds, self.read_set, self.part.null_id)

    # -- the decision and the filter ------------------------------------------------------------------
    @cached_property
    def plan(self):
        """(units, read fraction, layout?) of the files the scan opens: the layout only when it
        reads at most ``LAYOUT_GAIN`` of the rows the stored files would.  Read fractions are those
        of what the scan filters on: the block list, with the ranges ANDed when they are finer,
        else the bridged ranges."""
        if not self.units.source.startswith("layout"):
            return self.units, self.range_fraction, False
        frac = self.range_fraction
        if self.block_fraction is not None and not self.finer_ranges:
            frac = self.block_fraction
        base, base_frac = self.stored
        return (self.units, frac, True) if frac <= LAYOUT_GAIN * base_frac else (base, base_frac, False)

    @property
    def reads_layout(self) -> bool:
        """Whether the scan reads the clustered layout (``plan``)."""
        return self.layout is not None and self.plan[2]

    @property
    def read_fraction(self) -> float:
        return self.plan[1]

    def block_condition(self) -> str | None:
        """The sketch as the layout's block ids, ``false`` for none, None without blocks or with
        too many ids."""
        if self.block_ids is None or len(self.block_ids) > blocks.MAX_IDS:
            return None
        return blocks.ids_condition(self.block_ids)

    def condition(self) -> str:
        """The scan's filter: over a layout its block list (ANDed with the ranges when they pay),
        else the ranges."""
        if not self.reads_layout:
            return self.ranges
        blk = self.block_condition()
        if blk is None:
            return self.ranges
        return f"({blk}) AND ({self.ranges})" if self.finer_ranges else blk

    def view(self) -> str:
        """The temp view the scan reads: the layout's files the sketch touches, or the table."""
        if self.reads_layout:
            return layout_view(self.catalog, self.layout, self.version, self.part, self.fragments)
        return table_view(self.catalog, self.table, self.version)
