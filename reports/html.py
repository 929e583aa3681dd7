"""`advisor report RUN_DIR`: turn a replay's run.json into one self-contained ``report.html``.

Why one file with everything inline: reports are archived next to the run and opened on
machines without network access, so the page embeds plotly.js (``get_plotlyjs()``) and the
figures as JSON, loads nothing from a CDN and needs no server.  The page also carries
render-check hooks (``body[data-charts|data-expected|data-errors]``) so a headless browser
test can prove every chart actually drew.

Only reads the run log (via `reports.schema.load_run`); never imports pyspark or advisor.cli.main.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import jinja2
import plotly.graph_objects as go
import plotly.offline

from reports.draws import draw_means
from reports.schema import load_run, run_path

PHASES = ("sampling", "estimation", "capture", "maintenance", "query", "other")
REFERENCE = "NO-PS"
TEMPLATES = Path(__file__).parent / "templates"
# Chart ids in page order; the browser test expects exactly this many plotly charts.
CHARTS = ("cumulative", "selectivity", "estimate", "maintenance", "phases")


# ---------------------------------------------------------------- derived numbers

def _num(x, default=0.0):
    """A number from the log, or `default` when the field is null/missing/garbled."""
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else default


def _secs(q: dict, key: str = "total") -> float:
    return float(_num((q.get("seconds") or {}).get(key)))


def _ordered_queries(run: dict) -> dict[str, list[dict]]:
    """Queries per strategy (replay order of strategies, then any unlisted), each sorted by step."""
    names = list(run.get("strategies") or [])
    by: dict[str, list[dict]] = {s: [] for s in names}
    for q in run["queries"]:
        by.setdefault(q.get("strategy", "?"), []).append(q)
    for qs in by.values():
        qs.sort(key=lambda q: _num(q.get("step")))
    return by


def strategy_stats(run: dict) -> list[dict]:
    """One card's numbers per strategy: the summary's values, recomputed from queries if absent.

    ``skipped`` is the fraction of NO-PS's rows this strategy did not read; it and the ratio are
    None when NO-PS is missing or read nothing (a ratio against zero means nothing).
    """
    per = ((run.get("summary") or {}).get("per_strategy")) or {}
    out = []
    for name, qs in _ordered_queries(run).items():
        acts = [(q.get("decision") or {}).get("action") for q in qs]
        scans = [q.get("scan") or {} for q in qs]
        base = {
            "queries": len(qs), "cumulative_seconds": sum(_secs(q) for q in qs), "vs_no_ps": None,
            "rows_read": sum(int(_num(s.get("rows"), 0)) for s in scans),
            "bytes_read": sum(int(_num(s.get("bytes"), 0)) for s in scans),
            "files_read": sum(int(_num(s.get("files"), 0)) for s in scans),
            "captured": acts.count("capture"), "reused": acts.count("reuse"),
            "no_go": acts.count("no-go"), "plain": acts.count("plain"),
            "heap_releases": sum(1 for q in qs if q.get("heap")),
            "seconds": {p: sum(_secs(q, p) for q in qs) for p in PHASES},
        }
        given = per.get(name) or {}
        base.update({k: v for k, v in given.items() if v is not None or k == "vs_no_ps"})
        base["seconds"] = {p: float(_num((base.get("seconds") or {}).get(p))) for p in PHASES}
        base["name"] = name
        out.append(base)
    ref = next((s for s in out if s["name"] == REFERENCE), None)
    for s in out:
        s["skipped"] = None
        if ref is not None and _num(ref["rows_read"]) > 0:
            s["skipped"] = 1.0 - _num(s["rows_read"]) / ref["rows_read"]
        if s.get("vs_no_ps") is None and ref is not None and _num(ref["cumulative_seconds"]) > 0:
            s["vs_no_ps"] = _num(s["cumulative_seconds"]) / ref["cumulative_seconds"]
    return out


# ---------------------------------------------------------------- figures

def _layout(fig: go.Figure, title: str, x: str, y: str) -> go.Figure:
    fig.update_layout(title=title, template="plotly_white", height=420,
                      margin=dict(l=60, r=20, t=50, b=60), xaxis_title=x, yaxis_title=y,
                      legend=dict(orientation="h", y=-0.2))
    return fig


def _note(fig: go.Figure, text: str) -> go.Figure:
    """A visible in-plot message for a chart that has no data (the chart still renders)."""
    fig.add_annotation(text=text, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
                       font=dict(size=18, color="#888"))
    return fig


def fig_cumulative(run: dict) -> go.Figure:
    """The seed papers' end-to-end figure: cumulative seconds.total vs query number; maintenance
    run eagerly at an update step is added before the next query."""
    fig = go.Figure()
    for name, qs in _ordered_queries(run).items():
        upd = {}
        for m in run.get("maintenance") or []:
            if m.get("strategy") == name and m.get("trigger") == "update":
                upd[_num(m.get("step"))] = upd.get(_num(m.get("step")), 0.0) + _num(m.get("seconds"))
        acc, ys, last = 0.0, [], -1.0
        for q in qs:
            acc += sum(v for k, v in upd.items() if last < k < _num(q.get("step")))
            last = _num(q.get("step"))
            acc += _secs(q)
            ys.append(acc)
        fig.add_trace(go.Scatter(
            x=list(range(1, len(qs) + 1)), y=ys, mode="lines+markers", name=name,
            customdata=[[q.get("step"), q.get("template"), (q.get("decision") or {}).get("action")]
                        for q in qs],
            hovertemplate="query %{x} (step %{customdata[0]}, %{customdata[1]})<br>"
                          "%{customdata[2]}<br>cumulative %{y:.3f}s<extra>" + name + "</extra>"))
    # Update batches fall between queries: mark them as dashed lines after the preceding query.
    nq = 0
    for st in sorted(run.get("steps") or [], key=lambda s: _num(s.get("step"))):
        if st.get("kind") == "query":
            nq += 1
        elif st.get("kind") == "update":
            fig.add_vline(x=nq + 0.5, line_dash="dot", line_color="#aaa")
    if not run["queries"]:
        _note(fig, "no queries")
    return _layout(fig, "Cumulative time per strategy (update batches dotted)", "query number",
                   "cumulative seconds")


def fig_selectivity(run: dict) -> go.Figure:
    """Distribution of the real selectivity of the queries that ran on a sketch."""
    fig = go.Figure()
    for name, qs in _ordered_queries(run).items():
        ys = [(q.get("selectivity") or {}).get("real") for q in qs if q.get("sketch_id") is not None]
        ys = [y for y in ys if isinstance(y, (int, float))]
        if ys:
            fig.add_trace(go.Box(y=ys, name=name, boxpoints="all", jitter=0.4, pointpos=0))
    if not fig.data:
        _note(fig, "no query used a sketch")
    return _layout(fig, "Sketch selectivity (queries that used a sketch)", "strategy",
                   "real selectivity")


def fig_estimate(run: dict) -> go.Figure:
    """Estimated vs real selectivity, with y = x and the error in the hover."""
    fig, hi = go.Figure(), 0.0
    for name, qs in _ordered_queries(run).items():
        pts = [(q, q["selectivity"]) for q in qs if isinstance(q.get("selectivity"), dict)
               and isinstance(q["selectivity"].get("estimated"), (int, float))
               and isinstance(q["selectivity"].get("real"), (int, float))]
        if not pts:
            continue
        xs, ys = [s["real"] for _, s in pts], [s["estimated"] for _, s in pts]
        hi = max(hi, *xs, *ys)
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="markers", name=name,
            customdata=[[q.get("step"), q.get("template"), s["estimated"] - s["real"],
                         str(s.get("ci") or "—")] for q, s in pts],
            hovertemplate="step %{customdata[0]} (%{customdata[1]})<br>real %{x:.4f}<br>"
                          "estimated %{y:.4f}<br>error %{customdata[2]:+.4f}<br>"
                          "CI %{customdata[3]}<extra>" + name + "</extra>"))
    if fig.data:
        top = hi * 1.05 or 1.0
        fig.add_trace(go.Scatter(x=[0, top], y=[0, top], mode="lines", name="y = x",
                                 line=dict(dash="dash", color="#888"), hoverinfo="skip"))
    else:
        _note(fig, "no query has both an estimated and a real selectivity")
    return _layout(fig, "Estimated vs real selectivity", "real selectivity",
                   "estimated selectivity")


def fig_maintenance(run: dict) -> go.Figure:
    """One bar pair per maintenance event: maintenance seconds and (if measured) recapture."""
    evs = sorted(run.get("maintenance") or [],
                 key=lambda e: (_num(e.get("step")), str(e.get("strategy"))))
    fig = go.Figure()
    if not evs:
        fig.add_trace(go.Bar(x=[], y=[], name="maintenance"))
        _note(fig, "no maintenance events")
        return _layout(fig, "Maintenance vs recapture per event", "event", "seconds")
    # "#n" keeps labels unique when one strategy maintains several sketches in the same step.
    labels = [f"#{i + 1} {e.get('strategy')} step {e.get('step')}" for i, e in enumerate(evs)]
    info = [[e.get("how"), e.get("delta_rows"), e.get("sketch_id"), e.get("new_sketch_id"),
             e.get("trigger"), "not measured" if e.get("recapture_seconds") is None
             else f"{_num(e['recapture_seconds']):.3f}s"] for e in evs]
    hover = ("%{x} (%{customdata[4]})<br>%{y:.3f}s<br>how: %{customdata[0]}, delta rows "
             "%{customdata[1]}<br>sketch %{customdata[2]} → %{customdata[3]}<br>"
             "recapture %{customdata[5]}<extra></extra>")
    fig.add_trace(go.Bar(x=labels, y=[_num(e.get("seconds")) for e in evs], name="maintenance",
                         customdata=info, hovertemplate=hover, textposition="outside",
                         text=["recapture not measured" if e.get("recapture_seconds") is None
                               else "" for e in evs]))
    rec = [(lab, e, inf) for lab, e, inf in zip(labels, evs, info)
           if isinstance(e.get("recapture_seconds"), (int, float))]
    if rec:
        fig.add_trace(go.Bar(x=[r[0] for r in rec], y=[r[1]["recapture_seconds"] for r in rec],
                             name="recapture", customdata=[r[2] for r in rec], hovertemplate=hover))
    fig.update_layout(barmode="group")
    fig = _layout(fig, "Maintenance vs recapture per event", "event", "seconds")
    fig.update_layout(height=460, margin=dict(b=130), xaxis_tickangle=-20)
    return fig


def fig_phases(stats: list[dict]) -> go.Figure:
    """Where each strategy's time went: stacked phase seconds."""
    fig = go.Figure()
    names = [s["name"] for s in stats]
    for p in PHASES:
        fig.add_trace(go.Bar(x=names, y=[s["seconds"][p] for s in stats], name=p,
                             hovertemplate="%{x}: %{y:.3f}s<extra>" + p + "</extra>"))
    fig.update_layout(barmode="stack")
    if not names:
        _note(fig, "no strategies")
    return _layout(fig, "Time split per strategy", "strategy", "seconds")


def _fig_json(fig: go.Figure) -> str:
    """Figure JSON safe to sit inside a <script> element."""
    return fig.to_json().replace("</", "<\\/")


# ---------------------------------------------------------------- the page

def _fmt_int(x) -> str:
    return f"{int(x):,}" if isinstance(x, (int, float)) and not isinstance(x, bool) else "—"


def _fmt_bytes(x) -> str:
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return "—"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(x) < 1024 or unit == "TiB":
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    return "—"  # unreachable


def _fmt_num(x, spec: str = ".3f") -> str:
    return format(x, spec) if isinstance(x, (int, float)) and not isinstance(x, bool) else "—"


def _fmt_pct(x) -> str:
    return f"{x * 100:.1f}%" if isinstance(x, (int, float)) and not isinstance(x, bool) else "—"


def _rows(run: dict) -> list[dict]:
    """The per-query table: step order, then replay order of strategies; mismatches flagged."""
    order = {s: i for i, s in enumerate(run.get("strategies") or [])}
    bad = {(m.get("step"), m.get("strategy"))
           for m in ((run.get("summary") or {}).get("mismatches") or []) if isinstance(m, dict)}
    qs = sorted(run["queries"], key=lambda q: (_num(q.get("step")),
                                               order.get(q.get("strategy"), len(order))))
    out = []
    for q in qs:
        d, sel = q.get("decision") or {}, q.get("selectivity") or {}
        out.append({"step": q.get("step"), "strategy": q.get("strategy"),
                    "template": q.get("template"), "action": d.get("action"),
                    "reason": d.get("reason") or "", "attr": d.get("attr"),
                    "sketch_id": q.get("sketch_id"), "est": sel.get("estimated"),
                    "real": sel.get("real"), "rows": (q.get("scan") or {}).get("rows"),
                    "seconds": (q.get("seconds") or {}).get("total"), "sql": q.get("sql") or "",
                    "mismatch": (q.get("step"), q.get("strategy")) in bad})
    return out


def render(run: dict) -> str:
    """The report page for an already-validated run log."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             autoescape=jinja2.select_autoescape(["html", "j2"]),
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.Undefined)
    env.filters.update(int=_fmt_int, bytes=_fmt_bytes, num=_fmt_num, pct=_fmt_pct)
    stats = strategy_stats(run)
    figs = {"cumulative": fig_cumulative(run), "selectivity": fig_selectivity(run),
            "estimate": fig_estimate(run), "maintenance": fig_maintenance(run),
            "phases": fig_phases(stats)}
    summary = run.get("summary") or {}
    steps = run.get("steps") or []
    return env.get_template("report.html.j2").render(
        run=run, workload=run.get("workload") or {}, env=run.get("environment") or {},
        status=run.get("status", "unknown"), stats=stats, reference=REFERENCE,
        draws=draw_means({s["name"]: s for s in stats}),
        has_reference=any(s["name"] == REFERENCE for s in stats),
        identical=summary.get("answers_identical"), mismatches=summary.get("mismatches") or [],
        n_queries=sum(1 for s in steps if s.get("kind") == "query"),
        n_updates=sum(1 for s in steps if s.get("kind") == "update"),
        charts=[(cid, _fig_json(figs[cid])) for cid in CHARTS], rows=_rows(run),
        plotlyjs=plotly.offline.get_plotlyjs().replace("</script", "<\\/script"))


def write_report(run_dir: str | Path, out: Path | None = None) -> Path:
    """Render RUN_DIR/run.json to `out` (default RUN_DIR/report.html) atomically; returns the path.

    Raises `reports.schema.RunFormatError` if the run log is missing or malformed.  The page is
    written to a temporary file in the target directory and moved into place, so a reader never
    sees a half-written report.
    """
    run = load_run(run_dir)
    out = Path(out) if out is not None else run_path(run_dir).parent / "report.html"
    html = render(run)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".html.tmp", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(html)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a report is meant to be shared
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out
