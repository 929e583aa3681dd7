"""One strategy's pass over a prepared run directory (warm-up, its own pinned store, every step not yet
logged, the closing flush), appending each finished step to the resume log ``log.jsonl``.

After each step the strategy's store is checkpointed (its operator states written, then a copy of
its SQLite file named by the step) before the step's log line is appended.  A resumed pass restores
the checkpoint of its last logged step, so a step cut off half-way leaves nothing behind (no sketch,
sample or decision a later step could reuse) and the resumed run decides as an uninterrupted one.
Steps run by a resumed process are marked ``resumed`` (their timings come from another JVM)."""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Optional

from advisor.context import Context
from advisor.maintain.policy.triggers import set_policy
from advisor.maintain.spark import state_store as states
from advisor.maintain.spark.state_rental import set_measured
from advisor.warehouse import atomic
from advisor.warehouse.catalog import Catalog
from workloads.replay import strategy_step as replay_steps
from workloads.replay.heap_release import HeapKeeper
from workloads.replay.lockstep import Gate
from workloads.replay.run_places import RunPlaces
from workloads.replay.warmup import ROUTINES, clone_store, warm_up
from workloads.replay.workload_model import Workload


@dataclass
class ReplayLog:
    """The records of a replay so far, read back from ``log.jsonl`` and extended as steps finish:
    what ``run.json`` is built from, and the (strategy, step) pairs a resumed replay skips."""

    queries: list[dict]
    maint: list[dict]
    flushes: dict[str, float]
    warmups: dict[str, list[float]]
    done: set[tuple]

    @classmethod
    def from_records(cls, log: list[dict]) -> ReplayLog:
        queries = [r["record"] for r in log if r["type"] == "query"]
        maint = [m for r in log if r["type"] in ("query", "update") for m in r["maintenance"]]
        flushes = {r["strategy"]: r["seconds"] for r in log if r["type"] == "flush"}
        warmups: dict[str, list[float]] = {}
        for r in log:
            if r["type"] == "warmup":
                warmups.setdefault(r["strategy"], []).append(r["seconds"])
        done = {(r["strategy"], r["step"]) for r in log}
        return cls(queries, maint, flushes, warmups, done)


@dataclass
class ReplayState:
    """What every strategy's pass shares: the workload and its prepared plan, the run directory, the
    context factory, the lockstep gate and heap keeper (None in-process), the progress display's
    callbacks, and the records with the open log they are appended to."""

    wl: Workload
    plan: dict
    run_dir: Path
    factory: RunPlaces
    gate: Optional[Gate]
    keeper: Optional[HeapKeeper]
    note: Callable[[str], None]
    query_done: Callable[[str, dict], None]
    log: ReplayLog
    logf: IO[str]
    resumed: bool = False  # the strategy being replayed had logged steps before this process

    def append(self, entry: dict, default: Optional[Callable] = None) -> None:
        """One line of the resume log, flushed at once so an interruption loses no finished step."""
        self.logf.write(json.dumps(entry, default=default) + "\n")
        self.logf.flush()


def replay_strategy(st: ReplayState, s: str) -> None:
    """Replay strategy ``s`` in a store of its own: warm up if asked, pin the first versions, run the
    steps in order, flush its operator states once."""
    sdir = st.run_dir / "strategies" / s
    st.resumed = any(k[0] == s for k in st.log.done)
    _restore_checkpoint(st, s, sdir)
    data = st.run_dir / "warehouse"
    clone_store(data / "advisor.db", sdir, st.factory.root(data))
    if st.wl.warmup and any((s, step["step"]) not in st.log.done for step in st.plan["steps"]):
        _warm_up(st, s)
    sctx, cat = _open_store(st, sdir)
    for step in st.plan["steps"]:
        _run_step(st, s, sctx, cat, step)
    if s not in st.log.flushes:
        _flush(st, s)
    sctx.store.close()


def _warm_up(st: ReplayState, s: str) -> None:
    """The untimed warm-up (``workloads.replay.warmup``), before the first gate: lockstep starts the
    children one after another, so each warms up alone and no strategy's timed step runs beside it."""
    st.note(f"{s}: warming up (untimed: {st.wl.warmup} steps as {' and '.join(ROUTINES)})")
    w = warm_up(st.factory, st.run_dir, st.plan, st.wl, s)
    st.log.warmups.setdefault(s, []).append(w["seconds"])
    st.append({"type": "warmup", "strategy": s, "step": None, **w, "pid": os.getpid()})


def _open_store(st: ReplayState, sdir: Path) -> tuple[Context, Catalog]:
    """The strategy's context with the workload's policy and every table pinned at its first version."""
    sctx = st.factory(sdir)
    set_policy(sctx.store, st.wl.policy)
    set_measured(sctx.store, st.wl.measured_costs)
    cat = sctx.catalog
    for t, v in st.plan["initial_versions"].items():
        cat.pin(t, v)
    return sctx, cat


def _run_step(st: ReplayState, s: str, sctx: Context, cat: Catalog, step: dict) -> None:
    """Run and log one step, after the lockstep gate lets it go; a step already logged is skipped
    (a logged update still moves its table's pin)."""
    if (s, step["step"]) in st.log.done:
        if step["kind"] == "update":
            cat.pin(step["table"], step["version"])
        return
    heap = None
    if st.gate is not None:
        heap = st.keeper.between_steps()
        st.gate.wait(step["step"])
    if step["kind"] == "update":
        st.note(f"{s}: update batch at step {step['step']} ({step['table']})")
        ms = replay_steps.run_update(sctx, s, step, st.wl.measure_recapture)
        entry = {"type": "update", "strategy": s, "step": step["step"], "maintenance": ms, "pid": os.getpid()}
    else:
        st.note(f"{s}: step {step['step']} {step['template']}")
        rec, ms = replay_steps.run_query_step(sctx, s, step, st.wl)
        st.log.queries.append(rec)
        st.query_done(s, rec)
        entry = {"type": "query", "strategy": s, "step": step["step"], "record": rec, "maintenance": ms,
                 "pid": os.getpid()}
    if heap:  # heap given back before this step (``workloads.replay.heap_release``): its time includes regrowth
        (entry["record"] if step["kind"] == "query" else entry)["heap"] = heap
    if st.resumed:
        (entry["record"] if step["kind"] == "query" else entry)["resumed"] = True
    st.log.maint.extend(ms)
    _checkpoint(sctx, step["step"])
    st.append(entry, default=str)
    st.log.done.add((s, step["step"]))


CHECKPOINTS_KEPT = 2


def _checkpoint(sctx: Context, step: int) -> None:
    """Write the strategy's operator states, then copy its store as ``checkpoint-<step>.db`` (the
    store as of the end of ``step``); older checkpoints but the previous one are removed."""
    states.flush()
    sdir = sctx.store.warehouse
    tmp = sdir / atomic.tmp_name("checkpoint")
    dst = sqlite3.connect(tmp)
    try:
        sctx.store.conn.backup(dst)
    finally:
        dst.close()
    os.replace(tmp, sdir / f"checkpoint-{step}.db")
    kept = sorted(sdir.glob("checkpoint-*.db"), key=lambda p: int(p.stem.split("-")[1]))
    for p in kept[:-CHECKPOINTS_KEPT]:
        p.unlink(missing_ok=True)


def _restore_checkpoint(st: ReplayState, s: str, sdir: Path) -> None:
    """Put back the store as of the strategy's last logged step (none logged: a fresh clone), so
    whatever a step cut off half-way wrote is forgotten (its files are removed on open)."""
    if not (sdir / "advisor.db").exists():
        return
    logged = [k[1] for k in st.log.done if k[0] == s and k[1] is not None]
    last = max(logged) if logged else None
    cp = sdir / f"checkpoint-{last}.db" if last is not None else None
    if last is not None and (cp is None or not cp.exists()):
        return  # a run directory of an older version: continue with the store as it is
    if cp is None:  # nothing logged: start from a fresh clone, without the cut step's files
        st.factory.remove(sdir)
        return
    tmp = sdir / atomic.tmp_name("restore")
    src, dst = sqlite3.connect(cp), sqlite3.connect(tmp)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    os.replace(tmp, sdir / "advisor.db")


def _flush(st: ReplayState, s: str) -> None:
    """Write the live heads' operator states behind (``states``), alone as a step under lockstep so it
    is timed without the others."""
    steps = st.plan["steps"]
    if st.gate is not None and steps:
        st.gate.wait(steps[-1]["step"] + 1)
    files, secs = states.evict_all()
    st.log.flushes[s] = secs
    st.append({"type": "flush", "strategy": s, "step": None, "files": files, "seconds": round(secs, 4),
               "pid": os.getpid()})
