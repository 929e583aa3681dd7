"""Running a parsed query on Spark with a sketch's filters pushed into its scans (or plainly), and measuring them."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Optional

from advisor.engine.execute import RunResult, plain_source, versions_now
from advisor.engine.scan_metrics import collect_scan_metrics
from advisor.plan import ir
from advisor.plan.read_columns import read_columns
from advisor.plan.to_sql import query_sql
from advisor.sketch.apply import sketch_source

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog


def run_query(catalog: Catalog, query: ir.Query, versions: Optional[dict[str, int]] = None, sketch=None,
              use_layout: bool = True) -> RunResult:
    """Execute query (with `sketch` applied to its scans if given); rows, scan metrics, seconds."""
    versions = versions or versions_now(catalog, query)
    t0 = time.perf_counter()  # building the source (views, filter text) is part of running the query
    if sketch is None:
        source = plain_source(catalog, versions)
    else:
        source = sketch_source(catalog, sketch, versions, use_layout=use_layout, reads=read_columns(query))
    sql = query_sql(query, source)
    df = catalog.spark.sql(sql)
    rows = [tuple(r) for r in df.collect()]
    secs = time.perf_counter() - t0
    return RunResult(list(query.output_names), rows, collect_scan_metrics(df), secs,
                     sketch.to_json() if sketch is not None else None)
