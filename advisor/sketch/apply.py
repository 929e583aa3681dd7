"""Using a sketch: every access of a sketched table becomes a scan restricted to its fragments.

Each sketch part is one ``SketchedScan`` (``advisor.sketch.sketched_scan``): it decides whether the
scan reads a clustered layout or the stored files and writes the filter (the range conditions of
``advisor.sketch.range_filter``, or a layout's block list); Spark skips the files, row groups and
pages the filter's min/max rule out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.engine.execute import table_view
from advisor.partition.range_partition import load_partition
from advisor.plan.to_sql import Source
from advisor.sketch.range_filter import range_condition
from advisor.sketch.sketched_scan import SketchedScan

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog


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
        if p.table in conds:  # a two-attribute sketch (``advisor.selection.attribute_pairs``): both filters, the first's layout
            conds[p.table] = f"({conds[p.table]}) AND ({range_condition(part, p.fragments, p.attr)})"
            continue
        scan = SketchedScan(catalog, p.table, p.attr, versions[p.table], part, p.fragments,
                            (reads or {}).get(p.table), use_layout=use_layout)
        views[p.table], conds[p.table] = scan.view(), scan.condition()
        if scan.reads_layout and scan.layout["columns"] is not None:
            narrow[p.table] = frozenset(scan.layout["columns"])

    def source(scan):
        if scan.table in conds:
            return Source(f"{views[scan.table]} WHERE {conds[scan.table]}", absent=frozenset(
                c.source for c in scan.cols if c.source not in narrow[scan.table]) if scan.table in narrow else frozenset())
        return Source(table_view(catalog, scan.table, versions.get(scan.table)))

    return source
