"""Running a parsed query on Spark, plainly or with a sketch, and measuring its scans."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from advisor.engine.scan_metrics import ScanMetrics, collect_scan_metrics
from advisor.errors import spark_rejected
from advisor.plan import ir
from advisor.plan.to_sql import Source

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog


@dataclass
class RunResult:
    columns: list[str]
    rows: list[tuple]
    metrics: ScanMetrics
    seconds: float
    sketch: Optional[dict] = None
    note: Optional[str] = None
    files_considered: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"columns": self.columns, "rows": [list(r) for r in self.rows],
                "metrics": {k: v for k, v in self.metrics.to_dict().items() if k != "scans"},
                "scans": self.metrics.scans, "sketch": self.sketch, "seconds": round(self.seconds, 4),
                "note": self.note}


def table_view(catalog: Catalog, table: str, version: Optional[int] = None) -> str:
    """Register (once) and return the temp view name of table at version."""
    v = catalog.version(table, version).version
    return registered(catalog, catalog.view_name(table, v), lambda: catalog.read(table, v))


def registered(catalog: Catalog, name: str, make) -> str:
    """Temp view ``name``, created from ``make()`` (a DataFrame) the first time it is asked for."""
    if not catalog.spark.catalog.tableExists(name):
        make().createOrReplaceTempView(name)
    return name


def versions_now(catalog: Catalog, query: ir.Query) -> dict[str, int]:
    return {t: catalog.current_version(t) for t in {s.table for s in query.scans()}}


def plain_source(catalog: Catalog, versions: dict[str, int]):
    def src(scan: ir.Scan) -> Source:
        return Source(table_view(catalog, scan.table, versions.get(scan.table)))
    return src


def run_plain_sql(catalog: Catalog, sql: str, note: str) -> RunResult:
    """Run SQL the planner does not support, on the latest versions, without any sketch."""
    for t in catalog.tables():
        catalog.read(t).createOrReplaceTempView(t)
    t0 = time.perf_counter()
    try:
        df = catalog.spark.sql(sql)
        rows = [tuple(r) for r in df.collect()]
    except Exception as e:
        raise spark_rejected(e) from None
    return RunResult(df.columns, rows, collect_scan_metrics(df), time.perf_counter() - t0, None, note)
