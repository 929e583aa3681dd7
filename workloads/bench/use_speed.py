"""Benchmark: plain vs sketched runs of the TPC-H suite, side by side in one run.

For each query: an untimed plain run, the capture (timed: the query's first instrumented run,
code generation included), the capture again (timed: what a repeated capture of a known shape
costs), an untimed sketched run (file listing, code generation of the sketch's filter), then
plain and sketched runs alternated `reps` times;
reports medians, the deterministic counters (files, bytes, rows read) and the sketch's size.
Sketched tables get a clustered layout first (its build time is reported separately).

The *limit* of a sketched run is what it cannot avoid: the floor (a trivial Spark job on the same
session, ``SELECT count(*) FROM range(1)``) plus reading the rows it reads at the plain run's rate
per row, ``floor + rows_sketched * (plain - floor) / rows_plain``; the limit ratio is the sketched
run's time over it (1.0: nothing but the job and its rows).

>>> round(limit_seconds(0.2, 10.2, 1_000_000, 10_000), 3)
0.3
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING

from rich.table import Table

from advisor.engine.execute import versions_now
from advisor.layout.clustered_copy import build_layout
from advisor.layout.registry import find_layout
from advisor.plan.parse import parse_sql
from advisor.sketch.capture import capture
from advisor.sketch.lookup import sketch_rows
from advisor.sketch.run import run_query

if TYPE_CHECKING:
    from advisor.context import Context


def limit_seconds(floor: float, plain: float, rows_plain: int, rows_sketched: int) -> float:
    """The floor plus the sketched run's rows at the plain run's per-row rate (module docstring)."""
    return floor + rows_sketched * max(0.0, plain - floor) / max(1, rows_plain)


def floor_seconds(spark, reps: int) -> float:
    """Median time of a trivial Spark job on this session."""
    times = []
    for _ in range(max(3, reps)):
        t0 = time.perf_counter()
        spark.sql("SELECT count(*) FROM range(1)").collect()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_use(ctx: Context, suite, fragments: int = 1000, reps: int = 3, console=None) -> list[dict]:
    cat = ctx.catalog
    out = []
    for name, sql, on in suite:
        q = parse_sql(sql, ctx.schema_lookup())
        versions = versions_now(cat, q)
        t_layout = 0.0
        for t, a in on.items():
            if find_layout(cat.store, t, a, versions[t]) is None:
                t0 = time.perf_counter()
                build_layout(cat, t, a, versions[t])
                t_layout += time.perf_counter() - t0
        run_query(cat, q, versions)  # warm-up: file listing, JIT
        cap = capture(cat, q, on, fragments, versions)
        again = capture(cat, q, on, fragments, versions, check=False).seconds
        run_query(cat, q, versions, sketch=cap.sketch)  # warm-up of the sketched side
        plain, sk = [], []
        for _ in range(reps):
            plain.append(run_query(cat, q, versions))
            sk.append(run_query(cat, q, versions, sketch=cap.sketch))
        same = all(sorted(map(repr, p.rows)) == sorted(map(repr, s.rows)) for p, s in zip(plain, sk))
        tp = statistics.median(r.seconds for r in plain)
        ts = statistics.median(r.seconds for r in sk)
        floor = floor_seconds(ctx.spark, reps)
        limit = limit_seconds(floor, tp, plain[0].metrics.rows_read, sk[0].metrics.rows_read)
        total = sum(cat.version(t, versions[t]).rows for t in on)
        rec = {"query": name, "same": same, "rows": len(plain[0].rows),
               "fragments": {p.table: len(p.fragments) for p in cap.sketch.parts},
               "selectivity": sketch_rows(cat, cap.sketch) / max(1, total),
               "plain": plain[0].metrics.to_dict() | {"scans": None},
               "sketched": sk[0].metrics.to_dict() | {"scans": None},
               "t_plain": tp, "t_sketched": ts, "speedup": tp / ts if ts else None,
               "t_capture": cap.seconds, "capture_over_plain": cap.seconds / tp if tp else None,
               "t_capture_again": again, "again_over_plain": again / tp if tp else None,
               "t_layout": t_layout, "t_floor": floor, "t_limit": limit, "limit_ratio": ts / limit}
        out.append(rec)
        if console is not None:
            console.print(f"{name}: {tp:.2f}s -> {ts:.2f}s ({rec['speedup']:.1f}x), rows read "
                          f"{rec['plain']['rows_read']:,} -> {rec['sketched']['rows_read']:,}, same={same}")
    return out


def render(console, results: list[dict]) -> None:
    tab = Table("query", "frags", "selectivity", "files p/s", "MB p/s", "rows read p/s", "floor s", "plain s",
                "sketch s", "speedup", "limit s", "limit ratio", "capture/plain",
                "again/plain", "same")
    for r in results:
        p, s = r["plain"], r["sketched"]
        tab.add_row(r["query"], ",".join(str(v) for v in r["fragments"].values()), f"{r['selectivity']:.3%}",
                    f"{p['files_read']}/{s['files_read']}", f"{p['bytes_read'] / 1e6:.1f}/{s['bytes_read'] / 1e6:.1f}",
                    f"{p['rows_read']:,}/{s['rows_read']:,}", f"{r['t_floor']:.2f}", f"{r['t_plain']:.2f}",
                    f"{r['t_sketched']:.2f}", f"{r['speedup']:.1f}x", f"{r['t_limit']:.2f}", f"{r['limit_ratio']:.2f}",
                    f"{r['capture_over_plain']:.2f}", f"{r['again_over_plain']:.2f}",
                    "yes" if r["same"] else "NO")
    console.print(tab)
