"""An untimed warm-up of a replay's process before its first timed step, the same for every strategy.

Why: a fresh JVM pays one-time costs the first time it meets a plan shape (class loading, code
generation, JIT compilation; on the Python side, imports), and they fall on whichever strategy meets
the shape first.  OPT's oracle, excluded from OPT's time, captures every candidate before OPT's
first timed step of a template, so OPT met each template warm and the others cold.  On TPC-H SF1,
RAND-GB and OPT made the same decisions and read the same rows, yet took 126.1 s and 119.1 s
(selective workload) and 121.6 s and 111.8 s (two-attribute workload).
CB-OPT-GB's first capture of agh_ship took 3.63 s against OPT's 1.78 s.

What: with ``warmup: N`` in the workload file, every strategy's process first replays the plan's
first N steps twice: as NO-PS, then as CB-OPT-GB.  Each routine runs in a scratch store cloned
from the prepared warehouse: the same tables, batches and layouts, nothing of the strategy's own
store.  Afterwards the scratch stores' cached operator states are dropped unwritten, every
registered data cache and proof memo is emptied, the scratch temp views are dropped and the
directory is deleted.  What stays is a warm JVM and interpreter (and the OS page cache), as in a
long-running Spark application.  The warm-up is logged (``type: warmup``) and counted in no
strategy's time.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sqlite3
import time
from pathlib import Path

from advisor import memory
from advisor.maintain.policy.triggers import set_policy
from advisor.maintain.spark import state_store
from advisor.maintain.spark.state_rental import set_measured
from advisor.warehouse.stored_paths import anchor
from estimators import prefetch_jobs
from workloads.replay import strategy_step

ROUTINES = ("NO-PS", "CB-OPT-GB")


def forget_caches() -> int:
    """Empty the driver's memos (``advisor.caches``' registry: data caches, proof and verdict
    memos) and the unclaimed replicate prefetches; returns the entries dropped."""
    return memory.empty_all() + prefetch_jobs.discard_pending()


def warm_up(factory, run_dir: Path, plan: dict, wl, strategy: str) -> dict:
    """Run the warm-up for ``strategy``'s process (module docstring); returns the record to log:
    {steps, seconds}.  ``factory`` makes the contexts over the run's warehouses (``run_places``)."""


    steps = plan["steps"][:wl.warmup]
    quiet = dataclasses.replace(wl, measure_recapture=False)
    root = run_dir / "warmup" / strategy
    for routine in ROUTINES:
        factory.remove(root / routine)
    data = run_dir / "warehouse"
    t0 = time.perf_counter()
    try:
        for routine in ROUTINES:
            clone_store(data / "advisor.db", root / routine, factory.root(data))
            ctx = factory(root / routine)
            cat = ctx.catalog
            try:
                set_policy(ctx.store, wl.policy)
                set_measured(ctx.store, wl.measured_costs)
                for t, v in plan["initial_versions"].items():
                    cat.pin(t, v)
                for step in steps:
                    if step["kind"] == "update":
                        strategy_step.run_update(ctx, routine, step, False)
                    else:
                        strategy_step.run_query_step(ctx, routine, step, quiet)
            finally:
                state_store.discard(ctx.store)
                cat.drop_views()
                ctx.store.close()
    finally:
        forget_caches()
        for routine in ROUTINES:
            factory.remove(root / routine)
        shutil.rmtree(root, ignore_errors=True)
        if root.parent.is_dir() and not any(root.parent.iterdir()):
            root.parent.rmdir()  # the last process to warm up leaves no empty directory behind
    return {"steps": len(steps), "seconds": round(time.perf_counter() - t0, 4)}


def clone_store(src: Path, dst_dir: Path, root: str) -> None:
    """Copy the data warehouse's SQLite file into a strategy's directory (online backup, atomic), its
    places anchored to ``root``, where the data warehouse's files live (``stored_paths.anchor``)."""
    dst_dir.mkdir(parents=True, exist_ok=True)
    final = dst_dir / "advisor.db"
    if final.exists():
        return
    tmp = dst_dir / ".advisor.db.tmp"
    a, b = sqlite3.connect(src), sqlite3.connect(tmp, isolation_level=None)
    try:
        a.backup(b)
        anchor(b, root)  # the clone reads the warehouse's files where they are
    finally:
        a.close()
        b.close()
    os.replace(tmp, final)
