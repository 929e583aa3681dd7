"""Accuracy harness for cost-based sketch selection: estimated vs real sketch size of every candidate.

For each generated query (``templates_advice``): candidates = safe attributes of the sampled table
that are numeric/date/timestamp with NDV > 1000 fragments, plus its group-by attributes of any type
(the paper's pre-filter and numeric attributes; group-by attributes are kept so CB-OPT-GB has a
pool); one stored 1000-fragment partition per attribute (built once: setup time, shared by
estimation and capture).  OPT: every candidate captured in ONE ``capture_batch`` job per query (its
time is the exhaustive-capture time).  Then, per sample rate, ``estimate.estimate`` (sample cached
per table/strata/rate: the first query with a key draws it) and the strategies of ``select``.

Reported per dataset and rate: relative size error |est - real| / real (expected size, and the
paper's point estimate) over all (query, candidate) pairs with a non-empty real sketch; share of
queries whose CB-OPT pick is within 1.05x of OPT; top-1/2/3 accuracy (an optimal attribute is in
the estimated top k); mean chosen/optimal rows per strategy ((rows+1) ratios, so empty sketches are
defined); estimation time / exhaustive-capture time with a cold sample (drawing time + estimation)
and a cached one (sum over queries and median per query); false "go" decisions (CB-OPT-GB decided
go on a sketch whose real selectivity is > 80 %); and the misses with their sizes and a cause.

Run small: ``python -m workloads.bench.advice_accuracy --sf 0.1 --queries 30 --warehouse /tmp/advice``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from rich.console import Console
from rich.table import Table

from advisor.context import Context
from advisor.engine.execute import versions_now
from advisor.errors import BadInput
from advisor.estimation import size_estimates
from advisor.estimation.candidate_sizes import Candidate, SizeSummary
from advisor.estimation.exact_sizes import oracle
from advisor.estimation.size_estimates import CannotEstimate, analyze, estimate
from advisor.partition.refine import fine_partition
from advisor.plan.parse import parse_sql
from advisor.selection.candidates import enumerate_candidates
from advisor.selection.cost_model import CostParams, UseForecast
from advisor.selection.strategies import STRATEGIES, choose
from advisor.warehouse.value_kinds import kind_of
from estimators import windows
from workloads.bench.accuracy_shapes import generate_shapes, in_range
from workloads.bench.advice_templates import SPECS, GenQuery, generate
from workloads.bench.shape_metrics import family_metrics, render_families
from workloads.data.datasets import load_dataset

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog

N_FRAGMENTS = 1000
NUMERIC = ("int", "dec", "float", "date", "ts")


def harness_pool(catalog: Catalog, cands: list) -> list:
    types = {}
    out = []
    for c in cands:
        t = types.setdefault(c.table, dict(catalog.schema(c.table)))
        gb = "gb" in c.roles
        if c.dim:  # the harness measures the paper's candidates: columns of the sampled table
            continue
        if c.safe and c.ndv > 1 and (gb or (c.ndv > N_FRAGMENTS and kind_of(t[c.attr]) in NUMERIC)):
            out.append(c)
    return out


def ensure_dataset(catalog: Catalog, ds: str, sf: float) -> None:
    first = {"tpch": "lineitem", "flights": "flights", "crimes": "crimes"}[ds]
    if not catalog.exists(first):
        load_dataset(catalog, ds, sf=sf, rows=max(10_000, int(1_000_000 * sf)))


def _query(ctx: Context, gq, thetas, seed, p: CostParams, shrink: bool | str = True, method: str = "bootstrap",
           keep=None) -> dict:
    """One generated query: its candidates' real sizes (OPT) and, per sample rate, the estimates.
    ``keep(real selectivities)``: whether the query belongs to the set (else skipped, not estimated)."""
    cat = ctx.catalog
    seed = seed if gq.seed is None else gq.seed
    rec = {"template": gq.template, "sql": gq.sql, "q": gq.q, "groups": gq.groups, "seed": seed}
    q = parse_sql(gq.sql, ctx.schema_lookup())
    try:
        shape = analyze(q, lambda t: cat.version(t).rows)
    except CannotEstimate as e:
        return rec | {"skipped": f"cannot estimate: {e}"}
    versions = versions_now(cat, q)
    pool = harness_pool(cat, enumerate_candidates(cat, q, shape, versions))
    if not pool:
        return rec | {"skipped": "no candidate"}
    T = cat.version(shape.fact.table, versions[shape.fact.table]).rows
    t0 = time.perf_counter()
    parts = {(c.attr, N_FRAGMENTS): fine_partition(cat, c.table, c.attr, N_FRAGMENTS, versions[c.table]) for c in pool}
    rec["setup_s"] = time.perf_counter() - t0
    real, cap_s = oracle(cat, q, parts, versions)
    rec.update(table=shape.fact.table, rows=T, kind=shape.kind, capture_s=cap_s,
               real={a: s.sel for (a, _), s in real.items()}, roles={c.attr: sorted(c.roles) for c in pool})
    if max(s.sel for s in real.values()) == 0:
        return rec | {"skipped": "empty provenance"}
    if keep is not None and not keep(rec["real"]):
        return rec | {"skipped": "best real sketch outside the set's size range"}
    rec["theta"] = _estimates(cat, shape, pool, parts, real, versions, T, thetas, seed, p, shrink, STRATEGIES, method)
    return rec


USES = None  # predicted uses the strategies' go decisions assume (None: the cost model's prior)
COLD = False  # ``--cold``: every estimate draws its sample afresh (the stored ones are dropped first)


def _forget_samples(cat: Catalog, table: str) -> None:
    """Drop the stored samples of ``table`` (rows and files), so the next estimate draws one."""
    with cat.store.tx() as c:
        gone = c.execute("SELECT path FROM samples WHERE table_name=?", (table,)).fetchall()
        c.execute("DELETE FROM samples WHERE table_name=?", (table,))
    for r in gone:
        shutil.rmtree(cat.store.resolve(r["path"]), ignore_errors=True)


def _estimates(cat: Catalog, shape, pool, parts, real, versions, T, thetas, seed, p, shrink, strategies,
               method: str = "bootstrap") -> dict:
    """Per sample rate: estimated sizes, intervals, timings and each strategy's pick.  ``real``
    maps (attr, fragments) to the oracle's SizeSummary (or to the real selectivity alone, which
    serves every strategy but OPT)."""

    plan = {c.attr: (N_FRAGMENTS,) for c in pool}
    sel = {k: (v.sel if hasattr(v, "sel") else float(v)) for k, v in real.items()}
    out = {}
    for theta in thetas:
        if COLD:
            _forget_samples(cat, shape.fact.table)
        t0 = time.perf_counter()
        est = estimate(cat, shape, plan, theta, seed, method=method, versions=versions, shrink=shrink)
        wall = time.perf_counter() - t0
        est_s = wall - est.seconds["sampling"] - est.seconds["partitions"]
        cands = [Candidate(c.table, c.attr, True, c.reason, c.ndv, c.roles,
                           {N_FRAGMENTS: SizeSummary.of(est.sizes[(c.attr, N_FRAGMENTS)], parts[(c.attr, N_FRAGMENTS)])},
                           {N_FRAGMENTS: real[(c.attr, N_FRAGMENTS)]}) for c in pool]
        w = UseForecast(USES or p.prior_reuses)
        picks = {}
        for s in strategies:
            d = choose(s, cands, T, w, p, seed, N_FRAGMENTS)
            picks[s] = {"attr": d.attr, "go": d.go, "pool": [sel[(a, N_FRAGMENTS)] for a in d.pool]}
        out[str(theta)] = {
            "est": {c.attr: c.sizes[N_FRAGMENTS].sel for c in cands},
            "point": {c.attr: c.sizes[N_FRAGMENTS].sel_point for c in cands},
            "ci": {c.attr: [c.sizes[N_FRAGMENTS].sel_lo, c.sizes[N_FRAGMENTS].sel_hi] for c in cands},
            "exact": {c.attr: c.sizes[N_FRAGMENTS].ci_exact for c in cands},
            "est_s": est_s, "cold_s": est_s + float(est.sample.meta.get("seconds", 0.0)),
            "est_split": {k: round(est.seconds[k], 4) for k in ("sample_query", "groups", "sizes") if k in est.seconds},
            "fallback": bool(est.sample.meta.get("uniform_fallback")), "picks": picks}
    return out


def reestimate(ctx: Context, recs: list, thetas, seed: int = 0, shrink: bool | str = True,
               method: str = "bootstrap") -> list:
    """Ablation: the evaluated records again with another estimator setting (``shrink``), keeping
    their oracle sizes, so estimator variants are compared on the same queries without recapturing."""

    cat, p, out = ctx.catalog, CostParams(), []
    strategies = [s for s in STRATEGIES if s != "OPT"]
    for r in recs:
        if "skipped" in r:
            out.append(r)
            continue
        q = parse_sql(r["sql"], ctx.schema_lookup())
        shape = analyze(q, lambda t: cat.version(t).rows)
        versions = versions_now(cat, q)
        pool = [c for c in harness_pool(cat, enumerate_candidates(cat, q, shape, versions)) if c.attr in r["real"]]
        parts = {(c.attr, N_FRAGMENTS): fine_partition(cat, c.table, c.attr, N_FRAGMENTS, versions[c.table]) for c in pool}
        real = {(a, N_FRAGMENTS): s for a, s in r["real"].items()}
        out.append(dict(r, theta=_estimates(cat, shape, pool, parts, real, versions, r["rows"], thetas,
                                             r.get("seed", seed), p, shrink, strategies, method)))
    return out


class Checkpoint:
    """Append-only JSONL log next to the output: the generated queries and each finished record.

    A run over 300 TPC-H SF1 queries took 58 min on 2 cores (the exhaustive captures
    dominate); an interrupted run started again with the same output path and configuration skips
    what the log holds.  A log written under another configuration is set aside (renamed), never
    mixed in."""

    def __init__(self, path, config: dict):
        self.path = Path(path) if path else None
        self.gen: dict = {}
        self.recs: dict = {}
        if self.path is None:
            return
        head = {"config": config}
        if self.path.exists():
            lines = [json.loads(x) for x in self.path.read_text().splitlines() if x.strip()]
            if lines and lines[0] == head:
                for x in lines[1:]:
                    if "queries" in x:
                        self.gen[x["ds"]] = x["queries"]
                    else:
                        self.recs[(x["ds"], x["i"], x["sql"])] = x["rec"]
                return
            os.replace(self.path, self.path.with_suffix(f".stale{int(time.time())}"))
        self._append(head)

    def _append(self, obj: dict) -> None:
        if self.path is not None:
            with open(self.path, "a") as fh:
                fh.write(json.dumps(obj, default=lambda o: o.item() if hasattr(o, "item") else str(o)) + "\n")

    def queries(self, ds: str):
        got = self.gen.get(ds)
        return None if got is None else [GenQuery(**g) for g in got]

    def save_queries(self, ds: str, gen: list) -> None:
        self._append({"ds": ds, "queries": [asdict(g) for g in gen]})

    def record(self, ds: str, i: int, sql: str):
        return self.recs.get((ds, i, sql))

    def save_record(self, ds: str, i: int, sql: str, rec: dict) -> None:
        self._append({"ds": ds, "i": i, "sql": sql, "rec": rec})


def _pct(xs, q):
    return float(np.percentile(xs, q)) if len(xs) else None


def summarize(recs: list, theta: str) -> dict:
    """The harness metrics for one sample rate over the evaluated queries."""
    ok = [r for r in recs if "skipped" not in r]
    rse, rse_pt, rse_nt, within, ratio, topk, false_go, misses = [], [], [], {}, {}, [0, 0, 0], {}, []
    est_s = sum(r["theta"][theta]["est_s"] for r in ok)
    cold_s = sum(r["theta"][theta]["cold_s"] for r in ok)
    cap_s = sum(r["capture_s"] for r in ok)
    for r in ok:
        t, real, T = r["theta"][theta], r["real"], r["rows"]
        for a, s in real.items():
            if s > 0:
                rse.append(abs(t["est"][a] - s) / s)
                rse_pt.append(abs(t["point"][a] - s) / s)
                if s < 0.9:
                    rse_nt.append(rse[-1])
        best = min(real.values())
        opt = {a for a, s in real.items() if s <= best}
        ranked = sorted(t["est"], key=lambda a: (t["est"][a], a))
        for k in range(3):
            topk[k] += bool(opt & set(ranked[:k + 1]))
        for s, pk in t["picks"].items():
            if s == "NO-PS":
                chosen = 1.0
            elif s.startswith("RAND"):
                chosen = statistics.mean(pk["pool"]) if pk["pool"] else 1.0
            else:
                chosen = real[pk["attr"]] if pk["attr"] else 1.0
            rr = (chosen * T + 1) / (best * T + 1)
            ratio.setdefault(s, []).append(rr)
            within.setdefault(s, []).append(rr <= 1.05)
            if pk["go"] and pk["attr"] and real[pk["attr"]] > 0.8:
                false_go.setdefault(s, []).append(r["sql"])
        pick = t["picks"]["CB-OPT"]["attr"]
        if ratio["CB-OPT"][-1] > 1.05:
            o = min(opt)
            close = t["ci"][o][1] >= t["ci"][pick][0]
            cause = ("uniform sample fallback (groups missing from the sample)" if t["fallback"] else
                     "estimates within each other's interval" if close else
                     f"estimate error on {pick} ({abs(t['est'][pick] - real[pick]) / max(real[pick], 1e-9):.0%})")
            misses.append({"sql": r["sql"], "template": r["template"], "picked": pick, "picked_real": real[pick],
                           "picked_est": t["est"][pick], "optimal": o, "optimal_real": real[o],
                           "optimal_est": t["est"][o], "cause": cause})
    n = len(ok)
    cover = interval_coverage(ok, theta)
    per_q = lambda key: _pct([r["theta"][theta][key] / r["capture_s"] for r in ok if r["capture_s"] > 0], 50)  # noqa: E731
    return {
        "queries": n, "pairs": len(rse),
        "rse": {"median": _pct(rse, 50), "p75": _pct(rse, 75), "p90": _pct(rse, 90),
                "mean": float(np.mean(rse)) if rse else None, "share_le_5pct": float(np.mean(np.array(rse) <= 0.05)) if rse else None},
        "rse_point": {"median": _pct(rse_pt, 50), "p90": _pct(rse_pt, 90)},
        "rse_nontrivial": {"pairs": len(rse_nt), "median": _pct(rse_nt, 50), "p90": _pct(rse_nt, 90)},
        "within_1_05": {s: float(np.mean(v)) for s, v in within.items()},
        "topk_accuracy": [x / n if n else None for x in topk],
        "chosen_over_optimal": {s: float(np.mean(v)) for s, v in ratio.items()},
        "time": {"estimation_s": est_s, "cold_s": cold_s, "capture_s": cap_s,
                 "cached_over_capture": est_s / cap_s if cap_s else None,
                 "cold_over_capture": cold_s / cap_s if cap_s else None,
                 "cached_over_capture_median_query": per_q("est_s"), "cold_over_capture_median_query": per_q("cold_s")},
        "interval": cover,
        "false_go": {s: len(v) for s, v in false_go.items()},
        "false_go_queries": false_go.get("CB-OPT-GB", []),
        "misses": sorted(misses, key=lambda m: -(m["picked_real"] - m["optimal_real"]))[:20]}


def interval_coverage(recs: list, theta: str) -> dict:
    """How often the estimate's interval holds the oracle's size, over (query, candidate) pairs and
    over queries (every candidate covered); point intervals and how many of them missed."""
    pairs = hit = points = point_miss = q_all = 0
    for r in recs:
        t = r["theta"][theta]
        every = True
        for a, s in r["real"].items():
            lo, hi = t["ci"][a]
            ok = lo - 1e-9 <= s <= hi + 1e-9
            pairs, hit, every = pairs + 1, hit + ok, every and ok
            if hi - lo <= 0:
                points, point_miss = points + 1, point_miss + (not ok)
        q_all += every
    return {"pairs": pairs, "coverage": hit / pairs if pairs else None,
            "queries_covered": q_all / len(recs) if recs else None, "point_intervals": points,
            "point_intervals_missed": point_miss}


def render(console, res: dict) -> None:
    """One rich table per sample rate: the headline metrics per dataset."""
    for theta in res["thetas"]:
        tab = Table("dataset", "queries", "RSE median", "RSE p90", "RSE p90 (real<90%)", "<=1.05x OPT", "top-1/2/3", "chosen/OPT",
                    "CB-OPT-GB <=1.05x", "cached/capture", "cold/capture", "false go",
                    title=f"advice accuracy at theta={theta}")
        for ds, d in res["datasets"].items():
            m = d["metrics"][str(theta)]
            if not m["queries"]:
                tab.add_row(ds, "0", *["-"] * 10)
                continue
            f = lambda x, fmt="{:.1%}": "-" if x is None else fmt.format(x)  # noqa: E731
            tab.add_row(ds, str(m["queries"]), f(m["rse"]["median"]), f(m["rse"]["p90"]), f(m["rse_nontrivial"]["p90"]),
                        f(m["within_1_05"].get("CB-OPT")), "/".join(f(x, "{:.0%}") for x in m["topk_accuracy"]),
                        f(m["chosen_over_optimal"].get("CB-OPT"), "{:.3f}"), f(m["within_1_05"].get("CB-OPT-GB")),
                        f(m["time"]["cached_over_capture"], "{:.3f}"), f(m["time"]["cold_over_capture"], "{:.3f}"),
                        str(m["false_go"].get("CB-OPT-GB", 0)))
        console.print(tab)


def bench_advice_command(ctx: Context, console, datasets=("tpch", "flights", "crimes"), sf: float = 1.0,
                         queries_per_dataset: int = 300, thetas=(0.05, 0.10), out_json=None, seed: int = 0,
                         shrink: bool | str = True, method: str = "bootstrap", query_set: str = "templates",
                         uses: float | None = None) -> dict:
    """Run the harness (loads missing datasets into the context's warehouse) and print the tables.

    ``shrink=False`` is the ablation without ``estimate.shrink_groups`` (the paper's estimator).
    ``query_set``: ``templates`` (the paper's, ``advice_templates``) or ``shapes`` (selective shape
    families, ``accuracy_shapes``: only queries whose best real sketch holds 0.1-20 % are kept, and
    metrics are reported per family).  ``uses``: predicted uses behind the go decisions."""
    global USES
    if query_set not in ("templates", "shapes"):
        raise BadInput(f"unknown query set {query_set!r} (choose templates or shapes)")
    USES = uses

    bad = [d for d in datasets if d not in SPECS]
    if bad:
        raise BadInput(f"unknown dataset(s) {', '.join(bad)} (choose from {', '.join(SPECS)})")
    if queries_per_dataset < 1 or not all(0 < t <= 1 for t in thetas):
        raise BadInput("queries per dataset must be >= 1 and every sample rate in (0, 1]")
    p = CostParams()
    t_all = time.perf_counter()
    res = {"config": {"sf": sf, "queries_per_dataset": queries_per_dataset, "thetas": list(thetas),
                      "fragments": N_FRAGMENTS, "seed": seed, "shrink": shrink, "method": method,
                      "set": query_set, "uses": uses},
           "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count(),
                       "platform": platform.platform()},
           "thetas": list(thetas), "datasets": {}}
    ckpt = Checkpoint(f"{out_json}.partial.jsonl" if out_json else None, res["config"])
    for ds in datasets:
        t0 = time.perf_counter()
        ensure_dataset(ctx.catalog, ds, sf)
        gen = ckpt.queries(ds)
        if gen is None:
            gen = (generate_shapes if query_set == "shapes" else generate)(ctx.catalog, ds, queries_per_dataset, seed)
            ckpt.save_queries(ds, gen)
        t_gen = time.perf_counter() - t0
        recs = []
        for i, gq in enumerate(gen):
            rec = ckpt.record(ds, i, gq.sql)
            if rec is None:
                rec = _query(ctx, gq, thetas, seed, p, shrink, method, in_range if query_set == "shapes" else None)
                ckpt.save_record(ds, i, gq.sql, rec)
            recs.append(rec)
            if console is not None and (i + 1) % 10 == 0:
                console.print(f"{ds}: {i + 1}/{len(gen)} queries", style="dim")
        skipped = {}
        for r in recs:
            if "skipped" in r:
                skipped[r["skipped"]] = skipped.get(r["skipped"], 0) + 1
        res["datasets"][ds] = {
            "tables": {t: ctx.catalog.version(t).rows for t in {r["table"] for r in recs if "table" in r}},
            "generated": len(gen), "skipped": skipped, "generate_s": t_gen,
            "setup_s": sum(r.get("setup_s", 0.0) for r in recs),
            "by_template": {t: sum(1 for r in recs if r["template"] == t and "skipped" not in r)
                            for t in sorted({r["template"] for r in recs})},
            "metrics": {str(t): summarize(recs, str(t)) for t in thetas},
            "families": {str(t): family_metrics(recs, str(t)) for t in thetas}, "queries": recs}
    res["seconds"] = time.perf_counter() - t_all
    if console is not None:
        render(console, res)
        render_families(console, res)
    if out_json:
        with open(out_json, "w") as fh:
            json.dump(res, fh, indent=1, default=str)
    return res


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="advice accuracy harness")
    ap.add_argument("--warehouse", default="/tmp/advice-bench")
    ap.add_argument("--sf", type=float, default=0.1)
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--datasets", default="tpch,flights,crimes")
    ap.add_argument("--thetas", default="0.05,0.10")
    ap.add_argument("--out", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", dest="query_set", choices=("templates", "shapes"), default="templates",
                    help="the paper's templates, or selective shape families (sketches of 0.1-20 %%)")
    ap.add_argument("--uses", type=float, default=None, help="predicted uses behind the go decisions")
    ap.add_argument("--method", choices=("bootstrap", "clt"), default="bootstrap",
                    help="the group estimator: bootstrap replicates (default) or Haas's CLT")
    ap.add_argument("--no-shrink", action="store_true", help="ablation: the paper's estimator without shrinkage")
    ap.add_argument("--shrink", default=None, help="ablation: shrinkage prior 'normal' (default) or 't'")
    ap.add_argument("--window-width", choices=("pooled", "own"), default="pooled",
                    help="ablation: 'own' sizes each group's locality window from its own rows only")
    ap.add_argument("--align-min", type=int, default=None,
                    help="ablation: other containing groups before a window is clipped (0: never clip)")
    ap.add_argument("--no-model-interval", action="store_true",
                    help="ablation: intervals from the shrunk estimates' replicates alone")
    ap.add_argument("--no-covariate", action="store_true",
                    help="ablation: shrink towards the mean of all groups, never a covariate's bins")
    ap.add_argument("--reestimate", default=None,
                    help="ablation: re-estimate the evaluated queries of this result JSON (oracle sizes kept)")
    ap.add_argument("--cold", action="store_true",
                    help="with --reestimate: draw every query's sample afresh (cold/capture as measured)")
    ap.add_argument("--templates", default=None,
                    help="with --reestimate: only these templates (comma-separated, e.g. Q-AAGH)")
    a = ap.parse_args()
    COLD = a.cold
    USES = a.uses
    windows.WIDTH_POOLING = a.window_width == "pooled"
    if a.align_min is not None:
        windows.ALIGN_MIN = a.align_min
    if a.no_covariate:
        size_estimates.COVARIATE_PRIOR = False
    if a.no_model_interval:
        size_estimates.MODEL_INTERVAL = False
    c = Context(a.warehouse, master="local[2]", conf={"spark.sql.shuffle.partitions": "4"})
    shrink = False if a.no_shrink else (a.shrink or True)
    if a.reestimate:
        src = json.load(open(a.reestimate))
        thetas = tuple(float(x) for x in a.thetas.split(","))
        res = {"thetas": list(thetas), "config": dict(src["config"], shrink=shrink, method=a.method,
                                                      reestimated=a.reestimate,
                                                      window_width=a.window_width, align_min=a.align_min,
                                                      covariate_prior=not a.no_covariate,
                                                      model_interval=not a.no_model_interval),
               "datasets": {}}
        keep = set(a.templates.split(",")) if a.templates else None
        for ds in a.datasets.split(","):
            recs = [r for r in src["datasets"][ds]["queries"] if keep is None or r.get("template") in keep]
            recs = reestimate(c, recs, thetas, a.seed, shrink, a.method)
            res["datasets"][ds] = {"metrics": {str(t): summarize(recs, str(t)) for t in thetas},
                                   "families": {str(t): family_metrics(recs, str(t)) for t in thetas},
                                   "queries": recs}
        render(Console(width=200), res)
        render_families(Console(width=200), res)
        if a.out:
            with open(a.out, "w") as fh:
                json.dump(res, fh, indent=1, default=str)
        raise SystemExit(0)
    bench_advice_command(c, Console(width=200), tuple(a.datasets.split(",")), a.sf, a.queries,
                         tuple(float(x) for x in a.thetas.split(",")), a.out, a.seed, shrink, a.method,
                         a.query_set, a.uses)
