"""`advisor bench ...`: the benchmark commands (side-by-side ratios and deterministic counters).

Kept apart from ``advisor.cli.main`` so the user-facing commands stay in one readable file; the CLI's
warehouse context is opened (``ctx()``) when a command runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from advisor.cli.common import STATE, ctx, out
from advisor.errors import BadInput, CheckFailed
from workloads.bench.suites import TPCH, TPCH_SF1

bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks (side-by-side ratios and counters).")

@bench_app.command("use")
def bench_use_cmd(sf: float = typer.Option(1.0, "--sf"), fragments: int = typer.Option(1000, "--fragments"),
                  reps: int = typer.Option(3, "--reps"), out_json: Optional[Path] = typer.Option(None, "--out"),
                  queries: List[str] = typer.Option([], "--query", help="only these suite queries (repeatable)")):
    """Plain vs sketched on the TPC-H suite (loads TPC-H at --sf into the warehouse if missing)."""
    # start-up time: imported when the benchmark runs (the CLI starts without Spark)
    from workloads.bench.use_speed import bench_use, render

    c, suite = _tpch_suite(ctx(), sf, queries)
    res = bench_use(c, suite, fragments, reps, out)
    render(out, res)
    if out_json:
        out_json.write_text(json.dumps(res, indent=2, default=str))


@bench_app.command("capture")
def bench_capture_cmd(sf: float = typer.Option(1.0, "--sf"),
                      fragments: int = typer.Option(10000, "--fragments"),
                      reps: int = typer.Option(3, "--reps", min=1),
                      out_json: Optional[Path] = typer.Option(None, "--out"),
                      queries: List[str] = typer.Option([], "--query",
                                                        help="only these suite queries (repeatable)")):
    """Capture by value against by fragment ids and the plain query, on the TPC-H suite of `bench use`."""
    # start-up time: imported when the benchmark runs (the CLI starts without Spark)
    from workloads.bench.capture_paths import bench_capture_paths, render

    c, suite = _tpch_suite(ctx(), sf, queries)
    res = bench_capture_paths(c, suite, fragments, reps)
    render(out, res)
    if out_json:
        out_json.write_text(json.dumps(res, indent=2, default=str))


def _tpch_suite(c, sf: float, queries: List[str]):
    """The warehouse context (TPC-H loaded at ``sf`` if missing) and the suite's queries named."""
    # start-up time: imported when the benchmark runs (the CLI starts without Spark)
    from workloads.data.datasets import load_dataset

    suite = TPCH_SF1 if sf >= 1 else TPCH
    unknown = sorted(set(queries) - {name for name, _, _ in suite})
    if unknown:
        raise BadInput(f"unknown benchmark query {', '.join(unknown)} "
                       f"(choose from: {', '.join(name for name, _, _ in suite)})")
    if not c.catalog.exists("lineitem"):
        load_dataset(c.catalog, "tpch", sf=sf)
    return c, [x for x in suite if not queries or x[0] in queries]


@bench_app.command("advice")
def bench_advice_cmd(sf: float = typer.Option(1.0, "--sf"), queries: int = typer.Option(300, "--queries"),
                     datasets: List[str] = typer.Option(["tpch", "flights", "crimes"], "--dataset"),
                     out_json: Optional[Path] = typer.Option(None, "--out"),
                     query_set: str = typer.Option("templates", "--set", help="templates (the paper's) or "
                                                   "shapes (selective shape families, sketches of 0.1-20 %)"),
                     thetas: List[float] = typer.Option([0.05, 0.10], "--theta", help="sample rates (repeatable)"),
                     uses: Optional[float] = typer.Option(None, "--uses", help="predicted uses behind go decisions"),
                     seed: int = typer.Option(0, "--seed")):
    """Accuracy of the cost-based advice vs the exhaustive oracle (OPT) on generated queries."""
    # start-up time: imported when the benchmark runs (the CLI starts without Spark)
    from workloads.bench.advice_accuracy import bench_advice_command

    bench_advice_command(ctx(), out, tuple(datasets), sf, queries, tuple(thetas), out_json, seed,
                         query_set=query_set, uses=uses)


@bench_app.command("maintain")
def bench_maintain_cmd(sf: float = typer.Option(0.1, "--sf"), out_json: Optional[Path] = typer.Option(None, "--out"),
                       dataset: str = typer.Option("tpch", "--dataset", help="tpch (lineitem) or flights."),
                       sizes: List[str] = typer.Option(["10", "100", "1000", "10000", "1%", "5%"], "--size"),
                       kinds: List[str] = typer.Option(["insert", "delete", "mixed"], "--kind"),
                       repeat: int = typer.Option(1, "--repeat", min=1, help="Rounds of every size x kind."),
                       query_names: List[str] = typer.Option([], "--query", help="having_orderkey | topk_supp | "
                                                              "join_orders (repeatable; default all)."),
                       row_init: bool = typer.Option(True, "--row-init/--no-row-init",
                                                     help="Also time the row-path state initialisation."),
                       profile: Optional[Path] = typer.Option(None, "--profile", help="Write a cProfile of the "
                                                              "incremental steps (pstats file) and print its top."),
                       order: str = typer.Option("phased", "--order", help="phased: all incremental steps of a "
                                                 "query, then a recapture at each version; interleaved: recapture "
                                                 "right after each step."),
                       recaptures: int = typer.Option(1, "--recaptures", min=1,
                                                      help="Recaptures per step; the fastest counts.")):
    """Incremental maintenance vs full recapture per delta size and kind (loads TPC-H at --sf, or flights, if missing)."""
    # start-up time: imported when the benchmark runs (the CLI starts without Spark)
    from workloads.bench.maintain_vs_recapture import bench_maintain_command

    bench_maintain_command(ctx, out, dataset=dataset, sf=sf, sizes=sizes, kinds=kinds, repeat=repeat,
                           query_names=query_names, row_init=row_init, profile=profile, order=order,
                           recaptures=recaptures, out_json=out_json)


@bench_app.command("startup")
def bench_startup_cmd(reps: int = typer.Option(5, "--reps", min=1),
                      out_json: Optional[Path] = typer.Option(None, "--out")):
    """Time to first result of `advisor run` vs bare PySpark on a trivial query (TPC-H SF 0.01)."""
    # start-up time: imported when the benchmark runs (the CLI starts without Spark)
    from workloads.bench.startup import bench_startup
    from workloads.data.datasets import load_dataset

    c = ctx()
    if not c.catalog.exists("nation"):
        load_dataset(c.catalog, "tpch", sf=0.01)
    res = bench_startup(c.warehouse, c.catalog.version("nation").base_path, reps)
    for k, v in res["median"].items():
        out.print(f"{k}: median {v:.2f} s over {res['reps']} runs ({', '.join(f'{x:.2f}' for x in res['seconds'][k])})")
    out.print(f"advisor run / bare pyspark: {res['ratio']:.2f}x; importing the CLI: {res['cli_import_seconds']:.2f} s")
    if out_json:
        out_json.write_text(json.dumps(res, indent=2))


@bench_app.command("fresh")
def bench_fresh_cmd(workload: Path = typer.Argument(..., help="Workload file whose templates to advise on."),
                    uses: Optional[float] = typer.Option(None, "--uses", help="Expected uses of each query."),
                    out_json: Optional[Path] = typer.Option(None, "--out")):
    """`recommend` on every template of WORKLOAD against the warehouse's tables as they are, then
    each sketch's exact size (one capture): how many small sketches the advice says go for."""
    # start-up time: imported when the benchmark runs (the CLI starts without Spark)
    from workloads.bench.fresh_advice import bench_fresh_advice

    res = bench_fresh_advice(ctx(), str(workload), uses=uses)
    for r in res["rows"]:
        sel = "-" if r["exact_selectivity"] is None else f"{r['exact_selectivity']:.2%}"
        out.print(f"{r['template']}: {r['table']}.{r['attr']} exact {sel}; "
                  f"{'GO' if r['go'] else 'no-go'}{' with a layout on ' + r['layout'] if r['layout'] else ''}"
                  f"; {r['reason'][:160]}", highlight=False, markup=False, soft_wrap=True)
    out.print(f"go for {res['go_among_small']} of {res['small']} queries whose exact sketch is <= 5 %")
    if out_json:
        out_json.write_text(json.dumps(res, indent=2, default=str))


@bench_app.command("copy")
def bench_copy_cmd(reps: int = typer.Option(3, "--reps", min=1),
                   full: bool = typer.Option(True, "--full/--no-full", help="Also build the full layout."),
                   out_json: Optional[Path] = typer.Option(None, "--out")):
    """A narrow copy's build against plain runs of the query it serves, beside a full layout (TPC-H
    loaded in the warehouse)."""
    # start-up time: imported when the benchmark runs (the CLI starts without Spark)
    from workloads.bench.copy_build import bench_copies, render

    res = bench_copies(ctx(), reps, full)
    render(out, res)
    if out_json:
        out_json.write_text(json.dumps(res, indent=2, default=str))


@bench_app.command("store")
def bench_store_cmd(sf: float = typer.Option(0.1, "--sf"), batches: int = typer.Option(5, "--batches", min=0),
                    inserts: int = typer.Option(1000, "--inserts", min=0), deletes: int = typer.Option(200, "--deletes", min=0),
                    reps: int = typer.Option(3, "--reps", min=1), out_json: Optional[Path] = typer.Option(None, "--out")):
    """The warehouse's own versioned store against a Delta table of the same rows: use, maintenance per batch."""
    # start-up time: imported when the benchmark runs (the CLI starts without Spark)
    from workloads.bench.delta_store import bench_store, render

    res = bench_store(ctx(), sf, batches, inserts, deletes, reps, out)
    render(out, res)
    if out_json:
        out_json.write_text(json.dumps(res, indent=2, default=str))


@bench_app.command("recursive")
def bench_recursive_cmd(nodes: int = typer.Option(1000, "--nodes", help="Topology size for the maintenance part."),
                        seed: int = typer.Option(7, "--seed"),
                        batches: int = typer.Option(3, "--batches", min=1, help="Deletion batches (then as many "
                                                    "recovery batches)."),
                        per_batch: int = typer.Option(2, "--links", min=1, help="Bidirectional links per batch."),
                        spark_nodes: int = typer.Option(1000, "--spark-nodes", help="Topology size for plain vs "
                                                        "sketched on Spark (0: skip)."),
                        reps: int = typer.Option(2, "--reps", min=1),
                        out_json: Optional[Path] = typer.Option(None, "--out")):
    """Recursive views under link failures and recoveries: absorption vs DRed vs recomputation per
    batch on topologies of density 1, 2 and 4 and the airports graph, the policy's pick; recursive
    queries plain vs sketched on Spark."""
    # start-up time: imported when the benchmark runs (the CLI starts without Spark)
    from workloads.bench.recursive import bench_recursive

    res = bench_recursive(ctx() if spark_nodes else None, out, nodes=nodes, seed=seed, batches=batches,
                          per_batch=per_batch, spark_nodes=spark_nodes, reps=reps)
    if out_json:
        out_json.write_text(json.dumps(res, indent=2, default=str))


@bench_app.command("dashboard")
def bench_dashboard_cmd(sf: float = typer.Option(1.0, "--sf"),
                        fresh: bool = typer.Option(False, "--fresh", help="Write the Delta tables again."),
                        bare: bool = typer.Option(True, "--bare/--no-bare", help="Also answer every step with "
                                                  "plain Spark on the same tables (time travel) and compare."),
                        out_json: Optional[Path] = typer.Option(None, "--out")):
    """A dashboard over TPC-H lineitem and orders written as Delta tables by plain Spark, another
    writer's commits between its segments: NO-PS against CB-OPT-GB at default settings, each in a
    process of its own (tables kept below WAREHOUSE/bench-dashboard/sfSF)."""
    # start-up time: imported when the benchmark runs (the CLI starts without Spark)
    from workloads.bench.delta_dashboard import bench_dashboard, render

    res = bench_dashboard(STATE, ctx(), sf, fresh, bare, lambda msg: out.print(f"[{msg}]", highlight=False))
    render(out, res)
    if out_json:
        out_json.write_text(json.dumps(res, indent=2, default=str))
    if res["answers_equal"] != res["queries"] or res.get("answers_equal_bare_spark", res["queries"]) != res["queries"]:
        raise CheckFailed("an answer differs from the plain run's")
