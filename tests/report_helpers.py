"""Report fixtures shared by the report, browser and replay tests: a hand-built run log
(``synthetic_run``), writing it as a run directory, parsing the page's links and body attributes,
and the DOM of a page after headless Chromium ran its scripts."""

from __future__ import annotations

import json
import os
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

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


CHROMIUM = Path("/usr/bin/chromium")


def dump_dom(page: Path, profile: Path) -> str:
    """The DOM after the page's scripts ran (virtual time lets plotly's promises settle)."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make test`, which installs it "
                    "(scripts/ensure-chromium)", pytrace=False)
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", f"--user-data-dir={profile}", "--virtual-time-budget=10000",
           "--dump-dom", page.resolve().as_uri()]
    env = {**os.environ, "http_proxy": "", "https_proxy": ""}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
    assert r.returncode == 0 and "<body" in r.stdout, f"chromium failed ({r.returncode}): {r.stderr[-2000:]}"
    return r.stdout


def body_of(page: Path, tmp: Path) -> dict:
    return parse(dump_dom(page, tmp / "profile")).body
