"""Benchmark: incremental maintenance (IMP) vs full recapture, side by side in one run.

For each query: capture at the current version and initialise the operator state, timed both ways
(one Spark aggregation, ``bulk``, which is what maintenance uses, and the row-at-a-time path, which
must give the same sketch), then
for each delta (size x kind: insert / delete / mixed): apply the batch as a new table version,
maintain incrementally (state in memory, delta read from the batch files, join sides by Spark)
and recapture on the new version; both sketches must be equal. Prints per step the two times,
their ratio, and per query the break-even delta size (where incremental stops winning).
"""

from __future__ import annotations

import cProfile
import json
import pstats
import statistics
import sys
import time
from typing import TYPE_CHECKING

from advisor.engine.execute import versions_now
from advisor.errors import BadInput
from advisor.maintain.spark.service import init_state, sketched_scans
from advisor.maintain.spark.spark_side import SparkBase
from advisor.partition.range_partition import load_partition
from advisor.plan.parse import parse_sql
from advisor.sketch.capture import capture, capture_batch
from workloads.data.datasets import load_dataset
from workloads.data.update_batches import batch_frames

if TYPE_CHECKING:
    from advisor.context import Context
    from advisor.warehouse.catalog import Catalog

QUERIES = [
    ("having_orderkey", "SELECT l_orderkey, sum(l_quantity) AS q FROM lineitem GROUP BY l_orderkey "
                        "HAVING sum(l_quantity) > 300", {"lineitem": "l_orderkey"}),
    ("topk_supp", "SELECT l_suppkey, sum(l_extendedprice) AS rev FROM lineitem GROUP BY l_suppkey "
                  "ORDER BY rev DESC LIMIT 10", {"lineitem": "l_suppkey"}),
    ("join_orders", "SELECT o.o_orderpriority, count(*) AS n FROM lineitem l JOIN orders o ON l.l_orderkey = "
                    "o.o_orderkey WHERE l.l_quantity > 49 GROUP BY o.o_orderpriority HAVING count(*) > 10",
     {"lineitem": "l_orderkey"}),
]


FLIGHT_QUERIES = [
    ("flights_having_flight", "SELECT flight, count(*) AS n FROM flights GROUP BY flight HAVING count(*) > 500",
     {"flights": "flight"}),
    ("flights_topk_dest", "SELECT dest, sum(distance) AS d FROM flights GROUP BY dest ORDER BY d DESC LIMIT 10",
     {"flights": "dest"}),
    ("flights_join_airlines", "SELECT f.carrier, count(*) AS n FROM flights f JOIN airlines a ON f.carrier = "
                              "a.carrier WHERE f.distance > 2000 GROUP BY f.carrier HAVING count(*) > 100",
     {"flights": "carrier"}),
]
QUERY_SETS = {"tpch": QUERIES, "flights": FLIGHT_QUERIES}


def _sizes(rows: int, sizes) -> list[int]:
    out = []
    for s in sizes:
        out.append(int(rows * float(s[:-1]) / 100) if isinstance(s, str) and s.endswith("%") else int(s))
    return out


def bench_maintain(ctx: Context, queries=QUERIES, sizes=(10, 100, 1000, 10000, "1%", "5%"),
                   kinds=("insert", "delete", "mixed"), fragments: int = 1000, console=None,
                   init_both: bool = True, repeat: int = 1, profiler=None, order: str = "phased",
                   recaptures: int = 1) -> list[dict]:
    """Run the benchmark; `profiler` (a ``cProfile.Profile``) is enabled around the incremental
    steps only (delta read + ``apply``), never the recaptures.

    `order`: "interleaved" recaptures right after each incremental step; "phased" first applies
    and maintains every batch of a query, then recaptures at each of those versions (the table is
    versioned), so neither side runs in the other's wake (the JVM's GC and JIT after a Spark job
    share the 2 cores with the next Python step). Each step's recapture time is the minimum of
    `recaptures` runs (a steadier, and lower, baseline)."""
    if order not in ("phased", "interleaved"):
        raise ValueError(f"order must be phased or interleaved, got {order!r}")
    cat = ctx.catalog
    out = []
    for name, sql, on in queries:
        q = parse_sql(sql, ctx.schema_lookup())
        versions = versions_now(cat, q)
        cap = capture(cat, q, on, fragments, versions)
        sk = cap.sketch
        sketched = sketched_scans(cat, q, sk)
        t0 = time.perf_counter()
        state = init_state(cat, sk, q, sketched)
        t_init = time.perf_counter() - t0
        t_init_rows, same_init = None, None
        if init_both:
            t0 = time.perf_counter()
            rows_state = init_state(cat, sk, q, sketched, use_bulk=False)
            t_init_rows = time.perf_counter() - t0
            same_init = rows_state.sketch() == state.sketch()
            del rows_state
        if console is not None:
            console.print(f"{name}: state initialisation {t_init:.2f}s (bulk)"
                          + (f" vs {t_init_rows:.2f}s row path, same sketch={same_init}" if init_both else "")
                          + f"; capture {cap.seconds:.2f}s")
        parts = {p.table: load_partition(cat.store, p.partition_id) for p in sk.parts}
        table = next(iter(on))
        cur = dict(versions)
        pending: list[tuple[dict, dict, set]] = []
        for step, (n, kind) in enumerate((n, kind) for n in _sizes(cat.version(table).rows, sizes)
                                          for _ in range(repeat) for kind in kinds):
            n_ins = n if kind == "insert" else (n // 2 if kind == "mixed" else 0)
            n_del = n if kind == "delete" else (n - n // 2 if kind == "mixed" else 0)
            ins, dels = batch_frames(cat, table, n_ins, n_del, seed=n * 7 + len(kind) + 1000 * step)
            v = cat.apply_frames(table, ins, dels).version
            new = dict(cur, **{table: v})
            if profiler is not None:
                profiler.enable()
            t0 = time.perf_counter()
            i_df, d_df = cat.delta_pandas(table, cur[table], v, columns=state.columns(table),
                                          where=state.delta_where(table))
            got = state.apply({table: (i_df, d_df)}, SparkBase(cat, sketched, cur, new))
            t_inc = time.perf_counter() - t0
            if profiler is not None:
                profiler.disable()
            frags = set().union(*got.values()) if got else set()
            rec = {"query": name, "step": step, "delta": n, "kind": kind, "t_incremental": t_inc,
                   "t_init": t_init, "t_init_rows": t_init_rows, "same_init": same_init, "t_capture0": cap.seconds,
                   "table_rows": cat.version(table).rows, "fragments": len(frags), "order": order}
            pending.append((rec, new, frags))
            cur = new
            if order == "interleaved":
                _recapture(cat, q, on, parts, pending, recaptures, out, console)
        _recapture(cat, q, on, parts, pending, recaptures, out, console)
    return out


def _recapture(cat: Catalog, q, on, parts, pending: list, recaptures: int, out: list, console) -> None:
    """Recapture at each pending step's version (best of `recaptures`), compare, record, print."""
    for rec, versions, frags in pending:
        t_cap, fresh = None, None
        for _ in range(recaptures):
            (fresh,), t = capture_batch(cat, [(q, on, parts)], versions)
            t_cap = t if t_cap is None else min(t_cap, t)
        same = frags == set(fresh.parts[0].fragments)
        rec.update(t_recapture=t_cap, speedup=t_cap / rec["t_incremental"] if rec["t_incremental"] else None,
                   same=same)
        out.append(rec)
        if console is not None:
            console.print(f"{rec['query']} {rec['kind']:6} {rec['delta']:>8,}: incremental {rec['t_incremental']:.3f}s, "
                          f"recapture {t_cap:.3f}s ({rec['speedup']:.1f}x) same={same}")
    pending.clear()


def summarise(results: list[dict], skip_first: int = 0) -> list[dict]:
    """Per (query, delta size): median incremental and recapture seconds, the median and minimum
    of the per-step ratios, and how many steps fell below 100x; each query's first `skip_first`
    steps (warm-up) are left out."""

    groups: dict[tuple, list[dict]] = {}
    for r in results:
        if r.get("step", 0) >= skip_first:
            groups.setdefault((r["query"], r["delta"]), []).append(r)
    out = []
    for (query, delta), rs in groups.items():
        ratios = [r["speedup"] for r in rs if r["speedup"] is not None]
        out.append({"query": query, "delta": delta, "steps": len(rs),
                    "t_incremental": statistics.median(r["t_incremental"] for r in rs),
                    "t_recapture": statistics.median(r["t_recapture"] for r in rs),
                    "ratio_median": statistics.median(ratios) if ratios else None,
                    "ratio_min": min(ratios) if ratios else None,
                    "below_100x": sum(1 for x in ratios if x < 100),
                    "all_same": all(r["same"] for r in rs)})
    return out


def break_even(results: list[dict]) -> dict:
    """Per query and kind: the smallest delta size at which incremental is not faster."""
    be = {}
    for r in results:
        key = (r["query"], r["kind"])
        if r["speedup"] is not None and r["speedup"] < 1 and key not in be:
            be[key] = r["delta"]
    return {f"{q}/{k}": v for (q, k), v in be.items()}


def bench_maintain_command(make_ctx, console, dataset: str = "tpch", sf: float = 0.1, sizes=("1000",),
                           kinds=("insert", "delete", "mixed"), repeat: int = 1, query_names=(),
                           row_init: bool = True, profile=None, order: str = "phased", recaptures: int = 1,
                           out_json=None) -> list[dict]:
    """`advisor bench maintain`: check the options (BadInput, exit 2, before Spark starts), load
    the dataset if missing, run, print the per-step lines, the summary and the break-even, and
    write `out_json` atomically. `make_ctx` returns the command's context (started lazily)."""


    if dataset not in QUERY_SETS:
        raise BadInput(f"--dataset must be one of {', '.join(QUERY_SETS)}, got {dataset!r}")
    known = [q[0] for q in QUERY_SETS[dataset]]
    for name in query_names:
        if name not in known:
            raise BadInput(f"unknown benchmark query {name!r} (choose from: {', '.join(known)})")
    parsed = []
    for s in sizes:
        num = s[:-1] if s.endswith("%") else s
        try:
            ok = float(num) > 0 if s.endswith("%") else int(num) > 0
        except ValueError:
            ok = False
        if not ok:
            raise BadInput(f"--size must be a positive row count or a percentage like 5%, got {s!r}")
        parsed.append(s if s.endswith("%") else int(s))
    for k in kinds:
        if k not in ("insert", "delete", "mixed"):
            raise BadInput(f"--kind must be insert, delete or mixed, got {k!r}")
    if order not in ("phased", "interleaved"):
        raise BadInput(f"--order must be phased or interleaved, got {order!r}")
    c = make_ctx()
    if dataset == "tpch" and not c.catalog.exists("lineitem"):
        load_dataset(c.catalog, "tpch", sf=sf)
    if dataset == "flights" and not c.catalog.exists("flights"):
        load_dataset(c.catalog, "flights")
    queries = [q for q in QUERY_SETS[dataset] if not query_names or q[0] in query_names]
    prof = None
    if profile is not None:

        prof = cProfile.Profile()
    res = bench_maintain(c, queries=queries, sizes=parsed, kinds=tuple(kinds), console=console,
                         init_both=row_init, repeat=repeat, profiler=prof, order=order, recaptures=recaptures)
    if prof is not None:

        prof.dump_stats(str(profile))
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(25)
    for s in summarise(res):
        console.print(f"{s['query']} delta {s['delta']:,}: incremental {s['t_incremental'] * 1000:.1f} ms, recapture "
                      f"{s['t_recapture']:.2f} s (medians); ratio median {_ratio(s['ratio_median'])}, min "
                      f"{_ratio(s['ratio_min'])}, {s['below_100x']} of {s['steps']} steps < 100x, "
                      f"same={s['all_same']}")
    console.print(f"break-even (first delta where incremental is not faster): {break_even(res) or 'none reached'}")
    if out_json:
        tmp = out_json.with_name(out_json.name + ".tmp")
        tmp.write_text(json.dumps(res, indent=2, default=str))
        tmp.replace(out_json)  # never a half-written file
    return res


def _ratio(x) -> str:
    return "-" if x is None else f"{x:.1f}x" if x < 10 else f"{x:.0f}x"
