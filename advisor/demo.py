"""`advisor demo`: the main job on the embedded default data.

Loads TPC-H SF0.1 and the flights data into the warehouse (once), then for a suite of HAVING and
top-k queries: checks safety, captures a sketch, runs the query plainly and with the sketch,
verifies that both answers are identical, and prints the data each run read.
"""

from __future__ import annotations

import time

from rich.table import Table

DEMO_QUERIES = [
    ("tpch: big orders (Q18 shape)", {"lineitem": "l_orderkey"},
     "SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 300"),
    ("tpch: top revenue orders (Q3 shape)", {"lineitem": "l_orderkey"},
     "SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem "
     "WHERE l_shipdate > DATE '1995-03-15' GROUP BY l_orderkey ORDER BY revenue DESC LIMIT 10"),
    ("tpch: customers with many orders", {"orders": "o_custkey"},
     "SELECT o_custkey, count(*) AS n FROM orders GROUP BY o_custkey HAVING count(*) >= 28"),
    ("flights: busiest routes", {"flights": "dest"},
     "SELECT origin, dest, count(*) AS n FROM flights GROUP BY origin, dest ORDER BY n DESC LIMIT 5"),
    ("flights: worst-delay days", {"flights": "day"},
     "SELECT month, day, sum(arr_delay) AS total_delay FROM flights WHERE arr_delay > 0 "
     "GROUP BY month, day HAVING sum(arr_delay) > 60000"),
]


def ensure_data(ctx, console, sf: float = 0.1) -> None:
    from workloads.datasets import load_dataset

    cat = ctx.catalog
    for ds, probe in (("tpch", "lineitem"), ("flights", "flights")):
        if not cat.exists(probe):
            t0 = time.perf_counter()
            counts = load_dataset(cat, ds, sf=sf)
            console.print(f"loaded {ds}: " + ", ".join(f"{t} {n:,}" for t, n in counts.items())
                          + f" ({time.perf_counter() - t0:.1f}s)")


def run_demo(ctx, console, fragments: int = 1000) -> list[dict]:
    from advisor.capture import capture
    from advisor.execute import run_query
    from advisor.finder import sketch_rows
    from advisor.layout import build_layout, find_layout
    from advisor.plan.parse import parse_sql

    console.print(f"warehouse: {ctx.warehouse.resolve()}")
    ensure_data(ctx, console)
    cat = ctx.catalog
    results = []
    for title, on, sql in DEMO_QUERIES:
        q = parse_sql(sql, ctx.schema_lookup())
        for t, a in on.items():
            if find_layout(cat.store, t, a) is None:
                build_layout(cat, t, a, rows_per_file=50_000)
        cap = capture(cat, q, on, fragments)
        plain = run_query(cat, q)
        sk = run_query(cat, q, sketch=cap.sketch)
        same = sorted(map(repr, plain.rows)) == sorted(map(repr, sk.rows))
        total = sum(cat.version(t).rows for t in on)
        results.append({"query": title, "rows": len(plain.rows), "same": same,
                        "fragments": sum(len(p.fragments) for p in cap.sketch.parts),
                        "selectivity": sketch_rows(cat, cap.sketch) / max(1, total),
                        "plain": plain.metrics, "sketched": sk.metrics,
                        "t_plain": plain.seconds, "t_sketch": sk.seconds, "t_capture": cap.seconds})
    tab = Table("query", "rows", "same answer", "sketch frags", "selectivity", "files plain→sketch",
                "rows read plain→sketch", "MB plain→sketch", title="plain vs sketched")
    for r in results:
        p, s = r["plain"], r["sketched"]
        tab.add_row(r["query"], str(r["rows"]), "yes" if r["same"] else "NO", str(r["fragments"]),
                    f"{r['selectivity']:.2%}", f"{p.files_read}→{s.files_read}",
                    f"{p.rows_read:,}→{s.rows_read:,}", f"{p.bytes_read / 1e6:.1f}→{s.bytes_read / 1e6:.1f}")
    console.print(tab)
    if not all(r["same"] for r in results):
        from advisor.errors import CheckFailed

        raise CheckFailed("a sketched run returned a different answer than the plain run")
    return results
