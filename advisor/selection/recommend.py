"""`advisor recommend "SQL"`: what-if sketch sizes per candidate attribute, the pick and go/no-go.

Nothing is captured unless ``capture=True``.  Candidates are the attributes of the sampled (largest)
table below the aggregation, plus the group-by columns of the other tables it joins
(``candidates.dim_candidates``; keyed ``table.attr`` in plans).  Steps: parse, ``estimate.analyze`` (which table to
sample, HAVING/top-k/nested shape), candidates with Z3 safety verdicts (``select``), sample +
estimate the strategy's pool at each granularity, ``select.choose`` (strategy + cost model).  OPT
does not sample: it builds the partitions and captures every pool candidate in one job
(``seconds.oracle``, evaluation only) and decides on the real sizes, as an oracle that knew them
would; it pays the capture of its pick.  The record is logged in the store's
``runs`` table with kind ``recommend`` (these do not count as executions for reuse prediction).
Before sampling, ``select.cannot_pay`` ends the advice when even a sketch skipping every row could
not repay capture, maintenance and the estimation at the costs measured in this store.  When the
best single estimate is weak, pairs of the sampled table's candidates are sized and weighed too
(``advisor.selection.attribute_pairs``; bootstrap / CLT only, not OPT or method exact).

``method="exact"`` (beyond the paper): when the capture can read every pool candidate by value
(``capture.value_lineage``: the strategy's group-by candidates of a HAVING / top-k query), their
real sizes come from ONE capture job over all of them -- about one plain run of the query, less
than sampling -- and the picked sketch is saved from that job.  Otherwise it falls back to the
bootstrap.  ``seconds.exact`` is that job; the record has ``"exact": true``.

JSON shape (``--json``; numbers are fractions of the candidate's table unless named otherwise)::

    {
      "sql": str, "supported": bool,          # false: the planner cannot sketch this query at all
      "estimable": bool,                      # false: no estimate possible ("reason" says why)
      "reason": str | null,
      "strategy": "CB-OPT-GB", "sample_rate": 0.05, "method": "bootstrap" | "clt" | "exact",
      "exact": bool,                          # sizes are real (method exact, one capture job)
      "table": str | null, "table_rows": int | null,
      "shape": "having" | "topk" | "nested" | "groupby" | null,
      "sample": {"strata": [str], "rows": int, "cached": bool, "uniform_fallback": bool,
                 "maintained_from": int | null,  # table version the sample was maintained from
                 "seconds": float} | null,
      "estimation_notes": [str],              # e.g. the uniform fallback, a covariate prior (estimators.shrinkage)
      "template": str | null,                 # the query with its constants as parameters
      "cold": bool,                           # the process's first sampling / sizing (one-time costs)
      "cannot_pay": bool,                     # true: no-go before sampling (measured costs, below)
      "pays_after": int | null,               # ... and how many more predicted uses would let it pass
      "partitions_built": int,                # OPT / exact: partitions this sizing had to build
      "workload": {"predicted_reuses": float, "updates_per_use": float, "scan_rows_per_s": float,
                   "steps_per_use": float,    # maintenance steps per use under the policy
                   "fixed_rows": float,       # one Spark job's fixed cost, in rows (advisor.calibration.measured_costs)
                   "advice_rows": float | null,  # measured sampling + estimation, in rows
                   "reason": str} | null,
      "candidates": [{
          "table": str,                       # the sampled table, or a joined table (a group-by column)
          "attr": str,                        # "a&b" for a two-attribute candidate (advisor.selection.attribute_pairs)
          "attrs": [a, b] | null,             # a two-attribute candidate's attributes
          "safe": bool, "safety_reason": str, "ndv": int, "roles": ["gb","rel","agg","pk"],
          "estimated": bool,                  # false: outside the strategy's pool or unsafe
          "fragments": int | null,            # fragments of the granularity the cost model chose
          "fragments_target": int | null,     # its target (100 / 1000 / 10000 or --fragments)
          "selectivity": float | null, "ci": [lo, hi] | null, "selectivity_point": float | null,
          "real_selectivity": float | null,   # OPT only (captured)
          "read_fraction": float | null,      # expected share of rows scans still read (layout-aware)
          "real_read_fraction": float | null, # OPT only: the captured sketch's share of rows read
          "read_units": str | null,           # what the scan prunes: "layout <id> (<n> files)" / "row groups (<n>)"
          "layout_note": str | null,          # why the attribute was dropped before sampling, if it was
          "capture_s": float | null, "saving_s": float | null, "net_s": float | null,
          "go": bool | null, "picked": bool,
          "by_granularity": [{"fragments": int, "n_fragments": int, "selectivity": float,
                              "ci": [lo, hi], "net_scans": float}]}],
      "decision": {"table": str | null, "attr": str | null, "attrs": [a, b] | null,
                   "fragments": int | null, "fragments_target": int | null,
                   "go": bool, "reason": str,
                   "figures": {capture/saving/overhead/net in rows and seconds} | null},
      "captured": {"sketch_id": int, "selectivity": float, "seconds": float,
                   "sketch_ids": [int, int]} | null,  # sketch_ids: a pair's two sketches (leading first)
      "seconds": {"sampling": s, "partitions": s, "sample_query": s, "groups": s, "sizes": s,
                  "exact": s, "oracle": s, "oracle_partitions": s, "total": s}
    }
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from advisor.engine.execute import versions_now
from advisor.errors import BadInput, Unsupported
from advisor.estimation.candidate_sizes import SizeSummary
from advisor.estimation.exact_sizes import exact_sizes, oracle
from advisor.estimation.size_estimates import CannotEstimate, analyze, estimate, split_key
from advisor.layout.skip_prediction import read_units, sketch_read_fraction, skip_ceiling
from advisor.partition.fragment_runs import read_set
from advisor.partition.range_partition import MAX_FRAGMENTS
from advisor.partition.refine import derive_partition, fine_partition, store_partition
from advisor.plan.parse import parse_sql
from advisor.selection.attribute_pairs import capture_pair, pair_candidates, pair_keys
from advisor.selection.candidates import enumerate_candidates
from advisor.selection.cost_model import (
    GRANULARITIES,
    CostParams,
    candidate_costing,
    cannot_pay,
    granularities_for,
)
from advisor.selection.decision_memory import pays_after
from advisor.selection.forecast import predict_workload
from advisor.selection.strategies import STRATEGIES, choose, pool_of
from advisor.sketch.capture import by_value_types_ok, capture
from advisor.sketch.lookup import sketch_rows
from advisor.warehouse.column_stats import column_stats
from advisor.warehouse.sketch_records import save_sketch

if TYPE_CHECKING:
    from advisor.context import Context
    from advisor.warehouse.catalog import Catalog

METHODS = ("bootstrap", "clt", "exact")


def bridged(se, part) -> frozenset:
    """Fragments the filter would add by bridging gaps (``use.capped_runs``) if the sketch were its
    likely fragments (probability >= 0.5): read for certain, so the predicted read fraction does not
    pretend a scattered sketch skips what its 32-range filter cannot."""
    prob = se.fragment_probability
    likely = frozenset(int(f) for f, p in (prob.items() if prob is not None else ()) if p >= 0.5)
    return read_set(likely, part) - likely


# set once this process has sampled or sized for advice: its imports (z3, the estimators) and the
# first compilation of its Spark jobs are paid, and later advice does not pay them again
_advised = False


def _note_warmth(rec: dict) -> None:
    """Mark the record ``cold`` when it is the process's first to sample or size (``calibrate``
    predicts advice from warm records when it has them: in an SF1 replay the first
    sizing's rest took 2.9 s and the next 0.5 s, and their median declined three templates)."""
    global _advised
    rec["cold"] = not _advised
    _advised = _advised or any(k in rec["seconds"] for k in ("sampling", "partitions", "oracle"))


def validate(strategy: str, sample_rate: float, fragments, method: str) -> str:
    """Normalised strategy name, or BadInput with one sentence."""
    s = str(strategy).strip().upper()
    if s not in STRATEGIES:
        raise BadInput(f"unknown strategy {strategy!r} (choose one of: {', '.join(STRATEGIES)})")
    if not isinstance(sample_rate, (int, float)) or not 0.0 < float(sample_rate) <= 1.0:
        raise BadInput(f"--sample-rate must be in (0, 1], got {sample_rate}")
    if fragments is not None and not 1 <= int(fragments) <= MAX_FRAGMENTS:
        raise BadInput(f"--fragments must be between 1 and {MAX_FRAGMENTS}, got {fragments}")
    if str(method).lower() not in METHODS:
        raise BadInput(f"--method must be one of {', '.join(METHODS)}, got {method!r}")
    return s


def _base(sql, strategy, sample_rate, method) -> dict:
    return {"sql": sql, "supported": True, "estimable": False, "reason": None, "strategy": strategy,
            "sample_rate": sample_rate, "method": method, "table": None, "table_rows": None, "shape": None,
            "exact": False, "sample": None, "estimation_notes": [], "workload": None, "candidates": [], "captured": None, "seconds": {},
            "decision": {"attr": None, "fragments": None, "go": False, "reason": "", "figures": None}}


def recommend(ctx: Context, sql: str, strategy: str = "CB-OPT-GB", sample_rate: float = 0.05, capture: bool = False,
              fragments: int | None = None, method: str = "bootstrap", seed: int = 0, progress=None,
              params: CostParams | None = None, pairs: bool = True, answer: list | None = None) -> dict:
    """Compute the recommendation record (see the module docstring); no printing.  ``pairs``: offer
    two-attribute candidates when the best single one is weak (``advisor.selection.attribute_pairs``).  With an
    ``answer`` list, a job that reads the whole query by value (an exact sizing, or a capture by
    value) also answers the query: its ``execute.RunResult`` is appended, and the caller need not
    run the query again (nothing is appended when no such job ran)."""

    t_all = time.perf_counter()
    strategy = validate(strategy, sample_rate, fragments, method)
    method = method.lower()
    rec = _base(sql, strategy, float(sample_rate), method)
    p = params or CostParams()
    try:
        q = parse_sql(sql, ctx.schema_lookup())
    except Unsupported as e:
        rec.update(supported=False, reason=str(e))
        rec["decision"]["reason"] = f"no-go: the query cannot use sketches ({e})"
        return rec
    cat = ctx.catalog
    try:
        shape = analyze(q, lambda t: cat.version(t).rows)
    except CannotEstimate as e:
        rec["reason"] = str(e)
        rec["decision"]["reason"] = f"no-go: cannot estimate sketch sizes ({e})"
        return rec
    versions = versions_now(cat, q)
    table = shape.fact.table
    T = cat.version(table, versions[table]).rows
    rec.update(table=table, table_rows=T, shape=shape.kind)
    cands = enumerate_candidates(cat, q, shape, versions)
    grans = (int(fragments),) if fragments else GRANULARITIES
    pool = pool_of("CB-OPT" if strategy == "OPT" else strategy, cands)
    plan = {c.key: g for c in pool if (g := granularities_for(c.ndv, grans))}
    units, unskippable = _layout_check(cat, table, list(plan), versions, p.max_sel)
    for a in unskippable:
        del plan[a]
    for c in cands:
        c.skip_note = unskippable.get(c.key)
    w = predict_workload(ctx.store, q, table, p, upto=versions[table], table_rows=T)
    rec["template"] = q.template
    rec["workload"] = {"predicted_reuses": w.reuses, "updates_per_use": w.updates_per_use, "steps_per_use": w.steps,
                       "scan_rows_per_s": w.scan_rate, "fixed_rows": w.fixed_rows,
                       "advice_rows": w.advice_rows, "reason": w.reason}
    est = None
    # a sizing without sampling: OPT's oracle, or method exact when every candidate is read by value
    unsampled = strategy == "OPT" or (method == "exact" and _by_value(cat, q, table, plan))
    missing = _missing_partitions(cat, table, plan)
    # measured costs off (the paper's model, timing-free decisions): sampling is not charged
    advice = (None if strategy == "OPT" else w.sizing_rows(missing, T, len(shape.read_columns())) if unsampled
              else w.sampled_advice_rows(T, p.advice_prior_scans) if p.measured else w.advice_rows)
    hopeless = None if strategy == "NO-PS" or not plan or fragments else cannot_pay(T, w, p, advice)
    rec["cannot_pay"] = bool(hopeless)
    rec["pays_after"] = pays_after(T, w, p, advice) if hopeless else None
    if hopeless:
        rec["reason"] = hopeless
        plan = {}
    exact, parts, by = None, None, {c.key: c for c in cands}
    if plan and unsampled:
        t0 = time.perf_counter()
        parts = _partitions(cat, table, plan, versions)
        # an oracle knows the sizes for free: OPT's partitions are part of its (excluded) oracle work
        rec["seconds"]["oracle_partitions" if strategy == "OPT" else "partitions"] = round(time.perf_counter() - t0, 3)
        rec["partitions_built"] = missing
    if parts is not None and strategy != "OPT":
        if progress:
            progress(f"capturing {len(parts)} candidate sketch(es) by value (exact sizes)")
        exact = exact_sizes(cat, q, parts, versions, units, answer=answer)
        sizes, sketches, secs = exact
        w = replace(w, capture_sunk=True)  # the sizing job captured every candidate already
        rec.update(estimable=True, exact=True)
        rec["seconds"]["exact"] = round(secs, 3)
        for (a, n), s in sizes.items():
            by[a].sizes[n] = s
    elif parts is not None:  # OPT: every candidate captured (evaluation only); real sizes stand in as estimates
        if progress:
            progress(f"capturing {len(parts)} candidate sketch(es) (OPT oracle)")
        real, secs = oracle(cat, q, parts, versions, units)
        rec["seconds"]["oracle"] = round(secs + rec["seconds"]["oracle_partitions"], 3)
        rec["estimable"] = True
        for (a, n), s in real.items():
            by[a].real[n] = by[a].sizes[n] = s
    elif plan:
        est = estimate(cat, shape, plan, float(sample_rate), seed, "bootstrap" if method == "exact" else method,
                       versions=versions, progress=progress, pairs=pair_keys(pool, plan) if pairs else None)
        rec["estimable"] = True
        rec["seconds"].update({k: round(v, 3) for k, v in est.seconds.items()})
        rec["sample"] = {"strata": est.sample.strata, "rows": est.sample.meta.get("sample_size"),
                         "cached": est.sample.cached, "uniform_fallback": est.sample.meta.get("uniform_fallback"),
                         "maintained_from": est.sample.meta.get("maintained_from"),
                         "seconds": round(est.sample.seconds, 3)}
        rec["estimation_notes"] = list(est.notes)
        parts = est.partitions
        for (a, n), se in est.sizes.items():
            part = est.partitions[(a, n)]
            by[a].sizes[n] = SizeSummary.of(se, part).with_read(
                sketch_read_fraction(units[a].units, part, se.fragment_probability, bridged(se, part)), units[a].source)
        duo = pair_candidates(cat, q, shape, versions, est, by, units, table, bridged)
        cands += duo
        by.update({c.key: c for c in duo})
    elif strategy != "NO-PS" and unskippable:
        rec["reason"] = "no candidate the table's layout can skip on: " + "; ".join(unskippable.values())
    elif strategy != "NO-PS":
        rec["reason"] = f"no safe candidate in the {strategy} pool"
    d = choose(strategy, cands, T, w, p, seed, fragments)
    if hopeless:
        d.reason = hopeless
    elif not d.go and d.attr is None and unskippable and strategy != "NO-PS":
        d.reason = f"no-go: {rec['reason']}"
    pick = by.get(d.attr)
    rec["decision"] = {"table": pick.table if pick else None, "attr": pick.attr if pick else None,
                       "attrs": list(pick.attrs) if pick and pick.attrs else None,
                       "fragments": d.costing.n_fragments if d.costing else None, "fragments_target": d.n_target,
                       "go": d.go, "reason": d.reason,
                       "figures": None if d.costing is None else asdict(d.costing) | {
                           "seconds": d.costing.seconds(w.scan_rate)}}
    for c in cands:
        k = candidate_costing(c, c.sizes, T, w, p, fragments) if c.sizes else None
        s = c.sizes.get(k.n_target) if k else None
        secs_ = k.seconds(w.scan_rate) if k else {}
        real = c.real.get(k.n_target) if k else None
        rec["candidates"].append({
            "table": c.table, "attr": c.attr, "attrs": list(c.attrs) or None, "safe": c.safe,
            "safety_reason": c.reason, "ndv": c.ndv,
            "roles": sorted(c.roles),
            "estimated": bool(c.sizes), "fragments": k.n_fragments if k else None,
            "fragments_target": k.n_target if k else None,
            "selectivity": s.sel if s else None, "ci": [s.sel_lo, s.sel_hi] if s else None,
            "read_fraction": s.read if s else None, "read_units": s.read_source if s else None,
            "layout_note": c.skip_note,
            "selectivity_point": s.sel_point if s else None, "real_selectivity": real.sel if real else None,
            "real_read_fraction": real.read if real else None,
            "capture_s": secs_.get("capture"), "saving_s": secs_.get("saving"), "net_s": secs_.get("net"),
            "go": k.go if k else None, "picked": c.key == d.attr,
            "by_granularity": [{"fragments": n, "n_fragments": x.n_fragments, "selectivity": x.sel,
                                "ci": [x.sel_lo, x.sel_hi],
                                "net_scans": candidate_costing(c, {n: x}, T, w, p).net_rows / max(c.rows or T, 1)}
                               for n, x in sorted(c.sizes.items())]})
    if capture and d.go and pick is not None and exact is not None:
        rec["captured"] = _save_exact(cat, pick.table, versions, exact[1][(d.attr, d.n_target)], exact[2])
    elif capture and d.go and pick is not None and pick.attrs:

        rec["captured"] = capture_pair(cat, q, pick, d.n_target, parts, versions,
                                       pick.sizes[d.n_target].read_source)
    elif capture and d.go and pick is not None:
        rec["captured"] = _capture(cat, q, pick, d, parts, versions, answer)
    elif capture:
        rec["reason"] = (rec["reason"] + "; " if rec["reason"] else "") + "nothing captured: the decision is no-go"
    rec["seconds"]["total"] = round(time.perf_counter() - t_all, 3)
    _note_warmth(rec)
    ctx.store.log_run("recommend", sql, rec)
    return rec


def _layout_check(cat: Catalog, table: str, keys: list, versions: dict, max_sel: float) -> tuple[dict, dict]:
    """Read units per plan key, and the keys no sketch could skip on: even a one-value sketch
    would leave more than ``max_sel`` of the rows to read (e.g. no layout clusters them), so they
    are dropped before sampling."""

    units, bad, stats = {}, {}, {}
    for key in keys:
        t, a = split_key(key, table)
        if t not in stats:
            stats[t] = column_stats(cat, t, versions[t])
        u = units[key] = read_units(cat, t, a, versions[t])
        lo, hi, _ = stats[t].get(a, (None, None, None))
        ceil = skip_ceiling(u.units, lo, hi)
        if ceil is not None and ceil > max_sel:
            bad[key] = (f"{a}: even a one-value sketch would read ~{ceil:.0%} of {t} ({u.source}; "
                        f"no layout clusters it)")
    return units, bad


def _by_value(cat: Catalog, q, table: str, plan: dict) -> bool:
    """Whether one capture job can read every planned candidate by value (method exact applies)."""
    pairs = [split_key(k, table) for k in plan]
    return bool(plan) and all(by_value_types_ok(q, {t: a}, {t: cat.column_type(t, a)}) for t, a in pairs)


def _missing_partitions(cat: Catalog, table: str, plan: dict) -> int:
    """Planned attributes without a stored partition at their finest granularity (any version: an
    older one is carried forward over small batches), i.e. partitions a sizing would build."""

    return sum(cat.store.one("SELECT 1 FROM partitions WHERE table_name=? AND attr=? AND n_target=? LIMIT 1",
                             (*split_key(k, table), max(g))) is None for k, g in plan.items())


def _partitions(cat: Catalog, table: str, plan: dict, versions: dict) -> dict:
    """(key, n) -> partition for the plan: the finest stored (or built), coarser ones derived."""
    parts = {}
    for key, grans in sorted(plan.items()):
        t, a = split_key(key, table)
        fine = fine_partition(cat, t, a, max(grans), versions[t])
        for n in grans:
            parts[(key, n)] = fine if n == max(grans) else derive_partition(fine, n)
    return parts


def _save_exact(cat: Catalog, table: str, versions: dict, sk, secs: float) -> dict:
    """Store the picked sketch of an exact sizing (captured in that job; the pool is safety-checked)."""
    sk = save_sketch(cat.store, sk)
    sel = sketch_rows(cat, sk) / max(1, cat.version(table, versions[table]).rows)
    return {"sketch_id": sk.id, "selectivity": sel, "seconds": round(secs, 3)}


def _capture(cat: Catalog, q, pick, d, parts: dict, versions, answer: list | None = None) -> dict:
    """Capture the picked sketch on the partition it was sized with (stored if derived); with an
    ``answer`` list, in a job that also answers the query when it captures by value."""

    table = pick.table
    part = store_partition(cat, parts[(d.attr, d.n_target)])
    res = capture(cat, q, {table: pick.attr}, part.n_target, versions, check=True, partitions={table: part},
                  answer=answer is not None)
    if res.answer is not None:
        answer.append(res.answer)
    sel = sketch_rows(cat, res.sketch) / max(1, cat.version(table, versions[table]).rows)
    return {"sketch_id": res.sketch.id, "selectivity": sel, "seconds": round(res.seconds, 3)}


def render(console, rec: dict) -> None:
    """The what-if table and the decision line."""
    if not rec["supported"] or not rec["estimable"]:
        console.print(rec["decision"]["reason"] or rec["reason"])
        return
    s = rec["sample"]
    if s is None:  # method exact: real sizes, no sample
        how = f"exact sizes from one capture job ({rec['seconds'].get('exact', 0.0):.1f}s)"
    else:
        drawn = "cached" if s["cached"] else f"drawn in {s['seconds']:.1f}s"
        how = f"sample {s['rows']:,} rows ({drawn})"
    title = (f"{rec['table']} ({rec['table_rows']:,} rows), {rec['shape']} query, strategy {rec['strategy']}, {how}")
    tab = Table("table", "attribute", "safe?", "est. selectivity [CI]", "fragments", "capture s", "saving s",
                "net s", "go", "pick", title=title)
    for c in sorted(rec["candidates"], key=lambda c: (not c["estimated"], c["selectivity"] or 2, c["attr"])):
        if c["estimated"]:
            sel = f"{c['selectivity']:.1%} [{c['ci'][0]:.1%}, {c['ci'][1]:.1%}]"
            if c["real_selectivity"] is not None:
                sel += f" real {c['real_selectivity']:.1%}"
            if c["read_fraction"] is not None:
                sel += f", reads ~{c['read_fraction']:.0%}"
            nums = [str(c["fragments"]), f"{c['capture_s']:.2f}", f"{c['saving_s']:.2f}", f"{c['net_s']:+.2f}",
                    "yes" if c["go"] else "no"]
        else:
            sel = (f"unsafe: {c['safety_reason'][:60]}" if not c["safe"] else
                   "no skipping layout" if c["layout_note"] else "-")
            nums = ["-"] * 5
        tab.add_row(c.get("table") or rec["table"], c["attr"], "yes" if c["safe"] else "no", sel, *nums,
                    "*" if c["picked"] else "")
    console.print(tab)
    if s["uniform_fallback"]:
        console.print("note: uniform sample (more groups than the sample budget): unsampled groups count as failing")
    console.print(f"reuse: {rec['workload']['reason']}")
    console.print(f"[bold]{rec['decision']['reason']}[/bold]")
    if rec["captured"]:
        c = rec["captured"]
        console.print(f"captured sketch {c['sketch_id']}: real selectivity {c['selectivity']:.1%} in {c['seconds']:.2f}s")


def recommend_command(ctx: Context, console, sql: str, strategy: str = "CB-OPT-GB", sample_rate: float = 0.05,
                      as_json: bool = False, capture: bool = False, fragments: int | None = None,
                      method: str = "bootstrap") -> dict:
    """CLI entry: progress bar on stderr while sampling/estimating, then the table (unless as_json)."""
    validate(strategy, sample_rate, fragments, method)
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("planning", total=None)

        def progress(msg: str) -> None:
            bar.update(task, description=msg, advance=1)

        rec = recommend(ctx, sql, strategy, sample_rate, capture, fragments, method, progress=progress)
    if not as_json:
        render(console, rec)
    return rec
