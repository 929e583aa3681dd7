"""The read units a clustered layout on an attribute *would* have, before it is built, so the cost
model can price building it: a layout sorts the table on the attribute (NULLs first) and cuts it
into pages (row groups for kinds without a column index) of ``unit_rows`` rows, so each unit spans
the consecutive fragments of an equi-depth partition that its rows fall into.

>>> from advisor.partition.range_partition import RangePartition
>>> part = RangePartition(1, "t", "a", "bigint", boundaries=(10, 20, 30), sizes=(5, 5, 5, 5, 0))
>>> [(u.rows, u.lo, u.hi) for u in clustered_units(part, 0, 10).units]
[(10, 0, 10), (10, 20, 30)]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.layout.clustered_copy import PAGE_ROWS, ROW_GROUP_BYTES
from advisor.layout.skip_prediction import PAGE_KINDS, ReadUnit, Units, boundary_values
from advisor.caches import memoize
from advisor.warehouse import filesystem
from advisor.warehouse.table_files import parquet_files
from advisor.warehouse.value_kinds import kind_of

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog


def clustered_units(part, lowest: Any, unit_rows: int) -> Units:
    """Units of a layout sorted on ``part``'s attribute, from the partition's fragment sizes:
    ``lowest`` is the attribute's smallest value (fragment 0 has no lower boundary; None leaves a
    unit touching fragment 0 unskippable), ``unit_rows`` the rows per page or row group."""
    bounds = boundary_values(part)
    sizes = list(part.sizes) or [0] * part.n_fragments
    rep = [lowest] + list(bounds)  # a value inside range fragment i: its lower boundary
    order = [part.null_id] + list(range(part.n_ranges))
    units, rows, nulls, first, last = [], 0, 0, None, None
    step = max(1, int(unit_rows))
    for f in order:
        left = int(sizes[f]) if f < len(sizes) else 0
        while left > 0:
            take = min(left, step - rows)
            rows, left = rows + take, left - take
            if f == part.null_id:
                nulls += take
            else:
                first = f if first is None else first
                last = f
            if rows == step:
                units.append(_unit(rows, nulls, first, last, rep))
                rows, nulls, first, last = 0, 0, None, None
    if rows:
        units.append(_unit(rows, nulls, first, last, rep))
    return Units(tuple(units), f"a layout on {part.attr} to build ({len(units)} units of {step:,} rows)")


def _unit(rows: int, nulls: int, first, last, rep: list) -> ReadUnit:
    if first is None:
        return ReadUnit(rows, None, None, nulls)
    lo, hi = rep[first], rep[last]
    if lo is None or hi is None:
        return ReadUnit(rows, always=True)
    return ReadUnit(rows, lo, hi, nulls)


def column_bytes(cat: Catalog, table: str, version: int) -> dict[str, int]:
    """Compressed bytes per column of the table's stored files at ``version`` (the newest base of
    the own store, or the Delta snapshot's files), from their footers: what a copy of some columns
    reads and writes."""
    v = cat.version(table, version)
    if v.kind == "delta":
        files = cat.data_files(table, version)
    else:
        base = max((x for x in cat.versions(table) if x.kind == "base" and x.version <= version),
                   key=lambda x: x.version)
        files = parquet_files([base.base_path])
    return dict(_column_bytes(tuple(files)))


@memoize("column bytes", maxsize=64)
def _column_bytes(files: tuple) -> tuple:
    out: dict[str, int] = {}
    for f in files:
        md = filesystem.parquet_file(f).metadata
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            for k in range(rg.num_columns):
                c = rg.column(k)
                out[c.path_in_schema] = out.get(c.path_in_schema, 0) + int(c.total_compressed_size)
    return tuple(sorted(out.items()))


def byte_share(cat: Catalog, table: str, version: int, columns) -> float:
    """The share of the table's stored bytes in ``columns`` (row ids aside)."""
    b = column_bytes(cat, table, version)
    total = sum(n for c, n in b.items() if not c.startswith("_"))
    return sum(b.get(c, 0) for c in columns) / total if total else 1.0


def unit_rows(cat: Catalog, table: str, attr: str, version: int) -> int:
    """Rows per read unit of a layout on ``attr`` still to build: a page where Spark skips pages by
    the column index, else a 1 MiB row group (``advisor.layout.clustered_copy``)."""
    if kind_of(cat.column_type(table, attr)) in PAGE_KINDS and PAGE_ROWS:
        return PAGE_ROWS
    v = cat.version(table, version)
    return max(1, int(ROW_GROUP_BYTES * v.rows / max(v.bytes, 1)))
