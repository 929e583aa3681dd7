"""One strategy's execution of one workload step: a query (reuse, or estimate-decide-capture, then
run) or an update batch (move the table's pin forward, maintain per the policy).  Produces the
records of ``reports/schema.py``."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import hashlib
import time
from typing import TYPE_CHECKING

from advisor.engine.execute import run_plain_sql, versions_now
from advisor.errors import BadInput, Unsupported, spark_rejected
from advisor.maintain.policy.triggers import after_apply, before_use
from advisor.maintain.spark.derive import derive_sketch
from advisor.maintain.spark.state_rental import record_rent
from advisor.partition.range_partition import load_partition
from advisor.plan.parse import parse_sql
from advisor.selection.cost_model import ADVICE_PRIOR_SCANS, PRIOR_REUSES, CostParams
from advisor.selection.decision_memory import forget, recall, remember, revisit, skip
from advisor.selection.recommend import recommend
from advisor.selection.strategies import draw_seed, strategy_draw
from advisor.sketch.capture import capture, capture_batch
from advisor.sketch.lookup import sketch_rows, usable_sketches
from advisor.sketch.run import run_query
from advisor.warehouse.sketch_records import load_sketch, retire, retire_extra_heads

if TYPE_CHECKING:
    from advisor.context import Context
    from advisor.warehouse.catalog import Catalog
    from advisor.warehouse.store import Store

LIVE_PER_TEMPLATE = 2  # live (used and maintained) sketch chains per template and strategy


def _norm(v):
    """Row values made comparable across plans: doubles summed in a different order differ in the
    last bits, so floats are rounded to 9 significant digits; everything else is exact."""
    if isinstance(v, float):
        return float(format(v, ".9g"))
    if isinstance(v, decimal.Decimal):
        return str(v.normalize()) if v == v else "NaN"
    if isinstance(v, (dt.date, dt.datetime)):
        return v.isoformat()
    return v


def digest(rows: list[tuple]) -> str:
    """Order-independent fingerprint of a bag of rows."""
    keys = sorted(repr(tuple(_norm(x) for x in r)) for r in rows)
    return hashlib.sha1("\n".join(keys).encode()).hexdigest()


def _sel(catalog: Catalog, sk, versions) -> float:
    total = sum(catalog.version(p.table, versions.get(p.table)).rows for p in sk.parts)
    return sketch_rows(catalog, sk) / max(1, total)


def _attr(sk) -> str:
    return ", ".join(f"{p.table}.{p.attr}" for p in sk.parts)


def _maint_record(catalog: Catalog, strategy: str, step: int, trigger: str, res, measure: bool) -> dict:
    """A maintenance event; with ``measure`` also a full recapture (not stored) timed and compared."""
    rec = {"strategy": strategy, "step": step, "trigger": trigger, "sketch_id": res.old_id,
           "new_sketch_id": res.new_id, "how": res.how, "seconds": round(res.seconds, 4),
           "delta_rows": res.delta_rows, "recapture_seconds": None, "equal_to_recapture": None}
    if measure and res.how == "incremental":
        secs, same = recapture_check(catalog, res.new_id)
        rec["recapture_seconds"], rec["equal_to_recapture"] = round(secs, 4), same
    return rec


def recapture_check(catalog: Catalog, sketch_id: int) -> tuple[float, bool]:
    """Capture the sketch's query afresh at its data versions (one job, nothing stored); returns the
    seconds and whether the fragments equal the maintained sketch's."""

    sk = load_sketch(catalog.store, sketch_id)
    q = parse_sql(sk.sql, lambda t: catalog.schema(t))
    on = {p.table: p.attr for p in sk.parts}
    parts = {p.table: load_partition(catalog.store, p.partition_id) for p in sk.parts}
    (fresh,), secs = capture_batch(catalog, [(q, on, parts)], dict(sk.data_versions))
    same = all(fresh.part(p.table).fragments == p.fragments for p in sk.parts)
    return secs, same


def _plain_rows(cat: Catalog, q) -> float:
    """Rows a plain run of ``q`` reads (every table it scans, once per scan)."""
    return float(sum(cat.version(s.table).rows for s in q.scans()))


def run_update(ctx: Context, strategy: str, step: dict, measure: bool) -> list[dict]:
    """Make the batch's version current for this strategy; maintain eagerly if the policy says so."""
    cat = ctx.catalog
    cat.pin(step["table"], step["version"])
    if strategy == "NO-PS":
        return []
    done = after_apply(cat, step["table"], step["inserts"] + step["deletes"])
    return [_maint_record(cat, strategy, step["step"], "update", r, measure) for r in done]


def run_query_step(ctx: Context, strategy: str, step: dict, wl) -> tuple[dict, list[dict]]:
    """Execute one query step for `strategy`; returns (query record, maintenance records)."""
    cat = ctx.catalog
    t_step, measuring = time.perf_counter(), 0.0  # measuring: work done only to record the step
    secs = {k: 0.0 for k in ("sampling", "estimation", "capture", "maintenance", "query", "other", "oracle")}
    rec = {"strategy": strategy, "step": step["step"], "template": step["template"], "sql": step["sql"],
           "bindings": step.get("bindings", {}),
           "decision": {"action": "plain", "reason": "", "attr": None, "fragments": None},
           "sketch_id": None, "selectivity": {"estimated": None, "ci": None, "real": None}}
    maint: list[dict] = []
    try:
        q = parse_sql(step["sql"], ctx.schema_lookup())
    except Unsupported as e:
        res = run_plain_sql(cat, step["sql"], str(e))
        rec["decision"].update(action="unsupported", reason=f"ran without a sketch: {e}")
        return _finish(rec, res, secs, spent=time.perf_counter() - t_step), maint
    sketch, answers, lookup_s = None, [], 0.0
    if strategy == "NO-PS":
        rec["decision"]["reason"] = "NO-PS never uses sketches"
    elif wl.measured_costs and (lost := revisit(cat.store, q.template, strategy, _plain_rows(cat, q),
                                                 str(step["step"]))):
        rec["decision"].update(action="no-go", reason=lost)
    else:
        t0 = time.perf_counter()
        declined: list[str] = []
        done = before_use(cat, q, declined if wl.measured_costs else None, answer=True)
        secs["maintenance"] = time.perf_counter() - t0
        answers += [r.answer for r in done if r.answer is not None][:1]
        t0 = time.perf_counter()
        maint = [_maint_record(cat, strategy, step["step"], "query", r, wl.measure_recapture) for r in done]
        measuring += time.perf_counter() - t0
        t0 = time.perf_counter()
        versions = versions_now(cat, q)
        good, bad = usable_sketches(cat, q, versions)
        lookup_s = time.perf_counter() - t0  # finding the sketch is part of using it (the query phase)
        if declined and not good:
            rec["decision"].update(action="no-go", reason=declined[0])
        elif good:
            sketch = good[0]
            rec["decision"].update(action="reuse", attr=_attr(sketch),
                                   reason=f"reused sketch {sketch.id}" + (
                                       "" if tuple(sketch.bindings) == tuple(q.bindings)
                                       else " (reuse proven by Z3 for these bindings)"))
        else:
            sketch = _decide(ctx, strategy, step, wl, q, versions, rec, secs, answers)
    versions = versions_now(cat, q)
    if answers:
        # the sizing or capture job answered the query at these versions: its time is already
        # charged (capture or estimation), so the step has no separate run
        job_s = answers[0].seconds
        res = dataclasses.replace(answers[0], seconds=0.0)
        job = ("recapture" if rec["decision"]["action"] == "reuse" else "capture" if secs["capture"] else "sizing")
        rec["decision"]["reason"] += f"; answered by the {job} job (no separate run)"
    else:
        job_s = None
        try:
            t0 = time.perf_counter()
            res = run_query(cat, q, versions, sketch)
            measuring += time.perf_counter() - t0 - res.seconds  # reading the scan metrics
        except Exception as e:
            if isinstance(e, BadInput):
                raise
            raise BadInput(f"step {step['step']}: {spark_rejected(e)}") from None
    if sketch is not None:
        rec["sketch_id"] = sketch.id
        t0 = time.perf_counter()
        rec["selectivity"]["real"] = _sel(cat, sketch, versions)
        measuring += time.perf_counter() - t0
    log = res.to_json() | {"rows": len(res.rows), "replay_step": step["step"], "template": q.template,
                           "capture_seconds": secs["capture"]}
    if job_s is not None:
        # calibration: a go answered by its capture is a use that cost the capture alone; a no-go
        # answered by the sizing job ran about as a plain run does (``calibrate``)
        log |= {"answered": True, "sketch": sketch.to_json() if sketch is not None else None,
                "seconds": 0.0 if sketch is not None else job_s,
                "capture_seconds": secs["capture"] or job_s if sketch is not None else 0.0}
    cat.store.log_run("run", step["sql"], log)
    return _finish(rec, res, secs, lookup_s, spent=time.perf_counter() - t_step - measuring), maint


def _decide(ctx: Context, strategy: str, step: dict, wl, q, versions: dict, rec: dict, secs: dict, answers: list):
    """No stored sketch serves the query: follow the template's remembered decision, or estimate,
    decide and capture (``recommend``) and remember the outcome.  Returns the sketch to use or None;
    a capture or sizing job that also answered the query appends its ``RunResult`` to ``answers``."""

    cat, store, d = ctx.catalog, ctx.catalog.store, rec["decision"]
    memo = recall(store, q.template, strategy)
    if memo is not None and skip(store, memo):
        if not memo.go:
            d.update(action="no-go", reason=f"{memo.reason} [remembered from step {memo.step}; " + (
                "final for this template]" if memo.structural else f"re-estimated after {memo.horizon:g} instances]"))
            return None
        try:
            part = load_partition(store, memo.partition_id)
            got = derive_sketch(cat, q, {memo.table: memo.attr}, {memo.table: part}, versions)
            if got is None:
                res = capture(cat, q, {memo.table: memo.attr}, part.n_target, versions, check=True,
                              partitions={memo.table: part}, answer=True)
                if res.answer is not None:
                    answers.append(res.answer)
                got, how = (res.sketch, res.seconds), "captured for these bindings"
                record_rent(store, res.sketch.id, res.seconds, res.seconds)  # rent paid on the template
            elif got[2] is None:
                how = ("derived for these bindings from their own operator state, initialised now "
                       "(ski rental: the template's captures and recaptures reached its predicted cost)")
            else:
                how = (f"derived for these bindings from the maintained operator state of sketch {got[2]} "
                       "(no capture job)")
        except BadInput:
            forget(store, q.template, strategy)
        else:
            secs["capture"] = got[1]
            d.update(action="capture", attr=f"{memo.table}.{memo.attr}", fragments=part.n_fragments,
                     reason=f"template decided at step {memo.step} (go on {memo.table}.{memo.attr}, "
                            f"{part.n_fragments} fragments): {how} without re-estimating")
            return _use_captured(cat, q, versions, got[0], d, store, strategy, step)

    base, draw = strategy_draw(strategy)
    r = recommend(ctx, step["sql"], base, wl.sample_rate, capture=True, fragments=wl.fragments,
                  method=wl.method, seed=draw_seed(wl.seed * 1_000_003 + step["step"], draw),
                  params=CostParams(measured=wl.measured_costs, advice_prior_scans=ADVICE_PRIOR_SCANS),
                  pairs=False, answer=answers)
    s = r["seconds"]
    secs["sampling"] = s.get("sampling", 0.0)
    secs["oracle"] = s.get("oracle", 0.0)
    cap = r.get("captured")
    secs["capture"] = cap["seconds"] if cap else 0.0
    secs["estimation"] = max(0.0, s.get("total", 0.0) - secs["sampling"] - secs["oracle"] - secs["capture"])
    dec = r["decision"]
    d.update(reason=dec["reason"], fragments=dec.get("fragments"),
             attr=f"{dec.get('table') or r['table']}.{dec['attr']}" if dec.get("attr") else None)
    picked = next((c for c in r["candidates"] if c["picked"]), None)
    if picked and picked["selectivity"] is not None:
        rec["selectivity"]["estimated"] = picked["selectivity"]
        rec["selectivity"]["ci"] = picked["ci"]
    horizon = (r.get("workload") or {}).get("predicted_reuses") or PRIOR_REUSES
    where = str(step["step"])
    if cap:
        sk = load_sketch(store, cap["sketch_id"])
        remember(store, q.template, strategy, go=True, reason=dec["reason"], table=dec.get("table") or r["table"],
                 attr=dec["attr"],
                 partition_id=sk.parts[0].partition_id, horizon=horizon, step=where)
        return _use_captured(cat, q, versions, sk, d, store, strategy, step)
    d["action"] = "no-go" if r["supported"] else "unsupported"
    structural = not r["supported"] or not (r.get("cannot_pay") or any(c["estimated"] for c in r["candidates"]))
    if r.get("cannot_pay") and r.get("pays_after") is not None:
        horizon = r["pays_after"] - 1  # the next instance counts one use more (``decisions.pays_after``)
    remember(store, q.template, strategy, go=False, reason=dec["reason"], structural=structural,
             horizon=horizon, step=where)
    return None


def _use_captured(cat: Catalog, q, versions, sk, d: dict, store: Store, strategy: str, step: dict):
    """The freshly captured sketch, unless the finder refuses it (e.g. it covers almost everything):
    then the run is plain and the template is remembered as no-go."""


    d["action"] = "capture"
    retired = retire_extra_heads(store, q.template, keep=LIVE_PER_TEMPLATE)
    if retired:
        d["reason"] += f"; retired sketch(es) {', '.join(map(str, retired))} of this template"
    good, bad = usable_sketches(cat, q, versions)
    if any(g.id == sk.id for g in good):
        return sk
    why = next((w for b, w in bad if b.id == sk.id), "not usable")
    d["reason"] += f"; captured sketch {sk.id} not used (retired): {why}"
    retire(store, sk.id, f"not usable when captured: {why}")  # never maintained or tried again
    remember(store, q.template, strategy, go=False, reason=f"captured sketch {sk.id} was not usable: {why}",
             horizon=3.0, step=str(step["step"]))
    return None


def _finish(rec: dict, res, secs: dict, lookup_s: float = 0.0, spent: float | None = None) -> dict:
    """Fill the record's scan, result and seconds.  ``spent`` is the step's wall time less the work
    done only to record it (scan metrics, real selectivity, measured recaptures); what of it no
    phase timed (parsing, recalling decisions, the finder after a capture, the run log) is ``other``."""
    m = res.metrics
    secs["query"] = res.seconds + lookup_s
    if spent is not None:
        secs["other"] = max(0.0, spent - sum(v for k, v in secs.items() if k != "other"))
    rec["lookup_seconds"] = round(lookup_s, 4)
    rec["scan"] = {"files": int(m.files_read), "bytes": int(m.bytes_read), "rows": int(m.rows_read)}
    rec["result"] = {"rows": len(res.rows), "digest": digest(res.rows)}
    rec["seconds"] = {k: round(v, 4) for k, v in secs.items()}
    rec["seconds"]["total"] = round(sum(v for k, v in secs.items() if k != "oracle"), 4)
    return rec
