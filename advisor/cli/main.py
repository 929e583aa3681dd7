"""The `advisor` command line (typer). Exit codes: 0 ok, 1 failed check, 2 bad input."""

from __future__ import annotations

import json
import os
import sys
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from advisor.cli.bench import bench_app
from advisor.cli.common import STATE, ctx, emit_json, log_path, out
from advisor.cli.data import data_app, part_app
from advisor.errors import BadInput, CheckFailed
from advisor.memory import budget_bytes
from advisor.warehouse.sketch_records import all_sketches
from reports.schema import RunFormatError, load_run
from workloads.replay.lockstep import ENV as GATE_ENV

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Provenance-sketch advisor: make repeated HAVING/top-k queries on Spark skip data.")
app.add_typer(data_app, name="data")
app.add_typer(part_app, name="partitions")
app.add_typer(bench_app, name="bench")


@app.callback()
def _globals(warehouse: Optional[str] = typer.Option(None, "--warehouse", help="Warehouse directory or Hadoop file system URI (hdfs://, s3a://; default ./.advisor or $ADVISOR_HOME)."),
             master: Optional[str] = typer.Option(None, "--master", help="Spark master URL (default $SPARK_MASTER or local[*])."),
             conf: List[str] = typer.Option([], "--conf", help="Spark setting key=value (repeatable)."),
             verbose: bool = typer.Option(False, "--verbose", help="Show Spark's own output and full error "
                                          "traces on the terminal (default: WAREHOUSE/logs/advisor.log).")):
    # start-up time: advisor.engine brings Spark; imported when a command is given
    from advisor.engine.session import parse_conf

    STATE.clear()  # in-process callers (tests) may invoke the app several times
    STATE.update(warehouse=warehouse, master=master, conf=parse_conf(conf), verbose=verbose)
    budget_bytes()  # a malformed $ADVISOR_DRIVER_CACHE_MB fails here, before any work


# ---------------- layout ----------------
@app.command("layout")
def layout_cmd(table: str, attr: str, rows_per_file: int = typer.Option(1_000_000, "--rows-per-file"),
               then: Optional[str] = typer.Option(None, "--then", help="Second sort column within ATTR.")):
    """Write a copy of TABLE clustered on ATTR (then --then) with a per-file min/max manifest."""
    # start-up time: imported when the command runs (the CLI starts without Spark)
    from advisor.layout.clustered_copy import build_layout

    if rows_per_file < 1:
        raise BadInput(f"--rows-per-file must be >= 1, got {rows_per_file}")
    lay = build_layout(ctx().catalog, table, attr, rows_per_file=rows_per_file, then=then)
    out.print(f"layout {lay['id']}: {lay['table']} clustered on {lay['attr']}, {len(lay['manifest'])} files")


# ---------------- queries ----------------
def _parse(sql: str):
    # start-up time: imported when the command runs (the CLI starts without Spark)
    from advisor.plan.parse import parse_sql

    return parse_sql(sql, ctx().schema_lookup())


def _on(spec: List[str]) -> dict[str, str]:
    res = {}
    for s in spec:
        if "." not in s:
            raise BadInput(f"--on expects TABLE.ATTR, got {s!r}")
        t, a = s.lower().split(".", 1)
        res[t] = a
    return res


@app.command("explain")
def explain_cmd(sql: str, as_json: bool = typer.Option(False, "--json")):
    """Plan, candidate attributes with safety verdicts and reasons, usable stored sketches."""
    # start-up time: imported when the command runs (the CLI starts without Spark)
    from advisor.cli.explain import explain, render

    info = explain(ctx(), sql)
    if as_json:
        return emit_json(info)
    render(out, info)


@app.command("capture")
def capture_cmd(sql: str, on: List[str] = typer.Option(..., "--on", help="TABLE.ATTR to sketch (repeatable)."),
                fragments: int = typer.Option(1000, "--fragments"),
                as_json: bool = typer.Option(False, "--json")):
    """Capture the provenance sketch of SQL on the given attribute(s)."""
    # start-up time: imported when the command runs (the CLI starts without Spark)
    from advisor.sketch.capture import capture
    from advisor.sketch.lookup import sketch_rows

    q = _parse(sql)
    c = ctx()
    res = capture(c.catalog, q, _on(on), fragments)
    total = sum(c.catalog.version(p.table, res.sketch.data_versions[p.table]).rows for p in res.sketch.parts)
    sel = sketch_rows(c.catalog, res.sketch) / max(1, total)
    rec = {"sketch": res.sketch.to_json(), "seconds": round(res.seconds, 4), "selectivity": round(sel, 6),
           "safety": res.verdicts}
    if as_json:
        return emit_json(rec)
    for p in res.sketch.parts:
        out.print(f"sketch {res.sketch.id}: {p.table}.{p.attr} {len(p.fragments)} fragment(s)")
    out.print(f"selectivity {sel:.2%} of the rows; capture took {res.seconds:.2f}s")


@app.command("run")
def run_cmd(sql: Optional[str] = typer.Argument(None, help="The query (or --file)."),
            file: Optional[Path] = typer.Option(None, "--file", help="Run every query of FILE in one process: "
                                                "statements separated by ';', or JSON lines {\"sql\", \"at\"}."),
            use: bool = typer.Option(True, "--use/--no-use", help="Use sketches at all (--no-use: a plain run)."),
            advise: bool = typer.Option(True, "--advise/--no-advise",
                                        help="Without a usable stored sketch, decide by cost whether to capture one."),
            strategy: str = typer.Option("CB-OPT-GB", "--strategy", help="Selection strategy of the advice."),
            uses: Optional[float] = typer.Option(None, "--uses", help="How many more times this query is expected to run."),
            compare: bool = typer.Option(False, "--compare", help="--file: also run each query plainly and compare."),
            as_json: bool = typer.Option(False, "--json", help="Result and decision record as JSON."),
            limit_rows: int = typer.Option(50, "--show"),
            as_of: List[str] = typer.Option([], "--as-of", help="TABLE=VERSION: read an older version."),
            copy_budget: Optional[float] = typer.Option(None, "--copy-budget", help="MB the advisor's copies may take "
                                                        "(least predicted saving dropped first).")):
    """Run SQL through the advise path: reuse a sketch, or capture one when the cost model says it
    pays; prints the rows and one line saying what happened and why."""
    # start-up time: imported when the command runs (the CLI starts without Spark)
    from advisor.cli.run_queries import run_file, run_one
    from advisor.serve.settings import AdviseSettings

    if (sql is None) == (file is None):
        raise BadInput("give either a query or --file FILE")
    s = AdviseSettings(strategy=strategy, use=use, advise=advise, uses=uses, copy_budget_mb=copy_budget)
    if file is not None:
        if as_of:
            raise BadInput("--as-of applies to a single query, not to --file")
        return run_file(ctx(), out, file, s, compare, as_json, limit_rows)
    run_one(ctx(), out, sql, s, as_of, as_json, limit_rows)


@app.command("sketches")
def sketches_cmd(as_json: bool = typer.Option(False, "--json")):
    """Stored sketches."""
    sk = all_sketches(ctx().store)
    if as_json:
        return emit_json([s.to_json() for s in sk])
    tab = Table("id", "parts", "data versions", "how", "parent", "sql")
    for s in sk:
        tab.add_row(str(s.id), "; ".join(f"{p.table}.{p.attr}: {len(p.fragments)} frags" for p in s.parts),
                    json.dumps(s.data_versions), s.how, str(s.parent_id or ""), s.sql[:60])
    out.print(tab)


@app.command("calibrate")
def calibrate_cmd(as_json: bool = typer.Option(False, "--json")):
    """Measure one Spark job's fixed cost (a probe query over 64 rows) and store it for the cost model."""
    # start-up time: imported when the command runs (the CLI starts without Spark)
    from advisor.calibration.measured_costs import calibrate
    from advisor.calibration.probe import record_probe

    c = ctx()
    rec = record_probe(c)
    cal = calibrate(c.store)
    info = {"probe": rec, "fixed_s": cal.fixed_s, "per_row_s": cal.per_row_s, "source": cal.source}
    if as_json:
        return emit_json(info)
    out.print(f"job fixed cost {rec['seconds']:.3f} s (probe runs {rec['runs']} s); cost model: "
              f"{cal.fixed_s:.3f} s + {cal.per_row_s * 1e6:.3f} s per M rows ({cal.source})")


@app.command("recommend")
def recommend_cmd(sql: str, strategy: str = typer.Option("CB-OPT-GB", "--strategy"),
                  sample_rate: float = typer.Option(0.05, "--sample-rate", help="theta: sample share per stratum."),
                  method: str = typer.Option("bootstrap", "--method", help="bootstrap | clt | exact (group-by candidates sized by one capture job)"),
                  fragments: Optional[int] = typer.Option(None, "--fragments", help="Fix the granularity."),
                  do_capture: bool = typer.Option(False, "--capture", help="Capture the pick if the verdict is go."),
                  uses: Optional[float] = typer.Option(None, "--uses", help="How many more times this query is expected to run."),
                  as_json: bool = typer.Option(False, "--json")):
    """What-if: estimated sketch size +- CI per candidate, the pick, go/no-go (nothing captured by default)."""
    # start-up time: imported when the command runs (the CLI starts without Spark)
    from advisor.selection.recommend import recommend_command

    rec = recommend_command(ctx(), out, sql, strategy, sample_rate, as_json, do_capture, fragments, method, uses)
    if as_json:
        emit_json(rec)


@app.command("maintain")
def maintain_cmd(policy: Optional[str] = typer.Option(None, "--policy",
                                                      help="Set the policy: eager | lazy | batched:N[,Ts] | arrival."),
                 sketch: Optional[int] = typer.Option(None, "--sketch", help="Maintain only this sketch."),
                 all_: bool = typer.Option(True, "--all/--none", help="Maintain every stale sketch now."),
                 as_json: bool = typer.Option(False, "--json")):
    """Set the maintenance policy and bring stale sketches up to date incrementally (IMP)."""
    # start-up time: imported when the command runs (the CLI starts without Spark)
    from advisor.maintain.policy.triggers import policy_spec, set_policy
    from advisor.maintain.spark.service import maintain_sketch, stale_heads

    c = ctx()
    if policy is not None:
        set_policy(c.store, policy)
    if sketch is not None:
        results = [maintain_sketch(c.catalog, sketch)]
    elif all_:
        results = [maintain_sketch(c.catalog, s.id) for s in stale_heads(c.catalog)]
    else:
        results = []
    rec = {"policy": policy_spec(c.store), "maintained": [r.to_json() for r in results]}
    if as_json:
        return emit_json(rec)
    out.print(f"policy: {rec['policy']}")
    for r in results:
        ch = "; ".join(f"{t}: +{len(a)} -{len(d)} fragments" for t, (a, d) in r.changed.items())
        out.print(f"sketch {r.old_id} -> {r.new_id}: {r.how} over {r.delta_rows:,} delta rows in {r.seconds:.2f}s ({ch})")
    if not results:
        out.print("every sketch is current")


@app.command("replay")
def replay_cmd(workload: Path,
               strategies: Optional[str] = typer.Option(None, "--strategies",
                                                        help="Comma-separated, e.g. NO-PS,CB-OPT-GB (default: the file's)."),
               out_dir: Optional[Path] = typer.Option(None, "--out", help="Run directory (default WAREHOUSE/runs/NAME)."),
               fresh: bool = typer.Option(False, "--fresh", help="Discard an existing run directory instead of resuming."),
               report: bool = typer.Option(True, "--report/--no-report", help="Write report.html at the end."),
               isolate: bool = typer.Option(False, "--isolate",
                                            help="Run each strategy in its own process (a fresh JVM), all "
                                                 "released in lockstep: step i of every strategy before "
                                                 "step i+1 of any, one at a time.")):
    """Replay a workload file end to end for each strategy; writes a run directory (resumable)."""
    # start-up time: imported when the command runs (the CLI starts without Spark)
    from workloads.replay.runner import PREPARE_ONLY, prepare_run, replay, replay_isolated

    if os.environ.get(PREPARE_ONLY) and out_dir is not None:  # the preparing child of --isolate
        return prepare_run(ctx(), str(workload), str(out_dir))
    strats = [s for s in strategies.split(",") if s.strip()] if strategies else None
    if isolate:
        replay_isolated(STATE, str(workload), strats, out_dir, fresh, console=Console(stderr=True))
    run_dir = replay(ctx(), str(workload), strats, str(out_dir) if out_dir else None, fresh and not isolate,
                     console=out)
    if os.environ.get(GATE_ENV):  # a lockstep child of --isolate: the parent prints the one summary
        return
    _print_run(run_dir, report)


def _print_run(run_dir: Path, report: bool) -> None:
    """Summary table of a finished run (and the report's path)."""
    doc = load_run(run_dir)
    sm = doc["summary"]
    tab = Table("strategy", "queries", "cumulative s", "vs NO-PS", "rows read", "captured", "reused", "no-go",
                "mean real sel.", title=f"replay {doc['workload']['name']}")
    for s, p in sm["per_strategy"].items():
        tab.add_row(s, str(p["queries"]), f"{p['cumulative_seconds']:.1f}",
                    "-" if p["vs_no_ps"] is None else f"{p['vs_no_ps']:.2f}x", f"{p['rows_read']:,}",
                    str(p["captured"]), str(p["reused"]), str(p["no_go"]),
                    "-" if p["mean_real_selectivity"] is None else f"{p['mean_real_selectivity']:.1%}")
    out.print(tab)
    for base, d in (sm.get("draws") or {}).items():
        if d["mean_vs_no_ps"] is not None:
            out.print(f"{base} over {len(d['draws'])} draws: mean {d['mean_vs_no_ps']:.3f}x of NO-PS "
                      f"({d['min_vs_no_ps']:.3f}x-{d['max_vs_no_ps']:.3f}x), "
                      f"mean rows read {d['mean_rows_read']:,}")
    released = {s: p["heap_releases"] for s, p in sm["per_strategy"].items() if p.get("heap_releases")}
    if released:
        out.print("memory ran short: query steps timed after the JVM gave heap back (they include its "
                  "regrowth, ~2-4 s each at SF1): " + ", ".join(f"{s} {n}" for s, n in released.items()))
    resumed = sum(1 for q in doc["queries"] if q.get("resumed"))
    if resumed:
        out.print(f"warning: {resumed} query step(s) were timed in a resumed process (another JVM): their "
                  "seconds and the time ratios compare runs of different processes; counters are unaffected")
    out.print(f"answers identical across strategies: {'yes' if sm['answers_identical'] else 'NO'}; "
              f"maintained sketches equal to recapture: {'yes' if sm['maintained_equal_to_recapture'] else 'NO'}")
    out.print(f"run directory: {run_dir}")
    if report:
        # start-up time: imported when the command runs (the CLI starts without Spark)
        from reports.html import write_report

        out.print(f"report: {write_report(run_dir)}")
    if not sm["answers_identical"] or not sm["maintained_equal_to_recapture"]:
        raise CheckFailed("a strategy returned a different answer or a maintained sketch differs from recapture")


@app.command("report")
def report_cmd(run_dir: Path, out_file: Optional[Path] = typer.Option(None, "--out", help="Default RUN_DIR/report.html.")):
    """Write a self-contained report.html (renders offline) for a replay run directory."""
    # start-up time: imported when the command runs (the CLI starts without Spark)
    from reports.html import write_report

    try:
        path = write_report(run_dir, out_file)
    except RunFormatError as e:
        raise BadInput(str(e)) from None
    out.print(f"report: {path}")


@app.command("gate")
def gate_cmd(run: Path, baseline: Path = typer.Option(..., "--baseline"),
             max_regression: str = typer.Option("10%", "--max-regression"),
             as_json: bool = typer.Option(False, "--json")):
    """CI gate: compare a run's deterministic counters with a baseline run; exit 1 on regression."""
    # start-up time: imported when the command runs (the CLI starts without Spark)
    from reports.gate import gate_command

    try:
        return gate_command(str(run), str(baseline), max_regression, out, json_output=as_json)
    except ValueError as e:  # RunFormatError, GateInputError, a bad threshold
        raise BadInput(str(e)) from None


@app.command("demo")
def demo_cmd(out_dir: Optional[Path] = typer.Option(None, "--out", help="Run directory (default WAREHOUSE/runs/demo).")):
    """The main job: replay the demo workload (CB-OPT-GB vs NO-PS, with updates) and write the report."""
    # start-up time: imported when the command runs (the CLI starts without Spark)
    from advisor.cli.demo import closing, run_demo

    lines, passed = closing(run_demo(ctx(), STATE, out, out_dir))
    for line in lines:
        out.print(line, highlight=False)
    if not passed:
        raise CheckFailed("a strategy returned a different answer or a maintained sketch differs from recapture")


def main(argv: Optional[List[str]] = None) -> None:
    try:
        rv = app(args=argv, standalone_mode=False)
    except BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except CheckFailed as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except typer.Abort:
        sys.exit(130)
    except Exception as e:  # click's UsageError (typer vendors click; its module path is private)
        if type(e).__name__ in ("UsageError", "BadParameter", "NoSuchOption", "MissingParameter",
                                "BadArgumentUsage", "BadOptionUsage") and hasattr(e, "show"):
            e.show()
            sys.exit(2)
        if STATE.get("verbose") or isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        print(f"error: {failure_line(e)} (details: {log_failure(e)})", file=sys.stderr)
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)


def failure_line(e: BaseException) -> str:
    """One line for an unexpected failure: Spark's own message when the JVM raised it, else the
    exception's type and first line.

    >>> failure_line(ValueError("bad value\\nmore"))
    'ValueError: bad value'
    """
    java = getattr(e, "java_exception", None)
    text = str(java.toString()) if java is not None else (str(e) or type(e).__name__)
    first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
    return first if java is not None or first.startswith(type(e).__name__) else f"{type(e).__name__}: {first}"


def log_failure(e: BaseException) -> str:
    """Append the failure's traceback to the command log; return the log's path."""
    path = log_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write(f"--- {datetime.now(timezone.utc).isoformat()} advisor {' '.join(sys.argv[1:])}\n")
            f.write("".join(traceback.format_exception(e)))
    except OSError:
        return "not written: the log directory is not writable"
    return str(path)


if __name__ == "__main__":
    main()
