"""Capturing and maintaining the sketch of a recursive query against the warehouse: the link
rows are read on the driver (with their row ids), the view and its witnesses are computed in
Python, the sketch is the set of fragments of a range partition of the link table on one
attribute; a new table version is caught up by diffing row ids and maintaining the state."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from advisor.errors import BadInput, spark_rejected
from advisor.partition.range_partition import RangePartition, build_partition, find_partition, fragment_ids
from advisor.recursive.evaluate import link_exprs, link_tuples
from advisor.recursive.maintain import BatchResult, RecursivePolicy, RecursiveState
from advisor.sketch.range_filter import range_condition
from advisor.sketch.sketched_scan import SketchedScan
from advisor.warehouse.table_files import RID

DEFAULT_FRAGMENTS = 100


def load_links(catalog, shape, version: int | None = None) -> dict:
    """Row id -> (src, dst, cost) of the link table at ``version`` (cost 0 without a cost column);
    with link-row selections in the base or the step, (src, dst, cost, base_ok, step_ok), the
    flags computed by Spark from the query's own predicates."""
    cols = [shape.src_col, shape.dst_col] + ([shape.cost_col] if shape.cost_col else [])
    for c in cols:
        if c not in dict(catalog.schema(shape.table)):
            raise BadInput(f"table {shape.table} has no column {c!r}")
    if shape.base_filter or shape.step_filter:
        return _flagged_links(catalog, shape, version)
    tab = catalog.read_arrow(shape.table, version, cols, with_rid=True).to_pydict()
    cost = tab[shape.cost_col] if shape.cost_col else [0] * len(tab[RID])
    return {r: (s, d, c) for r, s, d, c in zip(tab[RID], tab[shape.src_col], tab[shape.dst_col], cost)}


def _flagged_links(catalog, shape, version) -> dict:
    try:
        tab = catalog.read(shape.table, version, with_rid=True).selectExpr(RID, *link_exprs(shape)).toArrow()
    except Exception as e:
        raise spark_rejected(e, "the link selection of the recursive query") from None
    tab = tab.to_pydict()
    return link_tuples(tab, shape, tab[RID])


@dataclass
class RecursiveSketch:
    """A captured (and maintained) recursive sketch: attribute, partition, fragments, state."""

    shape: object
    attr: str
    part: RangePartition
    version: int
    fragments: frozenset
    state: RecursiveState
    seconds: float
    frag: dict = field(default_factory=dict, repr=False)  # row id -> fragment
    stamp: float | None = None  # when the link table was created: a reloaded table is another table

    def condition(self) -> str:
        return range_condition(self.part, self.fragments, self.attr)

    def source(self, catalog) -> tuple[str, str]:
        """(temp view, condition) a sketched scan reads: the link table's clustered layout on the
        sketch's attribute when one exists and skips clearly more (``advisor.sketch.sketched_scan``)."""
        scan = SketchedScan(catalog, self.shape.table, self.attr, self.version, self.part, self.fragments)
        return scan.view(), scan.condition()

    def selectivity(self) -> float:
        return sum(self.part.sizes[f] for f in self.fragments if f < len(self.part.sizes)) / max(
            1, sum(self.part.sizes)
        )

    def fragment_of(self, rid) -> int:
        return self.frag[rid]

    def refresh_fragment_map(self) -> None:
        pos = {self.shape.src_col: 0, self.shape.dst_col: 1}.get(self.attr, 2)
        rids = list(self.state.links)
        frags = fragment_ids([self.state.links[r][pos] for r in rids], self.part)
        self.frag = dict(zip(rids, frags))

    def to_json(self) -> dict:
        return {
            "table": self.shape.table,
            "attr": self.attr,
            "partition": self.part.id,
            "version": self.version,
            "fragments": sorted(self.fragments),
            "n_fragments": self.part.n_fragments,
            "mode": self.state.mode,
            "selectivity": round(self.selectivity(), 6),
        }


def table_stamp(catalog, table: str) -> float | None:
    """When ``table`` was created (loaded or imported) in the warehouse."""
    r = catalog.store.one("SELECT created FROM tables WHERE name=?", (table,))
    return None if r is None else float(r["created"])


def partition_for(catalog, shape, attr: str, fragments: int, version: int) -> RangePartition:
    part = find_partition(catalog.store, shape.table, attr, fragments)
    return part if part is not None else build_partition(catalog, shape.table, attr, fragments, version)


def capture_recursive(
    catalog,
    shape,
    attr: str | None = None,
    fragments: int = DEFAULT_FRAGMENTS,
    version: int | None = None,
    policy: RecursivePolicy | None = None,
) -> RecursiveSketch:
    """Capture the sketch of ``shape`` on ``shape.table.attr`` (default: the source column)."""
    t0 = time.perf_counter()
    attr = (attr or shape.src_col).lower()
    if attr not in (shape.src_col, shape.dst_col, shape.cost_col):
        raise BadInput(
            f"a recursive sketch is on a link column the query reads ({shape.src_col}, "
            f"{shape.dst_col}{', ' + shape.cost_col if shape.cost_col else ''}), not {attr!r}"
        )
    v = catalog.version(shape.table, version).version
    part = partition_for(catalog, shape, attr, fragments, v)
    state = RecursiveState(shape, load_links(catalog, shape, v), policy or RecursivePolicy())
    rs = RecursiveSketch(
        shape, attr, part, v, frozenset(), state, 0.0, stamp=table_stamp(catalog, shape.table)
    )
    rs.refresh_fragment_map()
    rs.fragments = state.fragments(rs.fragment_of)
    rs.seconds = time.perf_counter() - t0
    return rs


def catch_up(catalog, rs: RecursiveSketch, version: int | None = None) -> BatchResult | None:
    """Maintain ``rs`` to ``version`` (default latest): the batch is the row-id difference."""
    v = catalog.version(rs.shape.table, version).version
    if v == rs.version:
        return None
    now = load_links(catalog, rs.shape, v)
    old = rs.state.links
    inserted = {r: link for r, link in now.items() if r not in old}
    deleted = [r for r in old if r not in now]
    res = rs.state.apply(inserted, deleted)
    t0 = time.perf_counter()
    rs.refresh_fragment_map()
    rs.fragments = rs.state.fragments(rs.fragment_of)
    res.seconds += time.perf_counter() - t0
    rs.version = v
    return res
