"""Scan metrics from Spark's executed plan: files, bytes and rows read by every file scan.

After an action we walk `queryExecution().executedPlan()` over py4j, through AQE's final plan and
query stages, and sum `numFiles`, `filesSize` and `numOutputRows` of each FileSourceScanExec.
With record-level Parquet filtering off (Spark's default), `numOutputRows` counts the rows of the
row groups and pages that survived min/max pruning (footer statistics and the column index), i.e.
rows actually read.  The final aggregations' output rows are the groups the query formed
(``groups``): on a plain run, what operator state for it would hold (``maintain.rent``).

``bytes_read`` is Spark's ``filesSize``: the size of the files the scans opened, not the bytes read
within them (column pruning and page skipping read less); Spark's task input metrics do not count
the Parquet reader's reads on the local file system, so no truer figure is available.

A sort without LIMIT runs the plan below its range exchange twice: once to sample the sort keys
(Spark's ``RangePartitioner``), once to write the shuffle.  Rows read there are counted twice (they
were read twice); groups are counted once, by dividing by the passes the exchange's records show.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class ScanMetrics:
    files_read: int = 0
    bytes_read: int = 0
    rows_read: int = 0
    scans: list = field(default_factory=list)  # per scan: {table, files, bytes, rows}
    groups: int = 0  # rows out of the final (post-shuffle) aggregations: the groups the query formed

    def to_dict(self) -> dict:
        return asdict(self)


def _metric(node, name: str) -> int:
    m = node.metrics()
    opt = m.get(name)
    if opt.isDefined():
        return int(opt.get().value())
    return 0


def _children(node, cls: str):
    """Children of a physical plan node (of class ``cls``), looking through AQE wrappers and query
    stages.  Every call crosses py4j, so sequences are read by size and index (one call a child)."""
    if cls == "AdaptiveSparkPlanExec":
        return [node.executedPlan()]
    if cls.endswith("QueryStageExec"):
        return [node.plan()]
    if cls == "ReusedExchangeExec":  # its scans ran once, under the original exchange
        return []
    kids = node.children()
    out = [kids.apply(i) for i in range(kids.size())]
    subs = node.subqueries()
    if not subs.isEmpty():
        out += [subs.apply(i) for i in range(subs.size())]
    return out


def collect_scan_metrics(df) -> ScanMetrics:
    """Metrics of the last execution of df (call after an action on df)."""
    plan = df._jdf.queryExecution().executedPlan()
    identity = df.sparkSession._jvm.java.lang.System.identityHashCode
    res = ScanMetrics()
    stack, seen = [(plan, 1.0)], set()
    while stack:
        node, passes = stack.pop()
        ident = identity(node)
        if ident in seen:
            continue
        seen.add(ident)
        cls = node.getClass().getSimpleName()
        if cls == "FileSourceScanExec":
            f, b, r = _metric(node, "numFiles"), _metric(node, "filesSize"), _metric(node, "numOutputRows")
            res.files_read += f
            res.bytes_read += b
            res.rows_read += r
            res.scans.append({"relation": str(node.relation().location().rootPaths().head().getName()),
                              "files": f, "bytes": b, "rows": r})
        elif cls in _AGGREGATES and node.requiredChildDistributionExpressions().isDefined():
            # a partial aggregation has no required distribution
            res.groups += round(_metric(node, "numOutputRows") / passes)
        if cls.endswith("QueryStageExec"):  # a materialized stage ran once
            passes = 1.0
        elif cls == "ShuffleExchangeExec":
            passes = _sampling_passes(node)
        stack.extend((c, passes) for c in _children(node, cls))
    return res


def _sampling_passes(exchange) -> float:
    """How many times the plan below a shuffle exchange ran: 1, or about 2 for a range exchange that
    sampled its input first (its child's output rows over the records it wrote)."""
    part = exchange.outputPartitioning()
    if part.getClass().getSimpleName() != "RangePartitioning" or part.numPartitions() <= 1:
        return 1.0
    written = _metric(exchange, "shuffleRecordsWritten")
    node = exchange.child()
    while not node.metrics().get("numOutputRows").isDefined() and node.children().size() == 1:
        node = node.children().head()
    produced = _metric(node, "numOutputRows")
    return produced / written if written and produced >= written else 1.0


_AGGREGATES = ("HashAggregateExec", "ObjectHashAggregateExec", "SortAggregateExec")
