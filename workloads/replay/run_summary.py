"""The ``summary`` block of a run log, computed from its query records (pure; no Spark)."""

from __future__ import annotations

import statistics

from reports.draws import draw_means

PHASES = ("sampling", "estimation", "capture", "maintenance", "query", "other")


def summarize(strategies: list[str], queries: list[dict], maintenance: list[dict],
              flushes: dict[str, float] | None = None) -> dict:
    """Per-strategy totals, the ratio of cumulative time to NO-PS (cumulative time = every query's
    total plus the maintenance run eagerly at update steps plus the strategy's final write of its
    operator states, ``flushes``), and whether every strategy returned the same answer as NO-PS
    (or, without NO-PS, as the first strategy) at every step; ``draws`` averages a random strategy
    listed as several draws (`reports.draws`)."""
    per = {}
    for s in strategies:
        qs = [q for q in queries if q["strategy"] == s]
        sels = [q["selectivity"]["real"] for q in qs if q["selectivity"]["real"] is not None]
        acts = [q["decision"]["action"] for q in qs]
        flush = float((flushes or {}).get(s, 0.0))
        upd = sum(m["seconds"] for m in maintenance if m["strategy"] == s and m["trigger"] == "update") + flush
        per[s] = {"queries": len(qs),
                  "cumulative_seconds": round(sum(q["seconds"]["total"] for q in qs) + upd, 4),
                  "vs_no_ps": None,
                  "rows_read": sum(q["scan"]["rows"] for q in qs),
                  "bytes_read": sum(q["scan"]["bytes"] for q in qs),
                  "files_read": sum(q["scan"]["files"] for q in qs),
                  "captured": acts.count("capture"), "reused": acts.count("reuse"),
                  "no_go": acts.count("no-go"), "plain": acts.count("plain") + acts.count("unsupported"),
                  "mean_real_selectivity": round(statistics.mean(sels), 6) if sels else None,
                  "maintenance_events": sum(1 for m in maintenance if m["strategy"] == s and m["how"] != "current"),
                  "state_flush_seconds": round(flush, 4),
                  # query steps timed right after the JVM gave heap back under memory pressure
                  # (``workloads.replay.heap_release``): each includes the heap's regrowth
                  "heap_releases": sum(1 for q in qs if q.get("heap")),
                  "maintained_unequal": sum(1 for m in maintenance
                                            if m["strategy"] == s and m.get("equal_to_recapture") is False),
                  "seconds": {p: round(sum(q["seconds"].get(p, 0.0) for q in qs)
                                       + (upd if p == "maintenance" else 0.0), 4) for p in PHASES}}
    ref = "NO-PS" if "NO-PS" in per else (strategies[0] if strategies else None)
    if "NO-PS" in per and per["NO-PS"]["cumulative_seconds"] > 0:
        base = per["NO-PS"]["cumulative_seconds"]
        for s in per:
            # compare over the steps both strategies completed (a partial run may be uneven)
            done = {q["step"] for q in queries if q["strategy"] == s}
            b = sum(q["seconds"]["total"] for q in queries if q["strategy"] == "NO-PS" and q["step"] in done)
            per[s]["vs_no_ps"] = round(per[s]["cumulative_seconds"] / (b if b > 0 else base), 4)
    answers = {}
    for q in queries:
        answers.setdefault(q["step"], {})[q["strategy"]] = q["result"]["digest"]
    mismatches = []
    for step, by in sorted(answers.items()):
        if ref in by:
            mismatches += [{"step": step, "strategy": s} for s, d in sorted(by.items()) if d != by[ref]]
    return {"answers_identical": not mismatches, "reference": ref, "mismatches": mismatches,
            "maintained_equal_to_recapture": not any(p["maintained_unequal"] for p in per.values()),
            "per_strategy": per, "draws": draw_means(per)}
