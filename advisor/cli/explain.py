"""`advisor explain`: the plan, candidate attributes per table with Z3 safety verdicts and reasons,
and which stored sketches could serve the query (and why the others cannot)."""

from __future__ import annotations

from rich.table import Table

from advisor.engine.execute import versions_now
from advisor.errors import Unsupported
from advisor.plan.parse import parse_sql
from advisor.plan.show import tree_lines
from advisor.recursive.advise import explain_recursive
from advisor.recursive.shape import looks_recursive
from advisor.safety.static_check import check_safety
from advisor.selection.candidates import candidate_columns
from advisor.sketch.lookup import usable_sketches
from advisor.warehouse.column_stats import stats_for_query


def explain(ctx, sql: str) -> dict:
    if looks_recursive(sql):
        return explain_recursive(sql)
    try:
        q = parse_sql(sql, ctx.schema_lookup())
    except Unsupported as e:
        return {"sql": sql, "supported": False, "reason": str(e), "plan": [], "tables": [], "sketches": []}
    cat = ctx.catalog
    versions = versions_now(cat, q)
    stats = stats_for_query(cat, q, versions)
    tables = []
    for t in sorted({s.table for s in q.scans()}):
        scans = [s for s in q.scans() if s.table == t]
        cands = []
        for a in candidate_columns(cat, t):
            X = {c.name for s in scans for c in s.cols if c.source == a}
            v = check_safety(q.root, X, stats)
            cands.append({"attr": a, "safe": bool(v.safe), "reason": v.reason})
        tables.append({"table": t, "version": versions[t], "accesses": len(scans), "candidates": cands})
    good, bad = usable_sketches(cat, q, versions)
    sk = [{"id": s.id, "usable": True, "reason": "identical bindings" if tuple(s.bindings) == tuple(q.bindings)
           else "reuse proven by Z3", "parts": [p.to_json() | {"fragments": len(p.fragments)} for p in s.parts]}
          for s in good]
    sk += [{"id": s.id, "usable": False, "reason": r} for s, r in bad]
    return {"sql": sql, "supported": True, "reason": None, "template": q.template, "bindings": list(q.bindings),
            "plan": tree_lines(q.root), "tables": tables, "sketches": sk}


def render(console, info: dict) -> None:
    if not info["supported"]:
        console.print(f"[bold]not sketchable[/bold]: {info['reason']} (the query runs without a sketch)")
        return
    console.print("[bold]plan[/bold]")
    for line in info["plan"]:
        console.print("  " + line, markup=False)
    for t in info["tables"]:
        where = f"version {t['version']}, " if t["version"] is not None else ""
        tab = Table("attribute", "safe", "reason", title=f"{t['table']} ({where}{t['accesses']} access(es))")
        for c in t["candidates"]:
            tab.add_row(c["attr"], "yes" if c["safe"] else "no", c["reason"])
        console.print(tab)
    if not info["sketches"]:
        console.print("no stored sketch for this query template")
    for s in info["sketches"]:
        console.print(f"sketch {s['id']}: {'usable' if s['usable'] else 'not usable'} ({s['reason']})")
