"""End to end: the shipped CI workload replayed on Spark (NO-PS vs CB-OPT-GB, with update batches),
its run log, the report in a real browser, the gate against the committed baseline, a deliberately
degraded run failing the gate, and an interrupted replay resuming from its log."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from advisor.context import Context

ROOT = Path(__file__).resolve().parents[2]
CI = ROOT / "workloads" / "ci.yaml"
BASELINE = ROOT / "workloads" / "baselines" / "ci" / "run.json"


@pytest.fixture(scope="module")
def ci_run(spark, tmp_path_factory):
    from workloads.replay.runner import replay

    base = tmp_path_factory.mktemp("replay")
    ctx = Context(base / "wh", spark=spark)
    run_dir = replay(ctx, str(CI), out=str(base / "run"))
    return run_dir, json.loads((run_dir / "run.json").read_text())


def test_run_log_is_complete_and_answers_agree(ci_run):
    run_dir, doc = ci_run
    from reports.schema import validate_run

    validate_run(doc)
    assert doc["status"] == "complete" and doc["strategies"] == ["NO-PS", "CB-OPT-GB"]
    steps = doc["steps"]
    n_q = sum(s["kind"] == "query" for s in steps)
    assert n_q == 10 and sum(s["kind"] == "update" for s in steps) == 2
    # every strategy answered every query step, once
    keys = [(q["strategy"], q["step"]) for q in doc["queries"]]
    assert len(keys) == len(set(keys)) == 2 * n_q
    sm = doc["summary"]
    assert sm["answers_identical"], sm["mismatches"]
    assert sm["maintained_equal_to_recapture"]
    per = sm["per_strategy"]
    assert per["NO-PS"]["captured"] == 0 and per["NO-PS"]["rows_read"] > 0
    cb = per["CB-OPT-GB"]
    assert cb["captured"] >= 1 and cb["rows_read"] < per["NO-PS"]["rows_read"]
    for q in doc["queries"]:
        assert q["decision"]["reason"], q
        if q["decision"]["action"] in ("capture", "reuse") and q["sketch_id"] is not None:
            assert 0 < q["selectivity"]["real"] <= 0.9
    # a capture by value answers its query in the same job: no separate run, a plain scan's counters
    answered = [q for q in doc["queries"] if "answered by the capture job" in q["decision"]["reason"]]
    assert answered and all(q["decision"]["action"] == "capture" for q in answered)
    plain = {q["step"]: q for q in doc["queries"] if q["strategy"] == "NO-PS"}
    for q in answered:
        # its query phase is the sketch lookup alone (``lookup_seconds``), no run
        assert q["seconds"]["query"] == q["lookup_seconds"] and q["seconds"]["capture"] > 0
        assert q["scan"]["rows"] == plain[q["step"]]["scan"]["rows"]
        assert q["result"]["digest"] == plain[q["step"]]["result"]["digest"]
    # every step's wall time is charged: the phases (``other``: parsing, recalling decisions, the run
    # log) add up to its total, and parsing alone makes ``other`` positive in every step
    for q in doc["queries"]:
        sec = q["seconds"]
        assert sec["other"] > 0, q
        assert sum(v for k, v in sec.items() if k not in ("total", "oracle")) == pytest.approx(sec["total"], abs=1e-3)
    # the second batch makes every sketch used later stale: lazy maintenance ran and matched a recapture
    ev = [m for m in doc["maintenance"] if m["how"] != "current"]
    assert ev and all(m["equal_to_recapture"] in (True, None) for m in ev)


def test_report_of_the_run_renders_in_chromium(ci_run, tmp_path):
    from report_helpers import body_of

    from reports.html import write_report

    run_dir, _ = ci_run
    page = write_report(run_dir, tmp_path / "report.html")
    body = body_of(page, tmp_path)
    assert (body.get("data-errors"), body.get("data-expected"), body.get("data-charts")) == ("", "5", "5"), body


def _cli(*args) -> int:
    from advisor.cli.main import main

    with pytest.raises(SystemExit) as e:
        main(list(args))
    return e.value.code


def test_gate_passes_against_the_committed_baseline(ci_run, capsys):
    run_dir, _ = ci_run
    assert _cli("gate", str(run_dir), "--baseline", str(BASELINE)) == 0
    assert "gate passed" in capsys.readouterr().out


def test_gate_fails_on_a_degraded_run(spark, tmp_path, monkeypatch, capsys):
    """Degrade the engine for real: the finder refuses every sketch, so CB-OPT-GB scans everything."""
    import advisor.sketch.lookup as finder
    from workloads.replay.runner import replay

    monkeypatch.setattr(finder, "MAX_USE_SELECTIVITY", -1.0)
    run_dir = replay(Context(tmp_path / "wh", spark=spark), str(CI), out=str(tmp_path / "run"))
    doc = json.loads((run_dir / "run.json").read_text())
    assert doc["summary"]["answers_identical"]
    assert _cli("gate", str(run_dir), "--baseline", str(BASELINE), "--json") == 1
    res = json.loads(capsys.readouterr().out)
    regs = [f for f in res["findings"] if f["regression"]]
    assert any(f["strategy"] == "CB-OPT-GB" and f["metric"] in ("scan.rows", "rows_read") for f in regs), regs
    assert not any(f["strategy"] == "NO-PS" and f["metric"].startswith("scan") for f in regs), regs


def test_gate_bad_input_is_exit_2(tmp_path, capsys):
    assert _cli("gate", str(tmp_path / "nothing"), "--baseline", str(BASELINE)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no run log" in err[0]


def test_interrupted_replay_resumes(spark, tmp_path, monkeypatch):
    import workloads.replay.strategy_step as rs
    from workloads.replay.runner import replay

    wl = tmp_path / "tiny.yaml"
    wl.write_text(
        "name: tiny\nseed: 3\ndatasets: [{name: crimes, rows: 4000}]\nstrategies: [NO-PS, CB-OPT-GB]\n"
        "templates:\n  t:\n    sql: SELECT district, count(*) AS n FROM crimes GROUP BY district HAVING count(*) > {c}\n"
        "    params: {c: {uniform: [150, 250], integer: true}}\n"
        "sequence:\n  - {query: t}\n  - {update: {table: crimes, inserts: 50, deletes: 10}}\n  - {query: t}\n"
        "  - {query: t}\n")
    real = rs.run_query_step

    def flaky(ctx, strategy, step, w):
        if strategy == "CB-OPT-GB" and step["step"] == 2:
            raise KeyboardInterrupt
        return real(ctx, strategy, step, w)

    monkeypatch.setattr(rs, "run_query_step", flaky)
    ctx = Context(tmp_path / "wh", spark=spark)
    with pytest.raises(KeyboardInterrupt):
        replay(ctx, str(wl), out=str(tmp_path / "run"))
    log = [json.loads(x) for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [(e["strategy"], e["step"]) for e in log] == [
        ("NO-PS", 0), ("NO-PS", 1), ("NO-PS", 2), ("NO-PS", 3), ("NO-PS", None), ("CB-OPT-GB", 0), ("CB-OPT-GB", 1)]
    assert log[4]["type"] == "flush"  # NO-PS finished: its operator states written (none: no sketches)
    monkeypatch.setattr(rs, "run_query_step", real)
    replay(ctx, str(wl), out=str(tmp_path / "run"))
    log = [json.loads(x) for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    keys = [(e["strategy"], e["step"]) for e in log]
    assert len(keys) == len(set(keys)) == 10  # finished steps were not run again, each strategy flushed once
    assert [e["strategy"] for e in log if e["type"] == "flush"] == ["NO-PS", "CB-OPT-GB"]
    doc = json.loads((tmp_path / "run" / "run.json").read_text())
    keys = [(q["strategy"], q["step"]) for q in doc["queries"]]
    assert sorted(keys) == sorted([(s, i) for s in ("NO-PS", "CB-OPT-GB") for i in (0, 2, 3)])
    assert doc["status"] == "complete" and doc["summary"]["answers_identical"]
    # one process, no lockstep gate: the JVM never gives heap back (``workloads.replay.heap_release``)
    assert all(p["heap_releases"] == 0 for p in doc["summary"]["per_strategy"].values())
    # a different workload file in the same run directory is refused, not mixed in
    wl.write_text(wl.read_text().replace("seed: 3", "seed: 4"))
    from advisor.errors import BadInput

    with pytest.raises(BadInput, match="different workload"):
        replay(ctx, str(wl), out=str(tmp_path / "run"))
    shutil.rmtree(tmp_path / "run")


def test_isolated_replay_runs_each_strategy_in_its_own_process(spark, tmp_path, capsys, monkeypatch):
    import os

    monkeypatch.setenv("ADVISOR_ISOLATE_MIN_FREE", "1t")  # "short of memory" at every step boundary

    wl = tmp_path / "tiny.yaml"
    wl.write_text(
        "name: tiny\nseed: 3\ndatasets: [{name: crimes, rows: 4000}]\nstrategies: [NO-PS, CB-OPT-GB]\n"
        "templates:\n  t:\n    sql: SELECT district, count(*) AS n FROM crimes GROUP BY district HAVING count(*) > {c}\n"
        "    params: {c: {uniform: [150, 250], integer: true}}\n"
        "sequence:\n  - {query: t}\n  - {update: {table: crimes, inserts: 50, deletes: 10}}\n  - {query: t}\n")
    assert _cli("--warehouse", str(tmp_path / "wh"), "--master", "local[2]", "replay", str(wl),
                "--out", str(tmp_path / "run"), "--isolate", "--no-report") == 0
    log = [json.loads(x) for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    pids = {s: {e["pid"] for e in log if e["strategy"] == s} for s in ("NO-PS", "CB-OPT-GB")}
    assert all(len(p) == 1 for p in pids.values())  # one process per strategy, neither of them this one
    assert len(pids["NO-PS"] | pids["CB-OPT-GB"]) == 2 and os.getpid() not in pids["NO-PS"] | pids["CB-OPT-GB"]
    # lockstep: every strategy's step i is logged before any strategy's step i + 1, and the final
    # writes of operator states come after every step, one strategy at a time
    assert [(e["step"], e["strategy"]) for e in log] == (
        [(i, s) for i in (0, 1, 2) for s in ("NO-PS", "CB-OPT-GB")] + [(None, "NO-PS"), (None, "CB-OPT-GB")])
    assert all(e["type"] == "flush" for e in log[-2:])
    # each child gave its idle heap back before each of its three steps (``workloads.replay.heap_release``)
    released = {}
    for e in log[:-2]:
        heap = (e["record"] if e["type"] == "query" else e)["heap"]  # every step was preceded by one
        released.setdefault(e["strategy"], []).append(heap["released_bytes"])
    assert {s: len(r) for s, r in released.items()} == {"NO-PS": 3, "CB-OPT-GB": 3}
    assert all(sum(r) > 0 for r in released.values())  # 186 MiB each when first run
    doc = json.loads((tmp_path / "run" / "run.json").read_text())
    flushed = {e["strategy"]: e["seconds"] for e in log[-2:]}
    assert {s: p["state_flush_seconds"] for s, p in doc["summary"]["per_strategy"].items()} == flushed
    assert doc["status"] == "complete" and doc["summary"]["answers_identical"]
    # both query steps were timed right after a release: counted, and said under the table
    assert {s: p["heap_releases"] for s, p in doc["summary"]["per_strategy"].items()} == {"NO-PS": 2, "CB-OPT-GB": 2}
    assert "memory ran short" in capsys.readouterr().out
    assert sorted((q["strategy"], q["step"]) for q in doc["queries"]) == sorted(
        (s, i) for s in ("NO-PS", "CB-OPT-GB") for i in (0, 2))
    capsys.readouterr()
    # the child processes must share one run directory
    assert _cli("--warehouse", str(tmp_path / "wh"), "replay", str(wl), "--isolate") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out" in err[0]


def test_a_strategys_final_state_write_counts_in_its_cumulative_time():
    """The operator states a strategy still holds are written when it finishes (``states``, written
    behind); that write is maintenance, charged to the strategy, not hidden."""
    from workloads.replay.run_summary import summarize

    def rec(strategy, step, total):
        return {"strategy": strategy, "step": step, "selectivity": {"real": None}, "decision": {"action": "plain"},
                "seconds": {"total": total, "query": total}, "scan": {"rows": 10, "bytes": 100, "files": 1},
                "result": {"digest": "d"}}

    qs = [rec("NO-PS", 0, 2.0), rec("NO-PS", 1, 2.0), rec("CB-OPT-GB", 0, 1.0), rec("CB-OPT-GB", 1, 1.0)]
    upd = [{"strategy": "CB-OPT-GB", "trigger": "update", "seconds": 0.25, "how": "incremental"}]
    per = summarize(["NO-PS", "CB-OPT-GB"], qs, upd, {"CB-OPT-GB": 0.75})["per_strategy"]
    assert per["CB-OPT-GB"]["cumulative_seconds"] == 3.0 and per["CB-OPT-GB"]["vs_no_ps"] == 0.75
    assert per["CB-OPT-GB"]["seconds"]["maintenance"] == 1.0 and per["CB-OPT-GB"]["state_flush_seconds"] == 0.75
    assert per["NO-PS"]["state_flush_seconds"] == 0.0


def test_draws_of_a_random_strategy_replay_side_by_side(spark, tmp_path):
    """``RAND-GB@2`` is RAND-GB with its picks seeded apart: replayed as a strategy of its own, on
    the same steps, with the same answers, and its first decision weighs a group-by attribute that
    not every draw picks."""
    from workloads.replay.runner import replay

    wl = tmp_path / "draws.yaml"
    wl.write_text(
        "name: draws\nseed: 5\ndatasets: [{name: crimes, rows: 30000, seed: 7}]\n"
        "strategies: [NO-PS, RAND-GB, RAND-GB@2, RAND-GB@3]\nmethod: exact\nmeasured_costs: false\n"
        "layouts: [crimes.beat, crimes.year]\nlayout_rows_per_file: 1000\n"
        "templates:\n  t:\n    sql: SELECT beat, year, count(*) AS n FROM crimes GROUP BY beat, year "
        "HAVING count(*) > {c}\n    params: {c: {quantile: {sql: 'SELECT count(*) AS n FROM crimes GROUP BY beat, year', "
        "between: [0.97, 0.995]}, integer: true}}\n"
        "sequence:\n  - {query: t}\n  - {query: t}\n")
    ctx = Context(tmp_path / "wh", spark=spark)
    doc = json.loads((replay(ctx, str(wl), out=str(tmp_path / "run")) / "run.json").read_text())
    assert doc["status"] == "complete" and doc["summary"]["answers_identical"]
    assert doc["strategies"] == ["NO-PS", "RAND-GB", "RAND-GB@2", "RAND-GB@3"]
    draws, per = doc["summary"]["draws"]["RAND-GB"], doc["summary"]["per_strategy"]
    assert draws["draws"] == ["RAND-GB", "RAND-GB@2", "RAND-GB@3"] and list(doc["summary"]["draws"]) == ["RAND-GB"]
    ratios = [per[s]["vs_no_ps"] for s in draws["draws"]]
    assert draws["min_vs_no_ps"] == min(ratios) and draws["max_vs_no_ps"] == max(ratios)
    picks = {q["strategy"]: q["decision"]["attr"] for q in doc["queries"] if q["step"] == 0 and q["strategy"] != "NO-PS"}
    assert set(picks.values()) == {"crimes.beat", "crimes.year"}, picks  # the draws do not all pick alike
