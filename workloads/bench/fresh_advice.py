"""Advice on freshly loaded tables: for each query of a workload file, `recommend` (what-if, nothing
captured or built) and then the exact size of the sketch on its first group-by attribute (one
capture), side by side.  Counts the go decisions among queries whose exact sketch is small."""

from __future__ import annotations

from advisor.plan.parse import parse_sql
from advisor.selection.recommend import recommend, what_if_params
from advisor.sketch.capture import capture
from advisor.sketch.lookup import sketch_rows
from workloads.replay.workload_file import load_workload


def bench_fresh_advice(ctx, workload: str, small: float = 0.05, uses: float | None = None) -> dict:
    """Per template: the recommendation (go, pick, layout, reason) and the exact selectivity on the
    recommended (else first group-by) attribute."""
    wl = load_workload(workload)
    cat = ctx.catalog
    rows = []
    for name, t in wl.templates.items():
        rec = recommend(ctx, t.sql, "CB-OPT-GB", 0.05, capture=False, params=what_if_params(uses))
        d = rec["decision"]
        gb = next((c for c in rec["candidates"] if "gb" in c["roles"] and c["safe"]), None)
        table, attr = (d.get("table") or rec.get("table"), d["attr"]) if d.get("attr") and "&" not in d["attr"] \
            else ((gb["table"], gb["attr"]) if gb else (rec.get("table"), None))
        sel = None
        if attr:
            q = parse_sql(t.sql, ctx.schema_lookup())
            sk = capture(cat, q, {table: attr}, 1000).sketch
            sel = sketch_rows(cat, sk) / max(1, cat.version(table).rows)
        pick = next((c for c in rec["candidates"] if c["picked"]), None)
        rows.append({"template": name, "table": table, "attr": attr, "exact_selectivity": sel, "go": d["go"],
                     "layout": (d.get("layout") or {}).get("attr"), "net_s": pick["net_s"] if pick else None,
                     "reason": d["reason"]})
    small_rows = [r for r in rows if r["exact_selectivity"] is not None and r["exact_selectivity"] <= small]
    return {"rows": rows, "small": len(small_rows), "go_among_small": sum(r["go"] for r in small_rows)}
