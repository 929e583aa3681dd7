"""Benchmark: what a narrow copy costs against the query it serves, beside a full layout.

For each template: ``reps`` plain runs of the query (after one warm-up), then the narrow copy of
the columns it reads of its table sorted on the attribute (``build_layout(columns=...)``), then the
full clustered layout of every column; each build is reported in seconds and in plain runs of the
query (build / median plain run), with the copy's bytes.  Then the sketched run through the narrow
copy, rows read against plain.  One process, side by side.
"""

from __future__ import annotations

import statistics
import time

from rich.table import Table

from advisor.context import Context
from advisor.layout.clustered_copy import build_layout, drop_layout, layout_bytes
from advisor.plan.parse import parse_sql
from advisor.plan.read_columns import read_columns
from advisor.sketch.capture import capture
from advisor.sketch.run import run_query

# (name, table, attribute, query): templates of the fresh-tables workload whose attribute the
# stored files do not cluster
TEMPLATES = [
    ("top_suppliers", "lineitem", "l_suppkey",
     "SELECT l_suppkey, sum(l_extendedprice) AS r FROM lineitem GROUP BY l_suppkey ORDER BY r DESC LIMIT 10"),
    ("top_parts_qty", "lineitem", "l_partkey",
     "SELECT l_partkey, sum(l_quantity) AS q FROM lineitem GROUP BY l_partkey ORDER BY q DESC LIMIT 20"),
    ("top_customers", "orders", "o_custkey",
     "SELECT o_custkey, sum(o_totalprice) AS t FROM orders GROUP BY o_custkey ORDER BY t DESC LIMIT 10"),
]


def _timed(f):
    t0 = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t0


def bench_copies(ctx: Context, reps: int = 3, full: bool = True, templates=TEMPLATES) -> list[dict]:
    cat = ctx.catalog
    out = []
    for name, table, attr, sql in templates:
        q = parse_sql(sql, ctx.schema_lookup())
        run_query(cat, q)  # warm-up
        plain = [_timed(lambda: run_query(cat, q))[1] for _ in range(reps)]
        base = statistics.median(plain)
        cols = sorted(read_columns(q)[table])
        lay, narrow_s = _timed(lambda: build_layout(cat, table, attr, columns=cols))
        row = {"template": name, "table": table, "attr": attr, "columns": lay["columns"],
               "plain_s": [round(x, 3) for x in plain], "narrow_build_s": round(narrow_s, 3),
               "narrow_build_scans": round(narrow_s / base, 2), "narrow_mb": round(layout_bytes(lay) / 1e6, 1)}
        sk = capture(cat, q, {table: attr}, 1000).sketch
        res = run_query(cat, q, sketch=sk)
        row.update(sketched_rows_read=res.metrics.rows_read, plain_rows_read=cat.version(table).rows)
        if full:
            drop_layout(cat, lay["id"])
            whole, full_s = _timed(lambda: build_layout(cat, table, attr))
            row.update(full_build_s=round(full_s, 3), full_build_scans=round(full_s / base, 2),
                       full_mb=round(layout_bytes(whole) / 1e6, 1))
            drop_layout(cat, whole["id"])
            build_layout(cat, table, attr, columns=cols)  # leave the narrow copy, as the advisor would
        out.append(row)
    return out


def render(console, rows: list[dict]) -> None:
    tab = Table("template", "copy columns", "plain run (median s)", "narrow copy s (plain runs)", "MB",
                "full layout s (plain runs)", "MB", "rows read sketched / plain")
    for r in rows:
        tab.add_row(r["template"], ", ".join(r["columns"]), f"{statistics.median(r['plain_s']):.2f}",
                    f"{r['narrow_build_s']:.1f} ({r['narrow_build_scans']:.1f})", f"{r['narrow_mb']:.1f}",
                    f"{r['full_build_s']:.1f} ({r['full_build_scans']:.1f})" if "full_build_s" in r else "-",
                    f"{r['full_mb']:.1f}" if "full_mb" in r else "-",
                    f"{r['sketched_rows_read']:,} / {r['plain_rows_read']:,}")
    console.print(tab)
