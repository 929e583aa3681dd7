"""Crash consistency: each writing command, killed with SIGKILL at each of its commit moments in
turn (``advisor.warehouse.atomic.crash_point``: the N-th moment of a run, N = 1, 2, ..., at most
eight kills; a moment already killed on the same path is not killed again), leaves a store whose
rows all name existing files and whose versions hold the rows they say; after every kill the next
command succeeds and leaves no temporary behind, and the query answered the advise way (sketches,
layouts, maintained states) equals the plain answer; a replay killed eight times and resumed
finishes with identical answers and passes the gate against an uninterrupted replay of the same
workload."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from crash_helpers import KILLED, raw_problems, read_moments, run_child, temporaries, version_problems

from advisor.context import Context
from workloads.data.datasets import load_dataset
from workloads.data.update_batches import batch_frames, make_batch

pytestmark = pytest.mark.crash

KILLS = 8
QUERY = "SELECT beat, count(*) AS n FROM crimes GROUP BY beat HAVING count(*) > 25"


@pytest.fixture(scope="module")
def wh(spark, tmp_path_factory):
    d = tmp_path_factory.mktemp("crash") / "wh"
    ctx = Context(d, spark=spark)
    load_dataset(ctx.catalog, "crimes", rows=3000, seed=5)
    ctx.store.close()
    return d


def _batch(wh: Path, spark, seed: int) -> str:
    ctx = Context(wh, spark=spark)
    out = str(wh.parent / f"batch{seed}.parquet")
    make_batch(ctx.catalog, "crimes", 40, 8, out, seed)
    ctx.store.close()
    return out


def _apply(wh: Path, spark, seed: int) -> None:
    """A new version of crimes, applied by the test itself (a batch the crash test does not kill)."""
    ctx = Context(wh, spark=spark)
    ins, dels = batch_frames(ctx.catalog, "crimes", 40, 8, seed)
    ctx.catalog.apply_frames("crimes", ins, dels)
    ctx.store.close()


def _moments(wh: Path, argv: list[str], tmp: Path) -> list[str]:
    """The crash points an uninterrupted run of ``argv`` passes, in order (it runs, and must succeed)."""
    f = tmp / "moments"
    assert run_child(["--warehouse", str(wh), *argv], moments_file=f) == 0
    return read_moments(f)


def _after_kill(wh: Path) -> None:
    assert raw_problems(wh) == []
    assert version_problems(wh) == []


def _recovered(wh: Path) -> None:
    """The next command opens the store (and repairs) and succeeds; nothing temporary is left."""
    assert run_child(["--warehouse", str(wh), "data", "list"]) == 0
    assert temporaries(wh) == []
    assert raw_problems(wh) == [] and version_problems(wh) == []


def _kill_loop(wh: Path, spark, argv_for, tmp: Path, before=None) -> int:
    """Run ``argv_for(i)`` killed at its moment 1, 2, 3, ... in turn until every moment of the
    command's path was killed once, or ``KILLS`` runs were killed; after each kill the store is
    checked, the next command must succeed and the advise path's answer must equal the plain one.
    A moment is the run's crash points up to and including the kill (the same point reached by
    another path is another moment).  A run that passes fewer moments than asked for (a repeated
    command finds some of its work done) finishes; its points are then the path whose moments are
    killed next.  Returns the number of kills."""
    if before:
        before(-1)
    moments = tmp / "moments"
    path = _moments(wh, argv_for(-1), tmp)
    assert len(path) >= 3
    killed: set[tuple[str, ...]] = set()
    kills, i, at = 0, 0, 1
    while kills < KILLS and not _every_moment(path, killed):
        assert i < 2 * KILLS, "runs stopped reaching their crash moments"
        if before:
            before(i)
        moments.unlink(missing_ok=True)
        rc = run_child(["--warehouse", str(wh), *argv_for(i)], env={"ADVISOR_CRASH_AT": f"*:{at}"},
                       moments_file=moments)
        assert rc in (0, KILLED), rc
        passed = read_moments(moments)
        if rc == KILLED:
            assert len(passed) == at, (at, passed)
            kills += 1
            killed.add(tuple(passed))
            _after_kill(wh)
        else:
            path = passed
            assert len(path) < at
        _recovered(wh)
        if rc == KILLED:
            _answers_equal(wh, spark)
        at = at % len(path) + 1
        i += 1
    assert kills == KILLS or _every_moment(path, killed)
    if before:
        before(i)
    rc = run_child(["--warehouse", str(wh), *argv_for(i)])
    assert rc == 0
    _recovered(wh)
    return kills


def _every_moment(path: list[str], killed: set) -> bool:
    """Was the run killed at every moment of ``path`` (each prefix of its crash points)?"""
    return all(tuple(path[:k]) in killed for k in range(1, len(path) + 1))


def _answers_equal(wh: Path, spark) -> None:
    """The query through the advise path (sketches, layouts, maintained states) equals plain Spark."""
    from advisor.maintain.spark import state_store
    from advisor.serve.query_path import serve_query
    from advisor.serve.settings import AdviseSettings

    ctx = Context(wh, spark=spark)
    served = serve_query(ctx, QUERY, AdviseSettings(strategy="CB-OPT-GB"))
    ctx.catalog.read("crimes").createOrReplaceTempView("crash_crimes")
    plain = sorted(tuple(r) for r in spark.sql(QUERY.replace("FROM crimes", "FROM crash_crimes")).collect())
    got = sorted(tuple(r) for r in served.rows)
    state_store.flush()  # what the CLI's exit does: the children start from the files
    ctx.store.close()
    assert got == plain


def test_data_apply_killed(wh, spark, tmp_path):
    batches = {}

    def fresh(i):  # a batch against the current version (an earlier one may have deleted its rows)
        batches[i] = _batch(wh, spark, 100 + i)

    assert _kill_loop(wh, spark, lambda i: ["data", "apply", batches[i], "--table", "crimes"], tmp_path,
                      before=fresh) >= 2


def test_capture_killed(wh, spark, tmp_path):
    argv = ["capture", QUERY, "--on", "crimes.beat", "--fragments", "40"]
    assert _kill_loop(wh, spark, lambda i: argv, tmp_path) >= 2


def test_maintain_killed(wh, spark, tmp_path):
    def stale(i):  # a new version, so the captured sketches have something to maintain
        _apply(wh, spark, 200 + i)

    assert _kill_loop(wh, spark, lambda i: ["maintain", "--policy", "lazy"], tmp_path, before=stale) >= 2


def test_layout_killed(wh, spark, tmp_path):
    argv = ["layout", "crimes", "beat", "--rows-per-file", "700"]
    assert _kill_loop(wh, spark, lambda i: argv, tmp_path) >= 2


def test_compact_killed(wh, spark, tmp_path):
    def change(i):  # batches for the first compaction to fold; later ones rewrite the base
        if i < 0:
            _apply(wh, spark, 300)

    assert _kill_loop(wh, spark, lambda i: ["data", "compact", "crimes"], tmp_path, before=change) >= 2


TINY = """name: tiny
seed: 3
datasets: [{name: crimes, rows: 3000}]
layouts: [crimes.beat]
layout_rows_per_file: 700
strategies: [NO-PS, CB-OPT-GB]
measured_costs: false
templates:
  t:
    sql: SELECT district, count(*) AS n FROM crimes GROUP BY district HAVING count(*) > {c}
    params: {c: {uniform: [110, 190], integer: true}}
  b:
    sql: SELECT beat, count(*) AS n FROM crimes GROUP BY beat HAVING count(*) > {c}
    params: {c: {uniform: [20, 30], integer: true}}
sequence:
  - {query: t}
  - {query: b}
  - {update: {table: crimes, inserts: 50, deletes: 10}}
  - {query: t}
  - {query: b}
  - {query: b}
"""


def test_replay_killed_and_resumed_passes_the_gate(spark, tmp_path):  # children share the session
    from advisor.cli.main import main

    wl = tmp_path / "tiny.yaml"
    wl.write_text(TINY)
    base = ["--warehouse", str(tmp_path / "wh"), "replay", str(wl), "--no-report"]
    n = len(_moments(tmp_path / "wh", base[2:] + ["--out", str(tmp_path / "plain")], tmp_path))
    run = tmp_path / "resumed"
    kills = 0
    # each process resumes the run where the last one's log ends and is killed at its moment ``at``;
    # while a process logs no new step (its kill came during the resume itself), the next goes further
    at, logged = max(1, n // (KILLS + 2)), 0
    for i in range(KILLS):
        rc = run_child(base + ["--out", str(run)], env={"ADVISOR_CRASH_AT": f"*:{at}"})
        assert rc == KILLED, rc
        kills += 1
        now = len((run / "log.jsonl").read_text().splitlines()) if (run / "log.jsonl").exists() else 0
        if now == logged:
            at += 3
        logged = now
        for s in [run / "warehouse", *(run / "strategies").glob("*")]:
            if (s / "advisor.db").exists():
                assert raw_problems(s) == []
    assert kills == KILLS
    assert run_child(base + ["--out", str(run)]) == 0
    doc = json.loads((run / "run.json").read_text())
    assert doc["status"] == "complete" and doc["summary"]["answers_identical"]
    assert any(q.get("resumed") for q in doc["queries"])
    with pytest.raises(SystemExit) as e:
        main(["gate", str(run), "--baseline", str(tmp_path / "plain"), "--max-regression", "0%"])
    assert e.value.code == 0
    assert temporaries(run) == []
    plain = json.loads((tmp_path / "plain" / "run.json").read_text())

    def key(d):
        return [(q["strategy"], q["step"], q["decision"]["action"], q["scan"]) for q in d["queries"]]

    assert key(doc) == key(plain)
