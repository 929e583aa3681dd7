"""report.html really draws in a browser: headless Chromium loads the file offline and the page's
render-check hooks report body[data-charts] == body[data-expected] == 5 with no JS errors.

Why a real browser: the Python side can only prove the figure JSON exists; a bad trace, an
escaping bug or a broken inline plotly.js only shows up when plotly.js runs.  Chromium comes
from `make test` (scripts/ensure-chromium); without it this test fails rather than skips, so a
missing browser can never make the suite look green.
"""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path

import pytest
from test_report import parse, synthetic_run, write_run

from reports.html import CHARTS, write_report

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


def test_all_charts_render(tmp_path):
    page = write_report(write_run(tmp_path, synthetic_run()))
    body = body_of(page, tmp_path)
    assert body.get("data-errors") == "", body.get("data-errors")
    assert body.get("data-expected") == str(len(CHARTS)) == "5"
    assert body.get("data-charts") == "5", body


def test_empty_ish_run_renders(tmp_path):
    """No NO-PS, a strategy without queries, no sketch use, no maintenance: still 5 charts."""
    run = synthetic_run(["RAND-GB"])
    run["strategies"].append("OPT")
    for q in run["queries"]:
        q["sketch_id"], q["selectivity"] = None, {"estimated": None, "ci": None, "real": None}
    run["maintenance"] = []
    body = body_of(write_report(write_run(tmp_path, run)), tmp_path)
    assert (body.get("data-errors"), body.get("data-expected"), body.get("data-charts")) == ("", "5", "5")


def test_hooks_report_a_broken_chart(tmp_path):
    """The hooks are not vacuous: a chart whose spec is garbage is counted out and its error shown."""
    page = write_report(write_run(tmp_path, copy.deepcopy(synthetic_run())))
    html = page.read_text()
    marker = '<script type="application/json" id="fig-estimate">'
    assert marker in html
    page.write_text(html.replace(marker, marker + "garbage"))
    body = body_of(page, tmp_path)
    assert body.get("data-expected") == "5" and body.get("data-charts") == "4", body
    assert "chart-estimate" in body.get("data-errors", ""), body
