"""`advisor run SQL` and `advisor run --file FILE`: queries served through the advise path
(``advisor.serve``), one JVM for all of them, a line per query saying what happened and why."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from rich.table import Table

from advisor.cli.query_file import read_queries
from advisor.engine.execute import versions_now
from advisor.errors import BadInput, CheckFailed
from advisor.plan.parse import parse_sql
from advisor.serve.decision_record import one_line
from advisor.serve.query_path import serve_query
from advisor.serve.settings import AdviseSettings


def as_of_versions(c, sql: str, specs: list[str]) -> dict | None:
    """``--as-of TABLE=VERSION`` pins over the query's current versions (None without pins)."""
    if not specs:
        return None
    versions = versions_now(c.catalog, parse_sql(sql, c.schema_lookup()))
    for spec in specs:
        t, _, v = spec.partition("=")
        if t.lower() not in versions or not v.isdigit():
            raise BadInput(f"--as-of expects TABLE=VERSION for a table the query reads, got {spec!r}")
        versions[t.lower()] = c.catalog.version(t.lower(), int(v)).version
    return versions


def run_one(c, out, sql: str, s: AdviseSettings, as_of: list[str], as_json: bool, show: int) -> None:
    """One query: its rows (up to ``show``), then the decision line (``--json``: result + record)."""
    served = serve_query(c, sql, s, versions=as_of_versions(c, sql, as_of))
    rec, res = served.record, served.result
    if rec["decision"]["action"] == "unsupported":
        print(f"note: {rec['decision']['reason']}", file=sys.stderr)
    if as_json:
        sys.stdout.write(json.dumps(res.to_json() | {"decision": rec}, default=str, indent=2) + "\n")
        return
    tab = Table(*res.columns)
    for r in res.rows[:show]:
        tab.add_row(*[str(x) for x in r])
    out.print(tab)
    m = res.metrics
    out.print(f"{len(res.rows)} row(s) in {res.seconds:.2f}s; read {m.rows_read:,} rows from {m.files_read} files "
              f"of {m.bytes_read / 1e6:.1f} MB")
    out.print(one_line(rec), highlight=False, markup=False, soft_wrap=True)


def run_file(c, out, path: Path, s: AdviseSettings, compare: bool, as_json: bool, show: int = 50) -> None:
    """Every query of the file in order through the advise path (with ``compare``, each also run
    plainly, answers checked equal); a line per query, then a summary.  With ``as_json`` each
    query's record carries its answer (``columns``, up to ``show`` ``rows`` and the total
    ``row_count``), so a dashboard can use it."""
    queries = read_queries(path)
    plain_s = AdviseSettings(strategy=s.strategy, use=False)
    t_all = time.perf_counter()
    recs, plains = [], []
    for i, entry in enumerate(queries, 1):
        served = serve_query(c, entry["sql"], s, step=i)
        rec = served.record | {"at": entry["at"]}
        if as_json:
            res = served.result
            rec["answer"] = {"columns": list(res.columns), "rows": [list(r) for r in res.rows[:show]],
                             "row_count": len(res.rows), "truncated": len(res.rows) > show}
        recs.append(rec)
        if compare:
            plains.append(serve_query(c, entry["sql"], plain_s, step=i).record)
        if not as_json:
            out.print(f"[{i}/{len(queries)}] {one_line(rec)}", highlight=False, markup=False, soft_wrap=True)
    summary = summarize(recs, plains, time.perf_counter() - t_all)
    if as_json:
        sys.stdout.write(json.dumps({"queries": recs, "plain": plains or None, "summary": summary},
                                    default=str, indent=2) + "\n")
    else:
        out.print(summary_line(summary), highlight=False, markup=False, soft_wrap=True)
    if compare and summary["mismatches"]:
        raise CheckFailed(f"answers differ from plain runs at queries {summary['mismatches']}")


def summarize(recs: list[dict], plains: list[dict], seconds: float) -> dict:
    """Totals over a file's decision records (and its plain runs with ``--compare``)."""
    acts = [r["decision"]["action"] for r in recs]
    out = {"queries": len(recs), "seconds": round(seconds, 3),
           "query_seconds": round(sum(r["seconds"]["total"] for r in recs), 3),
           "rows_read": sum(r["scan"]["rows"] for r in recs),
           "captured": acts.count("capture"), "reused": acts.count("reuse"),
           "no_go": acts.count("no-go"), "plain": acts.count("plain") + acts.count("unsupported"),
           "layouts_built": sum(1 for r in recs if (r["decision"].get("layout") or {}).get("built")),
           "plain_seconds": None, "plain_rows_read": None, "mismatches": []}
    if plains:
        out["plain_seconds"] = round(sum(p["seconds"]["total"] for p in plains), 3)
        out["plain_rows_read"] = sum(p["scan"]["rows"] for p in plains)
        out["mismatches"] = [i for i, (r, p) in enumerate(zip(recs, plains), 1)
                             if r["result"]["digest"] != p["result"]["digest"]]
    return out


def summary_line(sm: dict) -> str:
    """The summary sentence of `run --file`."""
    line = (f"{sm['queries']} queries in {sm['seconds']:.1f} s (one JVM): read {sm['rows_read']:,} rows; "
            f"{sm['captured']} captured, {sm['reused']} reused, {sm['no_go']} no-go, {sm['plain']} plain"
            + (f", {sm['layouts_built']} layout(s) built" if sm["layouts_built"] else ""))
    if sm["plain_seconds"] is not None:
        line += (f"; plain runs: {sm['plain_seconds']:.1f} s, {sm['plain_rows_read']:,} rows "
                 f"({sm['query_seconds'] / max(sm['plain_seconds'], 1e-9):.2f}x the time, "
                 f"{sm['rows_read'] / max(sm['plain_rows_read'], 1):.1%} of the rows); answers "
                 + ("identical" if not sm["mismatches"] else f"DIFFER at {sm['mismatches']}"))
    return line
