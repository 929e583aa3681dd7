"""`advisor replay WORKLOAD`: run a workload end to end for several strategies, side by side.

Run directory layout::

    RUN/plan.json            the prepared steps (bindings, batch versions); written once, atomically
    RUN/warehouse/           the run's own data: datasets as loaded plus every update batch
    RUN/strategies/<S>/      one sketch store per strategy (a copy of the data warehouse's SQLite
                             file: same tables, versions, partitions and layouts; its own sketches,
                             samples, maintenance state and run history)
    RUN/warmup/<S>/          scratch stores of the untimed warm-up (``warmup: N``; deleted after it)
    RUN/log.jsonl            one line per finished step and strategy (the resume log)
    RUN/run.json             the run log of ``reports/schema.py``, rewritten after every strategy

Fairness: all update batches are applied once, up front, while preparing; each strategy then starts
with every table pinned at its first version and moves a pin forward at each update step
(``Catalog.pin``), so all strategies see the same versions in the same order and batch writing is
charged to none of them.  Imported tables (``import:`` datasets) are imported while preparing; a
Delta table is read in place and never written: its recorded commits are the versions the pins
move through (``delta_history``).  An interrupted replay resumes from ``log.jsonl``: finished steps
are not run again; a step cut off half-way may have left a sketch in that strategy's store, which
later steps may reuse (correctness is unaffected; its counters may differ from an uninterrupted run).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pyspark
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from advisor.calibration.probe import record_probe
from advisor.context import Context
from advisor.engine.session import DEFAULT_CONF
from advisor.errors import BadInput, Unsupported
from advisor.layout.clustered_copy import build_layout
from advisor.plan.parse import parse_sql
from advisor.selection.strategies import strategy_draw, unknown_strategy
from advisor.warehouse.catalog import Catalog
from advisor.warehouse.column_stats import column_stats
from advisor.warehouse.imports import import_table
from workloads.data.datasets import TABLES as DATASET_TABLES, load_dataset
from workloads.data.external import vega_file
from workloads.data.update_batches import batch_frames
from workloads.replay.heap_release import HeapKeeper
from workloads.replay.lockstep import Gate, available_bytes, memory_warning, run_lockstep
from workloads.replay.run_places import RunPlaces
from workloads.replay.run_summary import summarize
from workloads.replay.step_list import plan_steps
from workloads.replay.strategy_pass import ReplayLog, ReplayState, replay_strategy
from workloads.replay.workload_file import load_workload
from workloads.replay.workload_model import Workload


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


def _java() -> str:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=20)
        return (out.stderr or out.stdout).splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def environment(spark) -> dict:


    return {"advisor": version("sketch-advisor"), "python": sys.version.split()[0], "pyspark": pyspark.__version__,
            "java": _java(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "master": spark.sparkContext.master, "started": _now(), "finished": None}


def prepare(ctx_factory: RunPlaces, wl: Workload, run_dir: Path, progress) -> dict:
    """Load data, build layouts and table statistics, draw the steps, apply every batch; returns (and
    writes) plan.json.  ``ctx_factory`` makes the contexts over the run's warehouses (``run_places``)."""

    plan_path = run_dir / "plan.json"
    if plan_path.exists():
        plan = json.loads(plan_path.read_text())
        if plan.get("sha256") == wl.sha256 and plan.get("plan_sha256") == wl.plan_sha256:
            return plan
        if plan.get("sha256") == wl.sha256:
            raise BadInput(f"{run_dir} was prepared from other inputs (the workload's query log or change files "
                           "changed since); pass a new --out or --fresh")
        if plan.get("plan_sha256") != wl.plan_sha256:
            raise BadInput(f"{run_dir} holds a replay of a different workload file; pass a new --out or --fresh")
        log = run_dir / "log.jsonl"
        if log.exists() and log.stat().st_size > 0:
            raise BadInput(f"{run_dir} holds a partial replay of another version of this workload file "
                           "(same data and steps, other settings); pass a new --out or --fresh")
        # the same data and steps: the prepared directory serves this file's settings from now on
        plan["sha256"] = wl.sha256
        _write_json(plan_path, plan)
        return plan
    wh = run_dir / "warehouse"
    ctx_factory.remove_all()  # an interrupted preparation: start it over
    ctx_factory.remove(wh)
    ctx = ctx_factory(wh)
    cat = ctx.catalog
    secs, datasets = {}, []
    t0 = time.perf_counter()
    history = {u.table for u in wl.updates if u.delta_history}
    for d in wl.datasets:
        if "import" in d:
            progress(f"importing {d['import']}")
            datasets.append(_import(cat, wl, d, d["import"] in history))
            continue
        progress(f"loading {d['name']}")
        counts = load_dataset(cat, d["name"], sf=float(d.get("sf", 0.1)), rows=int(d.get("rows", 100_000)),
                              seed=int(d.get("seed", 7)), nodes=int(d.get("nodes", 100)),
                              density=float(d.get("density", 2.0)), radius_km=float(d.get("radius_km", 100.0)),
                              tables=_tables_needed(wl, d["name"]))
        datasets.append({"name": d["name"], "sf": d.get("sf"), "tables": counts})
    secs["load"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for t, a in wl.layouts:
        progress(f"clustering {t} by {a}")
        cat.column_type(cat.require(t), a)
        build_layout(cat, t, a, rows_per_file=wl.layout_rows_per_file)
    secs["layouts"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for t in wl.tables_read(cat.tables()):  # statistics, as ANALYZE TABLE keeps them, of the tables queried
        progress(f"statistics of {t}")
        column_stats(cat, t)
    secs["statistics"] = time.perf_counter() - t0
    if wl.measured_costs:  # one job's fixed cost, for every strategy's cost model (advisor.calibration.probe)

        progress("probing a Spark job's fixed cost")
        t0 = time.perf_counter()
        record_probe(ctx)
        secs["probe"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    progress("drawing bindings")
    initial = {t: cat.current_version(t) for t in cat.tables()}
    commits = {u.table: _delta_commits(cat, wl, u, initial) for u in wl.updates if u.delta_history}
    steps = plan_steps(cat, wl, {j: len(commits[u.table]) for j, u in enumerate(wl.updates) if u.delta_history})
    _check_templates(ctx, wl, steps)
    secs["bindings"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    n_up = sum(1 for s in steps if s["kind"] == "update")
    for j, s in enumerate(s for s in steps if s["kind"] == "update"):
        if not cat.exists(s["table"]):
            raise BadInput(f"{wl.path}: update of unknown table {s['table']!r}")
        if s.get("delta"):  # the next recorded commit: nothing to write
            v = commits[s["table"]].pop(0)
            s.update(version=v.version, inserts=v.n_ins, deletes=v.n_del)
            continue
        if "file" in s:
            progress(f"applying change file {j + 1}/{n_up} ({s['table']}: {Path(s['file']).name})")
            v = _apply_change_file(cat, wl, s)
            s.update(version=v.version, inserts=v.n_ins, deletes=v.n_del)
            continue
        progress(f"writing update batch {j + 1}/{n_up} ({s['table']})")
        ins, dels = batch_frames(cat, s["table"], s["inserts"], s["deletes"], seed=wl.seed * 7919 + s["step"])
        s["version"] = cat.apply_frames(s["table"], ins, dels).version
    secs["batches"] = time.perf_counter() - t0
    plan = {"sha256": wl.sha256, "plan_sha256": wl.plan_sha256, "steps": steps, "initial_versions": initial,
            "datasets": datasets, "prepare_seconds": {k: round(v, 3) for k, v in secs.items()}}
    ctx.store.close()
    _write_json(plan_path, plan)
    return plan


def _tables_needed(wl: Workload, dataset: str) -> list[str] | None:
    """The generated dataset's tables the workload reads, updates or lays out (None: all of them).  A
    dashboard over lineitem need not wait for TPC-H's other seven tables to be generated and stored."""
    if dataset != "tpch":
        return None
    known = list(DATASET_TABLES["tpch"])
    needed = set(wl.tables_read(known)) | {t for t, _ in wl.layouts}
    return [t for t in known if t in needed] or None


def _check_templates(ctx: Context, wl: Workload, steps: list[dict]) -> None:
    """Every template's first instance must parse against the loaded tables (or be a supported
    fallback): unknown tables or columns are a workload error, reported before anything runs (a
    query log's statement by its line in the log)."""

    seen = set()
    for s in steps:
        if s["kind"] != "query" or s["template"] in seen:
            continue
        seen.add(s["template"])
        try:
            parse_sql(s["sql"], ctx.schema_lookup())
        except Unsupported:
            pass  # runs without a sketch; the record says why
        except BadInput as e:
            if "line" in s:
                raise BadInput(f"{wl.query_log}:{s['line']}: {e}") from None
            t = wl.templates[s["template"]]
            raise BadInput(f"{wl.path}:{t.line}: template '{t.name}': {e}") from None


def _import(cat: Catalog, wl: Workload, d: dict, history: bool) -> dict:
    """Import one ``import:`` dataset (``advisor.warehouse.imports``); returns its plan entry.  A
    Delta table stays pinned at the imported version while preparing (statistics and quantiles
    read it there); with ``history`` it is imported at its first version (``as_of``, default 0)."""
    as_of = d["as_of"] if d["as_of"] is not None or not history else 0
    path = str(vega_file(d["vega"])) if d["vega"] else d["path"]
    try:
        v = import_table(cat, d["import"], path, d["format"], table=d["table"], schema=d["schema"], key=d["key"],
                         as_of=as_of)
    except BadInput as e:
        raise BadInput(f"{wl.path}:{d['line']}: key 'datasets': import {d['import']}: {e}") from None
    if v.kind == "delta":
        cat.pin(v.table, v.version)
    elif history:
        raise BadInput(f"{wl.path}:{d['line']}: key 'datasets': import {d['import']}: delta_history needs a Delta "
                       f"table, and {d['table'] or path} is not one")
    where = {"table": d["table"]} if d["table"] else {"path": path, "format": d["format"]}
    return {"name": v.table, "sf": None, "tables": {v.table: v.rows},
            "import": where | {"version": v.version, "kind": v.kind}}


def _delta_commits(cat: Catalog, wl: Workload, u, initial: dict) -> list:
    """The versions a ``delta_history`` rule replays: the table's commits after its imported one."""
    if not cat.is_delta(u.table):
        raise BadInput(f"{wl.path}:{u.line}: key 'updates': table {u.table} is not a Delta table read in place")
    pin = cat.pins.pop(u.table, None)  # list every recorded commit, not only those up to the pin
    try:
        return [v for v in cat.versions(u.table) if v.version > initial[u.table]]
    finally:
        if pin is not None:
            cat.pins[u.table] = pin


def _apply_change_file(cat: Catalog, wl: Workload, s: dict):
    """Apply one change file of a ``changes:`` rule; a bad file is BadInput naming it and the rule."""
    j, rule = next((j, u) for j, u in enumerate(wl.updates) if u.changes and s["file"] in u.changes)
    where = f"{wl.path}:{rule.line}: key 'updates.{j}.changes'"
    try:
        return cat.apply_batch(s["table"], s["file"])
    except BadInput as e:
        msg = str(e) if s["file"] in str(e) else f"change file {s['file']}: {e}"
        raise BadInput(f"{where}: {msg}") from None
    except Exception as e:  # noqa: BLE001 - Spark refusing the file's values while writing: one line
        raise BadInput(f"{where}: change file {s['file']}: {str(e).strip().splitlines()[0][:200]}") from None


def _read_log(path: Path) -> list[dict]:
    out = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                break  # a line cut off by the interruption: everything after it is redone
    return out


def unfinished(run_dir: Path, strategies: list[str]) -> list[str]:
    """The strategies that still have a step to run in ``run_dir`` (all of them before it is prepared):
    a finished strategy's process exits at once on a resumed run, so it needs no memory."""
    plan_path = run_dir / "plan.json"
    if not plan_path.exists():
        return list(strategies)
    try:
        steps = [st["step"] for st in json.loads(plan_path.read_text())["steps"]]
    except (ValueError, KeyError, TypeError):
        return list(strategies)  # a damaged plan is reported by ``prepare``; count every strategy here
    done = {(r.get("strategy"), r.get("step")) for r in _read_log(run_dir / "log.jsonl")}
    return [s for s in strategies if any((s, st) not in done for st in steps)]


def child_argv(options: dict) -> list[str]:
    """The ``advisor`` command with the global options (warehouse, master, conf) of this invocation."""
    argv = [sys.executable, "-m", "advisor.cli"]
    if options.get("warehouse"):
        argv += ["--warehouse", str(options["warehouse"])]
    if options.get("master"):
        argv += ["--master", options["master"]]
    for k, v in (options.get("conf") or {}).items():
        argv += ["--conf", f"{k}={v}"]
    if options.get("verbose"):
        argv.append("--verbose")
    return argv


def replay_isolated(options: dict, workload_path: str, strategies: list[str] | None, out, fresh: bool,
                    console=None) -> None:
    """Run each strategy's replay in a child process of its own (``options``: the CLI's global options),
    all into the same run directory, released in lockstep (``workloads.replay.lockstep``): step i of every
    strategy runs before step i + 1 of any, one process at a time.

    A shared JVM measures strategies unalike (a later one inherits the earlier ones' compiled code
    and caches), and strategies run one after another are timed minutes apart on a machine whose
    speed drifts (BENCHMARKS.md).  The caller then replays once more in-process,
    which finds every step done and writes ``run.json``."""


    wl = load_workload(workload_path)
    strats = [s.strip().upper() for s in (strategies or wl.strategies)]
    if out is None:
        raise BadInput("--isolate needs --out: the child processes must share one run directory")
    heap = (options.get("conf") or {}).get("spark.driver.memory", DEFAULT_CONF["spark.driver.memory"])
    alive = strats if fresh else unfinished(Path(out), strats)  # a resumed run's finished ones exit at once
    warn = memory_warning(len(alive), heap, available_bytes())
    if warn:
        print(warn, file=sys.stderr, flush=True)
    if fresh and Path(out).exists():
        shutil.rmtree(out)
    argvs = {s: child_argv(options) + ["replay", workload_path, "--strategies", s, "--out", str(out), "--no-report"]
             for s in strats}
    if not (Path(out) / "plan.json").exists():
        # prepare in a process of its own: the child that prepared (loading data, writing layouts)
        # started its steps with a warm JVM, and in the demo its first plain runs took 0.45-0.57 s
        # against 1.2-3.7 s for the same queries in the other, cold, child
        first = next(iter(argvs.values()))
        rc = subprocess.run(first, env=dict(os.environ, **{PREPARE_ONLY: "1"})).returncode
        if rc != 0:
            raise BadInput(f"preparing the run {out} in its own process failed (exit code {rc})")
    if console is None:
        run_lockstep(argvs)
        return

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("starting one process per strategy", total=None)
        run_lockstep(argvs, lambda s, step: bar.update(task, description=f"lockstep: {s} finished step {step}"))


PREPARE_ONLY = "ADVISOR_REPLAY_PREPARE_ONLY"  # set by ``replay_isolated`` for its preparing child


def prepare_run(ctx: Context, workload_path: str, out: str) -> None:
    """Prepare the run directory (data, layouts, statistics, probe, plan) and stop."""
    wl = load_workload(workload_path)
    run_dir = Path(out).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    prepare(RunPlaces.of(ctx, run_dir), wl, run_dir, lambda msg: print(f"preparing: {msg}", file=sys.stderr, flush=True))


def replay(ctx: Context, workload_path: str, strategies: list[str] | None = None, out: str | None = None,
           fresh: bool = False, console=None, quiet: bool = False) -> Path:
    """Replay the workload; returns the run directory (with run.json).

    Steps: check the strategies, make the run directory, prepare it (``prepare``), read back the
    resume log, replay each strategy in turn (``workloads.replay.strategy_pass``) rewriting a partial
    run.json after each, then write the complete run.json."""
    wl = load_workload(workload_path)
    strats = _checked_strategies(wl, strategies)
    run_dir = _run_directory(ctx, wl, out, fresh)
    spark = ctx.spark
    factory = RunPlaces.of(ctx, run_dir)
    gate = Gate.from_env()  # a child of ``replay_isolated``: wait for the parent before every step
    keeper = HeapKeeper(spark) if gate is not None else None  # gives idle heap back when memory is short
    prog = _Progress(console, strats, quiet or gate is not None)
    with prog:
        plan = prepare(factory, wl, run_dir, prog.note)
        log_path = run_dir / "log.jsonl"
        log = ReplayLog.from_records(_read_log(log_path))
        env = environment(spark)
        _start_bars(prog, plan, strats, log)
        with open(log_path, "a") as logf:
            st = ReplayState(wl, plan, run_dir, factory, gate, keeper, prog.note, prog.query_done, log, logf)
            for s in strats:
                replay_strategy(st, s)
                _write_json(run_dir / "run.json", _run_doc(wl, env, plan, strats, log, partial=True))
        if gate is not None:
            gate.end()
        env["finished"] = _now()
        _write_json(run_dir / "run.json", _run_doc(wl, env, plan, strats, log, partial=False))
    return run_dir


def _checked_strategies(wl: Workload, strategies: list[str] | None) -> list[str]:
    """The strategies to replay (the workload's own unless given), upper-cased; BadInput on an unknown one."""
    strats = [s.strip().upper() for s in (strategies or wl.strategies)]
    for s in strats:
        if strategy_draw(s) is None:
            raise BadInput(unknown_strategy(s))
    return strats


def _run_directory(ctx: Context, wl: Workload, out: str | None, fresh: bool) -> Path:
    """The run directory (``out``, else the warehouse's runs/NAME), emptied first when ``fresh`` (with
    its files below a warehouse URI, ``run_places``)."""
    run_dir = Path(out or (ctx.warehouse / "runs" / wl.name)).resolve()
    if fresh:
        RunPlaces.of(ctx, run_dir).remove_all()
    if fresh and run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir


def _start_bars(prog: _Progress, plan: dict, strats: list[str], log: ReplayLog) -> None:
    """One progress bar per strategy, counting the queries an earlier run already logged."""
    n_q = sum(1 for s in plan["steps"] if s["kind"] == "query")
    for s in strats:
        prog.start(s, n_q, [q for q in log.queries if q["strategy"] == s])


def _run_doc(wl: Workload, env: dict, plan: dict, strats: list[str], log: ReplayLog, partial: bool) -> dict:
    """The run log of ``reports/schema.py`` for ``strats``, from the records so far."""
    order = {s: i for i, s in enumerate(strats)}
    qs = sorted((q for q in log.queries if q["strategy"] in order), key=lambda q: (order[q["strategy"]], q["step"]))
    ms = [m for m in log.maint if m["strategy"] in order]
    return {"format": "advisor-run/1", "status": "partial" if partial else "complete",
            "workload": {"name": wl.name, "path": wl.path, "sha256": wl.sha256, "description": wl.description,
                         "seed": wl.seed, "policy": wl.policy, "sample_rate": wl.sample_rate, "config": wl.raw},
            "environment": env, "datasets": plan["datasets"], "prepare_seconds": plan["prepare_seconds"],
            "strategies": strats, "steps": plan["steps"], "queries": qs, "maintenance": ms,
            "warmup": {"steps": wl.warmup, "seconds": {k: v for k, v in log.warmups.items() if k in order}},
            "summary": summarize(strats, qs, ms, log.flushes)}


class _Progress:
    """Rich progress: one bar per strategy (queries done, sketches, cumulative time), plus a status line."""
    def __init__(self, console, strategies: list[str], quiet: bool):
        self.quiet = quiet or console is None
        self.tasks, self.stats = {}, {}
        if not self.quiet:

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                                console=Console(stderr=True), transient=False)
            self.status = self.bar.add_task("preparing", total=None, info="")

    def __enter__(self):
        if not self.quiet:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        if not self.quiet:
            if exc[0] is not None:  # a failed run: its error is the one line left on stderr
                for t in list(self.bar.task_ids):
                    self.bar.remove_task(t)
            self.bar.__exit__(*exc)

    def note(self, msg: str) -> None:
        if not self.quiet:
            self.bar.update(self.status, description=msg)

    def start(self, s: str, total: int, done: list[dict]) -> None:
        self.stats[s] = {"n": len(done), "sketches": sum(1 for q in done if q["decision"]["action"] == "capture"),
                         "secs": sum(q["seconds"]["total"] for q in done)}
        if not self.quiet:
            self.tasks[s] = self.bar.add_task(f"{s:<10}", total=total, completed=len(done), info=self._info(s))

    def _info(self, s: str) -> str:
        st = self.stats[s]
        return f"sketches {st['sketches']:>3}  cumulative {st['secs']:7.1f}s"

    def query_done(self, s: str, rec: dict) -> None:
        st = self.stats[s]
        st["n"] += 1
        st["sketches"] += rec["decision"]["action"] == "capture"
        st["secs"] += rec["seconds"]["total"]
        if not self.quiet:
            self.bar.update(self.tasks[s], completed=st["n"], info=self._info(s))
