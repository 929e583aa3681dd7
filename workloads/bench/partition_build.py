"""Benchmark: building a range partition on the driver (pyarrow) vs on Spark, side by side.

For each (table, column, fragments): alternate the two paths of ``build_partition`` ``reps``
times in one process (after one warm-up build of each) and report median seconds, the ratio,
and how even the fragments are (largest fragment / fair share: the driver takes exact quantiles,
Spark quantiles of a ~50-per-range sample).  The Spark path's own first (cold) build is reported
too: it is what a fresh process pays.

    python -m workloads.bench.partition_build --warehouse DIR lineitem.l_orderkey:10000 orders.o_orderdate:1000
"""

from __future__ import annotations

import argparse
import statistics
import time

from advisor.context import Context
from advisor.partition.range_partition import build_partition


def _evenness(part) -> float:
    """Largest non-NULL fragment over the fair share of the non-NULL rows."""
    sizes = list(part.sizes[: part.n_ranges])
    rows = sum(sizes)
    return max(sizes) / (rows / max(1, len(sizes))) if rows else 0.0


def bench_partitions(ctx: Context, specs: list[tuple[str, str, int]], reps: int = 3) -> list[dict]:
    cat = ctx.catalog
    out = []
    for table, attr, n in specs:
        t0 = time.perf_counter()
        build_partition(cat, table, attr, n, on_driver=False)
        cold_spark = time.perf_counter() - t0
        t0 = time.perf_counter()
        build_partition(cat, table, attr, n, on_driver=True)
        cold_driver = time.perf_counter() - t0
        secs = {True: [], False: []}
        parts = {}
        for _ in range(reps):
            for on_driver in (True, False):
                t0 = time.perf_counter()
                parts[on_driver] = build_partition(cat, table, attr, n, on_driver=on_driver)
                secs[on_driver].append(time.perf_counter() - t0)
        d, s = statistics.median(secs[True]), statistics.median(secs[False])
        assert sum(parts[True].sizes) == sum(parts[False].sizes) == cat.version(table).rows
        out.append({"table": table, "attr": attr, "fragments": n, "rows": cat.version(table).rows,
                    "driver_s": d, "spark_s": s, "driver_over_spark": d / s,
                    "first_spark_s": cold_spark, "first_driver_s": cold_driver,
                    "ranges_driver": parts[True].n_ranges, "ranges_spark": parts[False].n_ranges,
                    "evenness_driver": _evenness(parts[True]), "evenness_spark": _evenness(parts[False])})
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warehouse", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("specs", nargs="+", help="table.column:fragments")
    a = ap.parse_args(argv)
    specs = []
    for sp in a.specs:
        col, n = sp.rsplit(":", 1)
        t, c = col.split(".", 1)
        specs.append((t, c, int(n)))
    rows = bench_partitions(Context(a.warehouse), specs, a.reps)
    print(f"{'column':28} {'frags':>6} {'rows':>10} {'driver s':>9} {'spark s':>8} {'ratio':>6} "
          f"{'1st spark':>9} {'1st drv':>8} {'even drv':>8} {'even spk':>8}")
    for r in rows:
        print(f"{r['table'] + '.' + r['attr']:28} {r['fragments']:>6} {r['rows']:>10,} {r['driver_s']:>9.3f} "
              f"{r['spark_s']:>8.3f} {r['driver_over_spark']:>6.3f} {r['first_spark_s']:>9.3f} "
              f"{r['first_driver_s']:>8.3f} {r['evenness_driver']:>8.2f} {r['evenness_spark']:>8.2f}")


if __name__ == "__main__":
    main()
