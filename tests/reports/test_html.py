"""`reports.html.write_report` on hand-built run logs (no Spark): the page is self-contained,
names every strategy, has the per-query table, and bad run directories fail with RunFormatError.

The run log comes from ``report_helpers``; test_report_browser.py checks the charts actually draw.
"""

from __future__ import annotations

import copy
import re

import pytest
from report_helpers import STRATEGIES, parse, synthetic_run, write_run

from reports.html import CHARTS, write_report
from reports.schema import RunFormatError, load_run


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
