"""`reports.html.write_report` on hand-built run logs (no Spark): the page is self-contained,
names every strategy, has the per-query table, and bad run directories fail with RunFormatError.

`synthetic_run` is shared with test_report_browser.py, which checks the charts actually draw.
"""

from __future__ import annotations

import copy
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from reports.html import CHARTS, write_report
from reports.schema import RunFormatError, load_run

STRATEGIES = ["NO-PS", "CB-OPT-GB", "RAND-GB"]
# 12 steps: 10 queries over two templates, update batches after queries 4 and 7.
UPDATE_STEPS = {5: "lineitem", 9: "orders"}


def _query(strategy: str, step: int, k: int) -> dict:
    """One strategy's record of query step `step` (its k-th query): plausible, deterministic."""
    template = "q_ship" if k % 2 else "q_price"
    sql = (f"SELECT l_returnflag, count(*) FROM lineitem WHERE l_shipdate < DATE '1995-0{1 + k % 9}-01' "
           "GROUP BY l_returnflag" if template == "q_ship" else
           f"SELECT sum(l_extendedprice) FROM lineitem WHERE l_extendedprice > {1000 * k} AND 1 < 2")
    real = round(0.05 + 0.03 * k, 4)
    if strategy == "NO-PS":
        action, sketch, est, rows = "plain", None, None, 60000
    elif k == 0:
        action, sketch, est, rows = "capture", 1 if strategy == "CB-OPT-GB" else 11, real * 1.1, 60000
    elif strategy == "RAND-GB" and k == 3:
        action, sketch, est, rows = "no-go", None, 0.9, 60000
    else:
        action, sketch, est, rows = "reuse", 1 if strategy == "CB-OPT-GB" else 11, real * 0.95, int(60000 * real)
    base = {"NO-PS": 1.0, "CB-OPT-GB": 0.55, "RAND-GB": 0.7, "RAND-GB@1": 0.9}[strategy]
    secs = {"sampling": 0.02 if action != "plain" else 0.0, "estimation": 0.01 if est else 0.0,
            "capture": 0.4 if action == "capture" else 0.0, "maintenance": 0.0,
            "query": round(base + 0.01 * k, 3), "oracle": 0.0}
    secs["total"] = round(sum(v for p, v in secs.items() if p != "oracle"), 4)
    return {"strategy": strategy, "step": step, "template": template, "sql": sql,
            "decision": {"action": action, "reason": f"{action} because k={k}",
                         "attr": None if action == "plain" else "lineitem.l_orderkey",
                         "fragments": None if action == "plain" else 8},
            "sketch_id": sketch,
            "selectivity": {"estimated": est, "ci": [est * 0.9, est * 1.1] if est else None,
                            "real": real},
            "scan": {"files": rows // 10000 + 1, "bytes": rows * 120, "rows": rows},
            "result": {"rows": 3, "digest": f"d{step:02d}"}, "seconds": secs}


def synthetic_run(strategies=STRATEGIES) -> dict:
    """A realistic small complete run: ~10 query steps, 2 updates, 3 maintenance events."""
    steps, queries, k = [], [], 0
    for step in range(1, 13):
        if step in UPDATE_STEPS:
            steps.append({"step": step, "kind": "update", "table": UPDATE_STEPS[step], "inserts": 500,
                          "deletes": 20, "version": len([s for s in steps if s["kind"] == "update"]) + 1})
            continue
        qs = [_query(s, step, k) for s in strategies]
        steps.append({"step": step, "kind": "query", "template": qs[0]["template"],
                      "bindings": {"k": k}, "sql": qs[0]["sql"]})
        queries += qs
        k += 1
    maintenance = [
        {"strategy": "CB-OPT-GB", "step": 5, "trigger": "update", "sketch_id": 1, "new_sketch_id": 2,
         "how": "incremental", "seconds": 0.12, "delta_rows": 520, "recapture_seconds": 0.45},
        {"strategy": "RAND-GB", "step": 6, "trigger": "query", "sketch_id": 11, "new_sketch_id": 12,
         "how": "incremental", "seconds": 0.2, "delta_rows": 520, "recapture_seconds": None},
        {"strategy": "CB-OPT-GB", "step": 9, "trigger": "update", "sketch_id": 2, "new_sketch_id": 3,
         "how": "recapture", "seconds": 0.5, "delta_rows": 520, "recapture_seconds": 0.5},
    ]
    maintenance = [m for m in maintenance if m["strategy"] in strategies]
    per = {}
    for s in strategies:
        mine = [q for q in queries if q["strategy"] == s]
        acts = [q["decision"]["action"] for q in mine]
        per[s] = {"queries": len(mine), "cumulative_seconds": sum(q["seconds"]["total"] for q in mine),
                  "vs_no_ps": None, "rows_read": sum(q["scan"]["rows"] for q in mine),
                  "bytes_read": sum(q["scan"]["bytes"] for q in mine),
                  "files_read": sum(q["scan"]["files"] for q in mine),
                  "captured": acts.count("capture"), "reused": acts.count("reuse"),
                  "no_go": acts.count("no-go"), "plain": acts.count("plain"),
                  "mean_real_selectivity": sum(q["selectivity"]["real"] for q in mine) / max(1, len(mine)),
                  "seconds": {p: sum(q["seconds"][p] for q in mine)
                              for p in ("sampling", "estimation", "capture", "maintenance", "query")}}
    if "NO-PS" in per:
        for s in strategies:
            per[s]["vs_no_ps"] = per[s]["cumulative_seconds"] / per["NO-PS"]["cumulative_seconds"]
    return {
        "format": "advisor-run/1", "status": "complete",
        "workload": {"name": "tpch-mini", "path": "workloads/tpch-mini.yaml", "sha256": "ab" * 32,
                     "description": "Two lineitem templates & <b>two</b> update batches", "seed": 7,
                     "policy": "eager", "sample_rate": 0.01, "config": {"name": "tpch-mini"}},
        "environment": {"advisor": "0.1.0", "python": "3.11.2", "pyspark": "3.5.1", "java": "17.0.11",
                        "platform": "Linux-x86_64", "cpus": 2, "master": "local[2]",
                        "started": "2025-07-07T17:00:00Z", "finished": "2025-07-07T17:05:00Z"},
        "datasets": [{"name": "tpch", "sf": 0.01, "tables": {"lineitem": 60175, "orders": 15000}}],
        "prepare_seconds": {"load": 3.2, "layouts": 1.1, "bindings": 0.2, "batches": 0.4},
        "strategies": list(strategies), "steps": steps, "queries": queries, "maintenance": maintenance,
        "summary": {"answers_identical": True, "mismatches": [], "per_strategy": per},
    }


def write_run(tmp: Path, run: dict) -> Path:
    d = tmp / "run"
    d.mkdir(parents=True, exist_ok=True)
    (d / "run.json").write_text(json.dumps(run, indent=1))
    return d


class _Attrs(HTMLParser):
    """Collects every src/href attribute value and the body tag's attributes (script text is skipped)."""

    def __init__(self):
        super().__init__()
        self.links, self.body = [], {}

    def handle_starttag(self, tag, attrs):
        self.links += [v or "" for k, v in attrs if k in ("src", "href")]
        if tag == "body":
            self.body = dict(attrs)


def parse(html: str) -> _Attrs:
    p = _Attrs()
    p.feed(html)
    return p


def test_report_is_self_contained_and_complete(tmp_path):
    run = synthetic_run()
    d = write_run(tmp_path, run)
    out = write_report(d)
    assert out == d / "report.html" and out.exists()
    assert not list(d.glob(".report-*")), "temporary file left behind"
    html = out.read_text()
    p = parse(html)
    assert not [u for u in p.links if re.match(r"\s*(https?:)?//", u)], p.links
    assert not re.search(r"<script[^>]*\bsrc=", html) and not re.search(r"<link[^>]*\bhref=", html)
    assert p.body.get("data-errors") == ""
    assert "Plotly.newPlot" in html and html.count('class="chart"') == len(CHARTS) == 5
    for s in STRATEGIES:
        assert f'data-strategy="{s}"' in html
    rows = re.findall(r"<tr(?: class=\"mismatch\")?><td class=\"n\">(\d+)</td><td>([^<]+)</td>", html)
    assert len(rows) == len(run["queries"]) == 30
    assert rows[0] == ("1", "NO-PS") and rows[1] == ("1", "CB-OPT-GB")
    assert "answers identical across strategies: yes" in html and 'class="mismatch"' not in html
    assert "Two lineitem templates &amp; &lt;b&gt;two&lt;/b&gt;" in html  # escaped, not markup
    assert "PARTIAL RUN" not in html and "no maintenance events" not in html
    assert "l_extendedprice &gt; 2000" in html  # the SQL is in the table
    assert "3.11.2" in html and "local[2]" in html and "17.0.11" in html


def test_a_random_strategy_listed_as_draws_gets_a_card_with_their_mean(tmp_path):
    """RAND-GB and RAND-GB@1 are two draws of one random strategy: besides a card each, one card
    gives their mean ratio to NO-PS and their range (how the seed paper judges random strategies)."""
    run = synthetic_run(["NO-PS", "CB-OPT-GB", "RAND-GB", "RAND-GB@1"])
    html = write_report(write_run(tmp_path, run)).read_text()
    assert 'data-strategy="RAND-GB@1"' in html and html.count('data-draws=') == 1
    card = html.split('data-draws="RAND-GB"', 1)[1].split("</div>", 1)[0]
    per = run["summary"]["per_strategy"]
    lo, hi = sorted([per["RAND-GB"]["vs_no_ps"], per["RAND-GB@1"]["vs_no_ps"]])
    assert lo < hi  # the draws differ, so mean, lowest and highest are three numbers
    assert "mean of 2 draws" in card and "RAND-GB, RAND-GB@1" in card
    assert f"{(lo + hi) / 2:.3f}×" in card and f"{lo:.3f} · {hi:.3f}" in card
    assert 'data-draws=' not in write_report(write_run(tmp_path / "one", synthetic_run())).read_text()


def test_mismatch_and_partial_are_flagged(tmp_path):
    run = synthetic_run()
    run["status"] = "partial"
    run["environment"]["finished"] = None
    run["summary"]["answers_identical"] = False
    run["summary"]["mismatches"] = [{"step": 3, "strategy": "RAND-GB"}]
    html = write_report(write_run(tmp_path, run), tmp_path / "elsewhere" / "r.html").read_text()
    assert "PARTIAL RUN" in html and "not finished" in html
    assert 'class="card bad" id="answers"' in html
    assert "answers identical across strategies: no" in html and "step 3 · RAND-GB" in html
    assert html.count('<tr class="mismatch"><td class="n">3</td><td>RAND-GB</td>') == 1


def test_empty_ish_runs_render(tmp_path):
    """No NO-PS (no ratios), a strategy with no queries, no sketches, no maintenance, no summary."""
    run = synthetic_run(["RAND-GB"])
    run["strategies"].append("OPT")  # listed but ran nothing
    for q in run["queries"]:
        q["sketch_id"], q["selectivity"] = None, {"estimated": None, "ci": None, "real": None}
    run["maintenance"], run["summary"] = [], {"answers_identical": True, "mismatches": []}
    html = write_report(write_run(tmp_path, run)).read_text()
    assert "no maintenance events" in html and "no query used a sketch" in html
    assert "No NO-PS run" in html and 'data-strategy="OPT"' in html
    empty = copy.deepcopy(run)
    empty["queries"], empty["steps"], empty["strategies"] = [], [], []
    html = write_report(write_run(tmp_path / "e", empty)).read_text()
    assert html.count('class="chart"') == 5 and "no queries" in html


def test_bad_run_dirs_raise(tmp_path):
    with pytest.raises(RunFormatError, match="no run log"):
        write_report(tmp_path)
    with pytest.raises(RunFormatError, match="no run log"):
        load_run(tmp_path / "missing")
    run = synthetic_run()
    run["format"] = "advisor-run/0"
    d = write_run(tmp_path, run)
    with pytest.raises(RunFormatError, match="'format'"):
        write_report(d)
    (d / "run.json").write_text("{not json")
    with pytest.raises(RunFormatError, match="not valid JSON"):
        load_run(d)
    assert not (d / "report.html").exists()


def test_queries_timed_after_a_heap_release_are_counted_on_their_strategys_card(tmp_path):
    """Under --isolate a child short of memory gives JVM heap back before a step, and that step's
    time includes the heap's regrowth (``workloads.replay.heap_release``): the card says how many queries it touched."""
    from workloads.replay.run_summary import summarize

    run = synthetic_run()
    touched = [q for q in run["queries"] if q["strategy"] == "CB-OPT-GB"][:2]
    for q in touched:
        q["heap"] = {"released_bytes": 700 << 20, "seconds": 0.2}
    run["summary"] = summarize(run["strategies"], run["queries"], run["maintenance"])
    assert {s: p["heap_releases"] for s, p in run["summary"]["per_strategy"].items()} == {
        "NO-PS": 0, "CB-OPT-GB": 2, "RAND-GB": 0}
    html = write_report(write_run(tmp_path, run)).read_text()
    assert html.count('class="heap"') == 1
    card = html.split('data-strategy="CB-OPT-GB"', 1)[1].split("</div>", 1)[0]
    assert "timed after a heap release</td><td>2 queries" in card
