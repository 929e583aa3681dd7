"""No stored sketch serves the query: follow the template's remembered decision, or estimate,
decide and capture (``advisor.selection.recommend``), and remember the outcome."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.errors import BadInput
from advisor.maintain.spark.derive import derive_sketch
from advisor.maintain.spark.state_rental import booked, record_rent
from advisor.partition.range_partition import load_partition
from advisor.selection.cost_model import ADVICE_PRIOR_SCANS, PRIOR_REUSES, CostParams
from advisor.selection.binding_reuse import binding_reuse, logged_instances
from advisor.selection.decision_memory import (REVISIT_FACTOR, forget, plain_seconds, recall, reestimate_after,
                                               remember, skip)
from advisor.selection.recommend import recommend
from advisor.selection.strategies import draw_seed, strategy_draw
from advisor.serve.copy_revisit import revisit_timed
from advisor.sketch.capture import capture
from advisor.sketch.lookup import usable_sketches
from advisor.warehouse.sketch_records import load_sketch, retire, retire_extra_heads

if TYPE_CHECKING:
    from advisor.context import Context
    from advisor.serve.settings import AdviseSettings

LIVE_PER_TEMPLATE = 2  # live (used and maintained) sketch chains per template and strategy


def decide(ctx: Context, s: AdviseSettings, where: str, q, versions: dict, rec: dict, secs: dict,
           answers: list):
    """Returns the sketch to use or None; a capture or sizing job that also answered the query
    appends its ``RunResult`` to ``answers``.  ``where`` labels the decision in the memory."""
    cat, store, d = ctx.catalog, ctx.catalog.store, rec["decision"]
    memo = recall(store, q.template, s.strategy)
    if memo is not None and skip(store, memo):
        if not memo.go:
            d.update(action="no-go", reason=f"{memo.reason} [remembered from step {memo.step}; " + (
                "final for this template]" if memo.structural else f"re-estimated after {memo.horizon:g} instances]"))
            return None
        got = _follow_go(ctx, q, versions, memo, answers)
        if got is not None:
            sk, seconds, how, part = got
            secs["capture"] = seconds
            d.update(action="capture", attr=f"{memo.table}.{memo.attr}", fragments=part.n_fragments,
                     reason=f"template decided at step {memo.step} (go on {memo.table}.{memo.attr}, "
                            f"{part.n_fragments} fragments): {how} without re-estimating")
            used = _use_captured(cat, q, versions, sk, d, s.strategy, where)
            copy = None if used is None else revisit_timed(ctx, s, q, versions, used, secs)
            if copy is not None:
                d.update(reason=d["reason"] + f"; {copy['reason']}", layout=copy)
            return used
        now = recall(store, q.template, s.strategy)
        if now is not None and not now.go:  # the go turned no-go for these bindings (``_follow_go``)
            d.update(action="no-go", reason=now.reason)
            return None
    return _estimate(ctx, s, where, q, versions, rec, secs, answers)


def _follow_go(ctx: Context, q, versions: dict, memo, answers: list):
    """(sketch, seconds, how, partition) for a remembered go: derived from maintained operator
    state when that is possible, else captured; None (and the memo forgotten) when it fails, or
    (the memo turned no-go) when the template's bindings leave a capture nothing to serve
    (``advisor.selection.binding_reuse``)."""
    cat, store = ctx.catalog, ctx.catalog.store
    try:
        part = load_partition(store, memo.partition_id)
        got = derive_sketch(cat, q, {memo.table: memo.attr}, {memo.table: part}, versions)
        if got is None:
            br = binding_reuse(logged_instances(store, q.template) + [q.sql], ctx.schema_lookup())
            if br.expected_reuses(memo.horizon) < 1.0:
                why = (f"no-go (bindings): {br.describe()}; a capture for these bindings is expected to serve "
                       f"{br.expected_reuses(memo.horizon):.2f} later instance(s); was go on {memo.table}.{memo.attr}")
                remember(store, q.template, memo.strategy, go=False, reason=why,
                         horizon=REVISIT_FACTOR * memo.horizon, step=memo.step)
                return None
            res = capture(cat, q, {memo.table: memo.attr}, part.n_target, versions, check=True,
                          partitions={memo.table: part}, answer=True)
            if res.answer is not None:
                answers.append(res.answer)
            tables = {sc.table for sc in q.scans()}
            cost = booked(store, sum(cat.version(t, v).rows for t, v in versions.items() if t in tables), res.seconds)
            record_rent(store, res.sketch.id, cost, cost)  # rent paid on the template
            return res.sketch, res.seconds, "captured for these bindings", part
        if got[2] is None:
            how = ("derived for these bindings from their own operator state, initialised now "
                   "(ski rental: the template's captures and recaptures reached its predicted cost)")
        else:
            how = (f"derived for these bindings from the maintained operator state of sketch {got[2]} "
                   "(no capture job)")
        return got[0], got[1], how, part
    except BadInput:
        forget(store, q.template, memo.strategy)
        return None


def _estimate(ctx: Context, s: AdviseSettings, where: str, q, versions: dict, rec: dict, secs: dict,
              answers: list):
    """Sample, estimate, decide and capture on a go (``recommend``); remember the decision."""
    store, d = ctx.catalog.store, rec["decision"]
    base, draw = strategy_draw(s.strategy)
    r = recommend(ctx, rec["sql"], base, s.sample_rate, capture=True, fragments=s.fragments,
                  method=s.method, seed=draw_seed(s.seed, draw),
                  params=CostParams(measured=s.measured_costs, advice_prior_scans=ADVICE_PRIOR_SCANS,
                                    build_layouts=s.build_layouts,
                                    copy_budget_bytes=None if s.copy_budget_mb is None else s.copy_budget_mb * 1e6,
                                    **({"prior_reuses": s.uses} if s.uses is not None else {})),
                  pairs=False, answer=answers)
    t = r["seconds"]
    secs["sampling"] = t.get("sampling", 0.0)
    secs["oracle"] = t.get("oracle", 0.0)
    cap = r.get("captured")
    lay = r.get("layout")
    secs["capture"] = (cap["seconds"] if cap else 0.0) + (lay.get("seconds", 0.0) if lay else 0.0)
    secs["estimation"] = max(0.0, t.get("total", 0.0) - secs["sampling"] - secs["oracle"] - secs["capture"])
    dec = r["decision"]
    d.update(reason=dec["reason"], fragments=dec.get("fragments"), layout=lay or dec.get("layout"),
             attr=f"{dec.get('table') or r['table']}.{dec['attr']}" if dec.get("attr") else None)
    picked = next((c for c in r["candidates"] if c["picked"]), None)
    if picked and picked["selectivity"] is not None:
        rec["selectivity"]["estimated"] = picked["selectivity"]
        rec["selectivity"]["ci"] = picked["ci"]
    horizon = (r.get("workload") or {}).get("predicted_reuses") or PRIOR_REUSES
    table = dec.get("table") or r["table"]
    if cap:
        sk = load_sketch(store, cap["sketch_id"])
        remember(store, q.template, s.strategy, go=True, reason=dec["reason"], table=table, attr=dec["attr"],
                 partition_id=sk.parts[0].partition_id, horizon=horizon, step=where)
        return _use_captured(ctx.catalog, q, versions, sk, d, s.strategy, where)
    d["action"] = "no-go" if r["supported"] else "unsupported"
    structural = not r["supported"] or not (r.get("cannot_pay") or any(c["estimated"] for c in r["candidates"]))
    if r.get("cannot_pay") and r.get("pays_after") is not None:
        horizon = r["pays_after"] - 1  # the next instance counts one use more (``decisions.pays_after``)
    elif not structural and s.measured_costs:
        horizon = reestimate_after(horizon, t.get("total", 0.0), plain_seconds(store, q.template, rec["table_rows"]))
    # a pick declined for its layout's price still names its attribute: the layout's other users
    # (``layout_cost.other_uses``) count this template's predicted uses
    needs = dec.get("layout") is not None
    remember(store, q.template, s.strategy, go=False, reason=dec["reason"], structural=structural,
             horizon=horizon, step=where, table=table if needs else None, attr=dec["attr"] if needs else None)
    return None


def _use_captured(cat, q, versions, sk, d: dict, strategy: str, where: str):
    """The freshly captured sketch, unless the finder refuses it (e.g. it covers almost everything):
    then the run is plain and the template is remembered as no-go."""
    d["action"] = "capture"
    retired = retire_extra_heads(cat.store, q.template, keep=LIVE_PER_TEMPLATE)
    if retired:
        d["reason"] += f"; retired sketch(es) {', '.join(map(str, retired))} of this template"
    good, bad = usable_sketches(cat, q, versions)
    if any(g.id == sk.id for g in good):
        return sk
    why = next((w for b, w in bad if b.id == sk.id), "not usable")
    d["reason"] += f"; captured sketch {sk.id} not used (retired): {why}"
    retire(cat.store, sk.id, f"not usable when captured: {why}")  # never maintained or tried again
    remember(cat.store, q.template, strategy, go=False, reason=f"captured sketch {sk.id} was not usable: {why}",
             horizon=3.0, step=where)
    return None
