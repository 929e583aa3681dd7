"""The CI gate (`reports.gate`): deterministic counters fail it, time is advisory, bad input is a ValueError.

No Spark: the run logs are synthetic dicts shaped like `advisor replay`'s run.json.
"""

from __future__ import annotations

import copy
import io
import json
import subprocess
import sys

import pytest
from rich.console import Console

from reports.gate import GateInputError, compare, gate_command, parse_threshold, render
from reports.schema import RunFormatError

STRATS = ["NO-PS", "CB-OPT-GB"]
SQL = {
    1: "SELECT o_orderpriority, count(*) FROM orders WHERE o_orderdate >= DATE '1995-01-01' GROUP BY 1",
    2: "SELECT sum(l_extendedprice) FROM lineitem JOIN orders ON l_orderkey = o_orderkey WHERE o_totalprice > 400000",
    3: "SELECT count(*) FROM customer WHERE c_acctbal < -900",
    5: "SELECT sum(l_extendedprice) FROM lineitem JOIN orders ON l_orderkey = o_orderkey WHERE o_totalprice > 450000",
    6: "SELECT n_name, sum(l_quantity) FROM lineitem JOIN supplier ON l_suppkey = s_suppkey "
       "JOIN nation ON s_nationkey = n_nationkey WHERE n_name = 'PERU' GROUP BY 1",
    7: "SELECT count(*) FROM orders WHERE o_comment LIKE '%special%'",
}
# per query step: NO-PS scan (files, bytes, rows) and CB-OPT-GB (action, scan, estimated, real, seconds)
PLAIN_SCAN = {1: (8, 3_200_000, 150_000), 2: (24, 9_600_000, 750_000), 3: (4, 800_000, 15_000),
              5: (24, 9_700_000, 752_000), 6: (20, 8_000_000, 610_000), 7: (8, 3_200_000, 150_000)}
SKETCHED = {1: ("capture", (8, 3_200_000, 150_000), 0.40, 0.42, 2.0),
            2: ("reuse", (3, 1_100_000, 90_000), 0.12, 0.10, 0.6),
            3: ("plain", (4, 800_000, 15_000), None, None, 0.3),
            5: ("capture", (0, 0, 0), 0.01, 0.0, 0.4),          # the sketch pruned every file
            6: ("reuse", (2, 700_000, 40_000), 0.05, 0.06, 0.5),
            7: ("no-go", (8, 3_200_000, 150_000), None, None, 0.9)}
PLAIN_SECONDS = {1: 1.1, 2: 2.4, 3: 0.3, 5: 2.5, 6: 2.0, 7: 0.9}


def _query(strategy, step, action, scan, est, real, secs):
    files, nbytes, rows = scan
    return {"strategy": strategy, "step": step, "template": f"q{step}", "sql": SQL[step],
            "decision": {"action": action, "reason": "synthetic", "attr": "orders.o_orderkey" if action in
                         ("capture", "reuse") else None, "fragments": 3 if action in ("capture", "reuse") else None},
            "sketch_id": step if action in ("capture", "reuse") else None,
            "selectivity": {"estimated": est, "ci": None if est is None else [est * 0.8, est * 1.2], "real": real},
            "scan": {"files": files, "bytes": nbytes, "rows": rows},
            "result": {"rows": 5, "digest": f"digest-{step:02d}-0123456789abcdef"},
            "seconds": {"sampling": 0.0, "estimation": 0.0, "capture": 0.0, "maintenance": 0.0,
                        "query": secs, "oracle": 0.0, "total": secs}}


def summarize(run):
    """Recompute `summary` from `queries`, as replay does."""
    per = {}
    for s in run["strategies"]:
        qs = [q for q in run["queries"] if q["strategy"] == s]
        acts = [q["decision"]["action"] for q in qs]
        reals = [q["selectivity"]["real"] for q in qs if q["selectivity"]["real"] is not None]
        per[s] = {"queries": len(qs), "cumulative_seconds": round(sum(q["seconds"]["total"] for q in qs), 6),
                  "vs_no_ps": None,
                  "rows_read": sum(q["scan"]["rows"] for q in qs), "bytes_read": sum(q["scan"]["bytes"] for q in qs),
                  "files_read": sum(q["scan"]["files"] for q in qs),
                  "captured": acts.count("capture"), "reused": acts.count("reuse"), "no_go": acts.count("no-go"),
                  "plain": acts.count("plain") + acts.count("unsupported"),
                  "mean_real_selectivity": sum(reals) / len(reals) if reals else None,
                  "seconds": {k: sum(q["seconds"][k] for q in qs) for k in
                              ("sampling", "estimation", "capture", "maintenance", "query")}}
    ref = per.get("NO-PS", {}).get("cumulative_seconds")
    for s in per:
        per[s]["vs_no_ps"] = round(per[s]["cumulative_seconds"] / ref, 6) if ref else None
    digests = {(q["strategy"], q["step"]): q["result"]["digest"] for q in run["queries"]}
    mism = [{"step": st, "strategy": s} for (s, st), d in sorted(digests.items())
            if s != "NO-PS" and ("NO-PS", st) in digests and digests[("NO-PS", st)] != d]
    run["summary"] = {"answers_identical": not mism, "mismatches": mism, "per_strategy": per}
    return run


def make_run():
    steps = []
    for n in range(1, 8):
        if n == 4:
            steps.append({"step": 4, "kind": "update", "table": "orders", "inserts": 1500, "deletes": 300,
                          "version": 1})
        else:
            steps.append({"step": n, "kind": "query", "template": f"q{n}", "bindings": {"p": n}, "sql": SQL[n]})
    queries = [_query("NO-PS", n, "plain", PLAIN_SCAN[n], None, None, PLAIN_SECONDS[n]) for n in SQL]
    queries += [_query("CB-OPT-GB", n, *SKETCHED[n]) for n in SQL]
    run = {
        "format": "advisor-run/1", "status": "complete",
        "workload": {"name": "smoke", "path": "workloads/smoke.toml", "sha256": "ab" * 32, "description": "gate test",
                     "seed": 7, "policy": "eager", "sample_rate": 0.01, "config": {"name": "smoke"}},
        "environment": {"advisor": "0.1", "python": "3.11", "pyspark": "3.5.1", "java": "17", "platform": "linux",
                        "cpus": 2, "master": "local[2]", "started": "2024-01-01T00:00:00",
                        "finished": "2024-01-01T00:05:00"},
        "datasets": [{"name": "tpch", "sf": 0.1, "tables": {"orders": 150_000, "lineitem": 600_000}}],
        "prepare_seconds": {"load": 10.0, "layouts": 5.0, "bindings": 0.1, "batches": 0.5},
        "strategies": list(STRATS), "steps": steps, "queries": queries,
        "maintenance": [{"strategy": "CB-OPT-GB", "step": 4, "trigger": "update", "sketch_id": 1, "new_sketch_id": 8,
                         "how": "incremental", "seconds": 0.2, "delta_rows": 1800, "recapture_seconds": None}],
    }
    return summarize(run)


def q(run, strategy, step):
    return next(x for x in run["queries"] if x["strategy"] == strategy and x["step"] == step)


def write(tmp_path, name, run):
    d = tmp_path / name
    d.mkdir()
    (d / "run.json").write_text(json.dumps(run))
    return d


def gate(tmp_path, run, base=None, threshold="10%", **kw):
    """Run gate_command on files; returns (exit code, printed text)."""
    buf = io.StringIO()
    con = Console(file=buf, width=200, color_system=None)
    rc = gate_command(write(tmp_path, "run", run), write(tmp_path, "base", base or make_run()), threshold, con, **kw)
    return rc, buf.getvalue()


def only_regressions(run, base=None, threshold=0.1):
    return compare(run, base or make_run(), threshold).regressions


# --- the synthetic baseline is self-consistent --------------------------------------------------------------

def test_baseline_is_valid_and_consistent(tmp_path):
    from reports.schema import load_run
    base = load_run(write(tmp_path, "b", make_run()))
    assert base["summary"]["answers_identical"] is True
    assert base["summary"]["per_strategy"]["CB-OPT-GB"]["rows_read"] < base["summary"]["per_strategy"]["NO-PS"]["rows_read"]
    assert len([s for s in base["steps"] if s["kind"] == "query"]) == 6


# --- pass ----------------------------------------------------------------------------------------------------

def test_identical_run_passes(tmp_path):
    rc, out = gate(tmp_path, make_run())
    assert rc == 0
    res = compare(make_run(), make_run(), 0.1)
    assert res.findings == [] and res.compared > 30
    assert out.strip() == f"gate passed: {res.compared} counters compared, 0 regressions"


def test_five_percent_within_ten_percent_passes_but_fails_at_one_percent(tmp_path):
    run = make_run()
    q(run, "CB-OPT-GB", 2)["scan"]["rows"] = int(90_000 * 1.05)       # +4500 rows: above the 100-row floor
    summarize(run)
    assert gate(tmp_path, run, threshold="10%")[0] == 0
    regs = only_regressions(run, threshold=0.01)
    assert {(f.step, f.metric) for f in regs} == {(2, "scan.rows"), (None, "rows_read")}


def test_zero_to_one_file_is_noise(tmp_path):
    run = make_run()
    q(run, "CB-OPT-GB", 5)["scan"].update(files=1, bytes=4000, rows=90)
    summarize(run)
    assert q(make_run(), "CB-OPT-GB", 5)["scan"]["files"] == 0
    assert gate(tmp_path, run)[0] == 0
    q(run, "CB-OPT-GB", 5)["scan"].update(files=2, bytes=5000, rows=101)  # just past every floor
    assert {f.metric for f in only_regressions(run) if f.step == 5} == {"scan.files", "scan.bytes", "scan.rows"}


def test_improvements_pass(tmp_path):
    run = make_run()
    q(run, "CB-OPT-GB", 2)["scan"].update(files=1, bytes=100_000, rows=1_000)
    summarize(run)
    rc, out = gate(tmp_path, run)
    assert rc == 0 and "0 regressions" in out


# --- counters fail -------------------------------------------------------------------------------------------

def test_rows_plus_fifty_percent_fails_naming_step_and_metric(tmp_path):
    run = make_run()
    q(run, "CB-OPT-GB", 6)["scan"]["rows"] = 60_000                   # 40 000 -> 60 000
    summarize(run)
    rc, out = gate(tmp_path, run)
    assert rc == 1
    res = compare(run, make_run(), 0.1)
    f = next(f for f in res.regressions if f.step is not None)
    assert (f.kind, f.strategy, f.step, f.metric, f.base, f.run) == ("counter", "CB-OPT-GB", 6, "scan.rows", 40_000, 60_000)
    assert f.change == pytest.approx(0.5)
    assert "gate failed" in out and "scan.rows" in out and "+50.0%" in out and "40000 → 60000" in out


def test_per_strategy_total_regression_alone_fails():
    run = make_run()
    run["summary"]["per_strategy"]["CB-OPT-GB"]["bytes_read"] *= 2
    regs = only_regressions(run)
    assert [(f.kind, f.strategy, f.metric) for f in regs] == [("total", "CB-OPT-GB", "bytes_read")]


def test_selectivity_growth_fails_only_past_both_thresholds():
    run = make_run()
    q(run, "CB-OPT-GB", 2)["selectivity"]["real"] = 0.105               # +5% relative: fine
    assert only_regressions(run) == []
    q(run, "CB-OPT-GB", 2)["selectivity"]["real"] = 0.20                # doubled, +0.10 absolute
    kinds = {(f.kind, f.metric) for f in only_regressions(run)}
    assert ("selectivity", "selectivity.real") in kinds


def test_estimation_error_growth_fails():
    run = make_run()
    q(run, "CB-OPT-GB", 1)["selectivity"]["estimated"] = 0.43           # error 0.02 -> 0.01: better
    assert only_regressions(run) == []
    q(run, "CB-OPT-GB", 1)["selectivity"]["estimated"] = 0.30           # error 0.02 -> 0.12
    regs = only_regressions(run)
    assert [(f.kind, f.step) for f in regs] == [("error", 1)]
    assert regs[0].base == pytest.approx(0.02) and regs[0].run == pytest.approx(0.12)


# --- decisions and answers -----------------------------------------------------------------------------------

def test_capture_to_nogo_fails(tmp_path):
    run = make_run()
    q(run, "CB-OPT-GB", 1)["decision"]["action"] = "no-go"
    rc, out = gate(tmp_path, run)
    assert rc == 1
    regs = only_regressions(run)
    assert [(f.kind, f.step, f.base, f.run) for f in regs] == [("decision", 1, "capture", "no-go")]
    assert "decision.action" in out


def test_other_decision_change_is_only_noted(tmp_path):
    run = make_run()
    q(run, "CB-OPT-GB", 3)["decision"]["action"] = "capture"            # plain -> capture
    q(run, "CB-OPT-GB", 2)["decision"]["action"] = "capture"            # reuse -> capture
    res = compare(run, make_run(), 0.1)
    assert res.passed and {(f.kind, f.step) for f in res.notes} == {("decision", 2), ("decision", 3)}
    rc, out = gate(tmp_path, run)
    assert rc == 0 and "2 other change(s) noted" in out


def test_digest_change_fails(tmp_path):
    run = make_run()
    q(run, "NO-PS", 7)["result"]["digest"] = "something-else"
    rc, out = gate(tmp_path, run)
    assert rc == 1
    regs = only_regressions(run)
    assert [(f.kind, f.strategy, f.step, f.note) for f in regs] == [("answer", "NO-PS", 7, "answer changed")]


def test_answers_identical_false_fails(tmp_path):
    run = make_run()
    run["summary"]["answers_identical"] = False
    run["summary"]["mismatches"] = [{"step": 6, "strategy": "CB-OPT-GB"}]
    rc, out = gate(tmp_path, run)
    assert rc == 1
    f = only_regressions(run)[0]
    assert f.metric == "summary.answers_identical" and "CB-OPT-GB@6" in f.note
    assert "answers_identical" in out


# --- timing is advisory ----------------------------------------------------------------------------------------

def test_three_times_slower_passes_but_is_advisory(tmp_path):
    run = make_run()
    for x in run["queries"]:
        if x["strategy"] == "CB-OPT-GB":
            for k in ("query", "total"):
                x["seconds"][k] *= 3
    summarize(run)
    res = compare(run, make_run(), 0.1)
    assert res.passed
    adv = {(f.strategy, f.metric): f for f in res.advisories}
    assert set(adv) == {("CB-OPT-GB", "cumulative_seconds"), ("CB-OPT-GB", "vs_no_ps")}
    assert adv[("CB-OPT-GB", "cumulative_seconds")].change == pytest.approx(2.0)
    assert all(not f.regression for f in res.advisories)
    rc, out = gate(tmp_path, run)
    assert rc == 0
    assert "gate passed" in out and "2 advisory timing note(s)" in out and "3.00x" in out


def test_faster_run_has_no_advisory():
    run = make_run()
    run["summary"]["per_strategy"]["NO-PS"]["cumulative_seconds"] *= 0.5
    assert compare(run, make_run(), 0.1).advisories == []


# --- missing and extra ---------------------------------------------------------------------------------------

def test_missing_strategy_fails(tmp_path):
    run = make_run()
    run["strategies"] = ["NO-PS"]
    run["queries"] = [x for x in run["queries"] if x["strategy"] == "NO-PS"]
    summarize(run)
    rc, out = gate(tmp_path, run)
    assert rc == 1
    regs = only_regressions(run)
    assert [(f.kind, f.strategy, f.step) for f in regs] == [("missing", "CB-OPT-GB", None)]  # once, not per step
    assert "missing" in out and "CB-OPT-GB" in out


def test_missing_query_step_fails():
    run = make_run()
    run["status"] = "partial"
    run["queries"] = [x for x in run["queries"] if not (x["strategy"] == "CB-OPT-GB" and x["step"] == 7)]
    regs = only_regressions(run)
    assert [(f.kind, f.strategy, f.step) for f in regs] == [("missing", "CB-OPT-GB", 7)]


def test_extra_strategy_is_only_noted():
    run = make_run()
    run["strategies"].append("CB-LAZY")
    run["queries"] += [dict(copy.deepcopy(x), strategy="CB-LAZY") for x in run["queries"] if x["strategy"] == "CB-OPT-GB"]
    summarize(run)
    res = compare(run, make_run(), 0.1)
    assert res.passed
    assert [(f.kind, f.strategy) for f in res.notes] == [("extra", "CB-LAZY")]


# --- bad input -------------------------------------------------------------------------------------------------

def test_different_workload_sha_is_input_error(tmp_path):
    run = make_run()
    run["workload"]["sha256"] = "cd" * 32
    with pytest.raises(GateInputError, match="sha256") as e:
        gate(tmp_path, run)
    assert isinstance(e.value, ValueError)


def test_different_step_sql_is_input_error():
    run = make_run()
    run["steps"][4]["sql"] = "SELECT 1"                                # step 5
    with pytest.raises(GateInputError, match="step 5"):
        compare(run, make_run(), 0.1)


def test_missing_baseline_is_run_format_error(tmp_path):
    with pytest.raises(RunFormatError):
        gate_command(write(tmp_path, "run", make_run()), tmp_path / "nope", "10%", Console(file=io.StringIO()))


@pytest.mark.parametrize("text, expected", [("10%", 0.10), ("0.1", 0.10), ("10 %", 0.10), (" 2.5% ", 0.025),
                                            ("0", 0.0), ("1000%", 10.0), ("0%", 0.0), ("1", 1.0)])
def test_parse_threshold_accepts(text, expected):
    assert parse_threshold(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["", "abc", "10%%", "%", "-5%", "-0.1", "1001%", "11", "ten percent", "1e-1"])
def test_parse_threshold_rejects(text):
    with pytest.raises(ValueError) as e:
        parse_threshold(text)
    msg = str(e.value)
    assert "max-regression" in msg and "\n" not in msg


def test_bad_threshold_raises_from_gate_command(tmp_path):
    with pytest.raises(ValueError, match="negative"):
        gate(tmp_path, make_run(), threshold="-10%")


# --- output ------------------------------------------------------------------------------------------------------

def test_json_output(tmp_path):
    run = make_run()
    q(run, "CB-OPT-GB", 6)["scan"]["rows"] = 60_000
    rc, out = gate(tmp_path, run, json_output=True)
    data = json.loads(out)
    assert rc == 1 and data["passed"] is False and data["regressions"] == 1
    assert data["findings"][0]["step"] == 6 and data["findings"][0]["metric"] == "scan.rows"


def test_regressions_render_before_advisories():
    run = make_run()
    q(run, "CB-OPT-GB", 1)["decision"]["action"] = "plain"
    run["summary"]["per_strategy"]["NO-PS"]["cumulative_seconds"] *= 2
    buf = io.StringIO()
    render(Console(file=buf, width=200, color_system=None), compare(run, make_run(), 0.1))
    out = buf.getvalue()
    assert out.index("decision.action") < out.index("advisory timing")
    assert "gate passed" not in out


def test_gate_module_imports_no_spark_or_cli():
    code = ("import sys, reports.gate; bad = [m for m in ('pyspark', 'advisor.cli.main') if m in sys.modules]; "
            "sys.exit(str(bad) if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr + r.stdout
