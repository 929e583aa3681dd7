"""Two-attribute sizing accuracy (``advisor.selection.attribute_pairs``): on the advice harness's generated
queries whose best single candidate is weak, each pair's estimated size against the exact size of
the conjunction of the two captured sketches, and whether a pair beats the best single attribute.

    python -m workloads.bench.pair_accuracy --warehouse W --datasets flights,crimes --queries 100 --out pairs.json

Same generator, seed, candidate pool and granularity (1,000 fragments) as ``workloads.bench.advice_accuracy``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from advisor.context import Context
from advisor.engine.execute import versions_now
from advisor.estimation.exact_sizes import exact_sizes
from advisor.estimation.size_estimates import CannotEstimate, analyze, estimate
from advisor.partition.refine import fine_partition
from advisor.plan.parse import parse_sql
from advisor.safety.static_check import check_safety
from advisor.selection.attribute_pairs import conjunction_rows, pair_keys
from advisor.selection.candidates import enumerate_candidates
from advisor.warehouse.column_stats import stats_for_query
from workloads.bench.advice_accuracy import N_FRAGMENTS, ensure_dataset, harness_pool
from workloads.bench.advice_templates import generate


def _query(ctx: Context, gq, theta: float, seed: int) -> dict | None:
    cat = ctx.catalog
    q = parse_sql(gq.sql, ctx.schema_lookup())
    try:
        shape = analyze(q, lambda t: cat.version(t).rows)
    except CannotEstimate:
        return None
    versions = versions_now(cat, q)
    pool = harness_pool(cat, enumerate_candidates(cat, q, shape, versions))
    if len(pool) < 2:
        return None
    table = shape.fact.table
    T = cat.version(table, versions[table]).rows
    parts = {(c.attr, N_FRAGMENTS): fine_partition(cat, c.table, c.attr, N_FRAGMENTS, versions[c.table]) for c in pool}
    plan = {c.attr: (N_FRAGMENTS,) for c in pool}
    t0 = time.perf_counter()
    est = estimate(cat, shape, plan, theta, seed, versions=versions, pairs=pair_keys(pool, plan))
    est_s = time.perf_counter() - t0 - est.seconds["sampling"] - est.seconds["partitions"]
    if not est.pair_sizes:
        return {"template": gq.template, "sql": gq.sql, "weak": False}
    real, sketches, cap_s = exact_sizes(cat, q, parts, versions)
    stats = stats_for_query(cat, q, versions)
    pairs = []
    for (key, n), se in sorted(est.pair_sizes.items()):
        a, b = key.split("&")
        t1 = time.perf_counter()
        rows = conjunction_rows(cat, table, versions[table], [sketches[(a, n)], sketches[(b, n)]])
        safe = check_safety(q.root, {shape.fact_cols[a], shape.fact_cols[b]}, stats, per_scan_max=2).safe
        lo, hi = se.selectivity_ci
        pairs.append({"pair": key, "safe": safe, "est": se.selectivity_expected, "ci": [lo, hi],
                      "real": rows / max(1, T), "count_s": time.perf_counter() - t1})
    return {"template": gq.template, "sql": gq.sql, "weak": True, "rows": T,
            "singles": {a: {"est": est.sizes[(a, N_FRAGMENTS)].selectivity_expected,
                            "real": real[(a, N_FRAGMENTS)].sel} for a in plan},
            "pairs": pairs, "estimation_s": est_s, "capture_s": cap_s}


def summarize(recs: list) -> dict:
    """Errors of the pair estimates and how often a pair beats the best single attribute."""
    weak = [r for r in recs if r.get("weak")]
    errs, cover, gains, picked = [], 0, [], 0
    for r in weak:
        best_single = min(s["real"] for s in r["singles"].values())
        safe = [p for p in r["pairs"] if p["safe"]]
        for p in safe:
            errs.append(abs(p["est"] - p["real"]) / max(p["real"], 1e-9))
            cover += p["ci"][0] - 0.01 <= p["real"] <= p["ci"][1] + 0.01
        if safe:
            best_pair = min(safe, key=lambda p: p["real"])
            gains.append(best_pair["real"] / max(best_single, 1e-9))
            est_pick = min(safe, key=lambda p: p["est"])
            picked += est_pick["real"] <= 1.05 * best_pair["real"]
    n = len(errs)
    q = (lambda xs, f: sorted(xs)[min(len(xs) - 1, int(f * len(xs)))] if xs else None)  # noqa: E731
    return {"queries": len(recs), "weak_best_single": len(weak), "safe_pairs": n,
            "rel_error_median": statistics.median(errs) if errs else None, "rel_error_p90": q(errs, 0.9),
            "ci_coverage": cover / n if n else None,
            "best_pair_over_best_single_median": statistics.median(gains) if gains else None,
            "queries_pair_beats_single_by_10pct": sum(g <= 0.9 for g in gains),
            "estimated_best_pair_within_1.05x": picked / len(gains) if gains else None}


def main(argv=None) -> int:


    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warehouse", required=True)
    ap.add_argument("--datasets", default="flights,crimes")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--theta", type=float, default=0.05)
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    ctx = Context(a.warehouse, master="local[2]", conf={"spark.sql.shuffle.partitions": "4"})
    res = {"config": vars(a), "datasets": {}}
    for ds in a.datasets.split(","):
        ensure_dataset(ctx.catalog, ds, a.sf)
        recs = [r for gq in generate(ctx.catalog, ds, a.queries, a.seed) if (r := _query(ctx, gq, a.theta, a.seed))]
        res["datasets"][ds] = {"summary": summarize(recs), "queries": recs}
        print(ds, json.dumps(res["datasets"][ds]["summary"], indent=1))
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(res, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
