"""report.html really draws in a browser: headless Chromium loads the file offline and the page's
render-check hooks report body[data-charts] == body[data-expected] == 5 with no JS errors.

Why a real browser: the Python side can only prove the figure JSON exists; a bad trace, an
escaping bug or a broken inline plotly.js only shows up when plotly.js runs.  Chromium comes
from `make test` (scripts/ensure-chromium); without it this test fails rather than skips, so a
missing browser can never make the suite look green.
"""

from __future__ import annotations

import copy

from report_helpers import body_of, synthetic_run, write_run

from reports.html import CHARTS, write_report


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
