"""The steps ``recommend`` runs in order (``advisor.selection.recommend``), each reading what the earlier
ones found in an ``Advice`` and filling its part of the advice record."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Callable

from advisor.calibration import warmth
from advisor.engine.execute import versions_now
from advisor.errors import Unsupported
from advisor.estimation.candidate_sizes import Candidate, SizeSummary
from advisor.estimation.exact_sizes import exact_sizes, oracle
from advisor.estimation.sample_store import sample_cached
from advisor.estimation.size_estimates import CannotEstimate, Shape, analyze, estimate, split_key
from advisor.layout.hypothetical import clustered_units, unit_rows
from advisor.layout.skip_prediction import sketch_read_fraction
from advisor.partition.fragment_runs import read_set
from advisor.partition.refine import derive_partition, fine_partition, store_partition
from advisor.plan.parse import parse_sql
from advisor.plan.read_columns import read_columns
from advisor.selection.attribute_pairs import capture_pair, pair_candidates, pair_keys
from advisor.selection.candidates import enumerate_candidates
from advisor.selection.cost_model import (
    GRANULARITIES,
    CostParams,
    Decision,
    UseForecast,
    candidate_costing,
    cannot_pay,
    granularities_for,
)
from advisor.selection.decision_memory import pays_after
from advisor.selection.exact_sizing import cheaper_than_sampling, exact_extra_jobs, save_exact
from advisor.selection.forecast import predict_workload
from advisor.selection.copy_pricing import build_copy, can_copy, layout_check, layout_phrase, price_copy
from advisor.selection.strategies import choose, pool_of
from advisor.sketch.capture import capture
from advisor.sketch.lookup import sketch_rows
from advisor.warehouse.column_stats import column_stats

if TYPE_CHECKING:
    from advisor.context import Context
    from advisor.plan.ir import Query
    from advisor.warehouse.catalog import Catalog


@dataclass
class Advice:
    """One ``recommend`` call on its way through the steps: the request, what each step found that a
    later one needs, and the record being filled."""

    ctx: Context
    sql: str
    strategy: str
    sample_rate: float
    fragments: int | None
    method: str
    seed: int
    progress: Callable[[str], None] | None
    params: CostParams
    pairs: bool
    answer: list | None
    rec: dict
    cat: Catalog | None = None
    q: Query | None = None
    shape: Shape | None = None
    versions: dict = field(default_factory=dict)
    table: str | None = None
    table_rows: int = 0
    cands: list = field(default_factory=list)
    pool: list = field(default_factory=list)
    plan: dict = field(default_factory=dict)           # candidate key -> granularities to size
    units: dict = field(default_factory=dict)          # candidate key -> read units of its table
    unskippable: dict = field(default_factory=dict)    # candidate key -> why no layout lets it skip
    to_build: dict = field(default_factory=dict)       # candidate key -> why it needs a new layout
    workload: UseForecast | None = None
    unsampled: bool = False                            # sized without sampling (OPT, method exact)
    missing: int = 0                                   # partitions such a sizing would build
    hopeless: str | None = None                        # why even a perfect sketch could not pay
    exact: tuple | None = None                         # (sizes, sketches, seconds) of an exact sizing
    parts: dict | None = None                          # (key, n) -> partition sized on
    by: dict = field(default_factory=dict)             # candidate key -> candidate
    reads: dict = field(default_factory=dict)          # table -> base columns the query reads of it
    decision: Decision | None = None
    pick: Candidate | None = None


def parse_query(a: Advice) -> bool:
    """Parse the query; one the planner cannot sketch at all ends the advice (False)."""
    try:
        a.q = parse_sql(a.sql, a.ctx.schema_lookup())
    except Unsupported as e:
        a.rec.update(supported=False, reason=str(e))
        a.rec["decision"]["reason"] = f"no-go: the query cannot use sketches ({e})"
        return False
    return True


def analyze_query(a: Advice) -> bool:
    """The query's shape for the estimators (which table to sample, HAVING / top-k / nested); a
    shape they cannot model ends the advice (False)."""
    cat = a.cat = a.ctx.catalog
    try:
        a.shape = analyze(a.q, lambda t: cat.version(t).rows)
    except CannotEstimate as e:
        a.rec["reason"] = str(e)
        a.rec["decision"]["reason"] = f"no-go: cannot estimate sketch sizes ({e})"
        return False
    return True


def read_versions(a: Advice) -> None:
    """The table versions the query reads now, and the sampled table with its rows."""
    a.versions = versions_now(a.cat, a.q)
    a.table = a.shape.fact.table
    a.table_rows = a.cat.version(a.table, a.versions[a.table]).rows
    a.rec.update(table=a.table, table_rows=a.table_rows, shape=a.shape.kind)


def plan_candidates(a: Advice) -> None:
    """Candidates with their safety verdicts, the strategy's pool and the granularities to size
    each at.  An attribute the table's files cannot skip on is kept, to be priced with the layout
    it needs (``to_build``), or dropped when layouts may not be built (noted on the candidate)."""
    a.cands = enumerate_candidates(a.cat, a.q, a.shape, a.versions)
    grans = (int(a.fragments),) if a.fragments else GRANULARITIES
    a.pool = pool_of("CB-OPT" if a.strategy == "OPT" else a.strategy, a.cands)
    a.plan = {c.key: g for c in a.pool if (g := granularities_for(c.ndv, grans))}
    a.reads = read_columns(a.q)
    a.units, unskippable = layout_check(a.cat, a.table, list(a.plan), a.versions, a.params.max_sel, a.reads)
    for key, why in unskippable.items():
        if a.params.build_layouts and "&" not in key and can_copy(a.cat, split_key(key, a.table)[0]):
            a.to_build[key] = why  # priced with the layout it needs (``price_layouts``)
        else:
            if not can_copy(a.cat, split_key(key, a.table)[0]):
                t, attr = split_key(key, a.table)
                why += (f"; the advisor copies a Delta table only with a declared key (`--key`), which its "
                        f"copy follows the commits by; files written sorted by {attr} "
                        f"(or `OPTIMIZE {t} ZORDER BY ({attr})`) would let its sketches skip there")
            a.unskippable[key] = why
            del a.plan[key]
    for c in a.cands:
        c.skip_note = a.unskippable.get(c.key) or a.to_build.get(c.key)


def predict_reuse(a: Advice) -> None:
    """The template's predicted reuse and the measured costs the cost model weighs it with."""
    w = a.workload = replace(predict_workload(a.ctx.store, a.q, a.table, a.params, upto=a.versions[a.table],
                                              table_rows=a.table_rows),
                             reads=sum(s.table == a.table for s in a.q.scans()))
    a.rec["template"] = a.q.template
    a.rec["workload"] = {"predicted_reuses": w.reuses, "updates_per_use": w.updates_per_use, "steps_per_use": w.steps,
                         "scan_rows_per_s": w.scan_rate, "fixed_rows": w.fixed_rows,
                         "advice_rows": w.advice_rows, "reason": w.reason}


def price_layouts(a: Advice) -> None:
    """Each planned candidate that needs a new layout to skip gets its price: the build in rows
    (measured, else the prior) and this template's share of it (``advisor.selection.layout_cost``)."""
    for key in a.to_build:
        _price(a, key)


def _price(a: Advice, key: str) -> None:
    """Attach the priced copy to candidate ``key`` (``price_layouts``, ``copy_pricing.price_copy``)."""
    t, attr = split_key(key, a.table)
    lay = price_copy(a.cat, t, attr, a.versions[t], a.reads.get(t, ()), a.workload, a.q.template)
    for c in a.cands:
        if c.key == key and not c.attrs:
            c.layout = dict(lay)


def check_can_pay(a: Advice) -> None:
    """``cannot_pay`` before any sizing: when even a sketch skipping every row could not repay the
    advice and capture, nothing is sized (the plan is emptied) and the record says why."""
    w, p, T = a.workload, a.params, a.table_rows
    # a sizing without sampling: OPT's oracle, or method exact when every candidate is read by value
    deciding = {c.key for c in a.pool if "gb" in c.roles}
    extra = (exact_extra_jobs(a.cat, a.q, a.table, a.plan, deciding)
             if a.method == "exact" or (a.method == "bootstrap" and a.strategy != "OPT") else None)
    a.missing = _missing_partitions(a.cat, a.table, a.plan)
    if extra is not None and a.method != "exact":
        # under the estimators: only a query that is run anyway (not a what-if) and not sampled yet
        why = (None if a.answer is None or advice_sample_cached(a) else
               cheaper_than_sampling(w, p, T, extra, a.missing, len(a.shape.read_columns()), warmth.advised()))
        extra = None if why is None else extra
        if why:
            a.rec["sizing"] = why
    a.unsampled = a.strategy == "OPT" or extra is not None
    # measured costs off (the paper's model, timing-free decisions): sampling is not charged; a
    # candidate the by-value job cannot carry is captured in one more job, about one scan
    advice = (None if a.strategy == "OPT"
              else w.sizing_rows(a.missing, T, len(a.shape.read_columns()), warmth.advised()) + (extra or 0) * T
              if a.unsampled
              else None if not p.charge_advice
              else w.sampled_advice_rows(T, p.advice_prior_scans, cached=advice_sample_cached(a), missing=a.missing,
                                         columns=len(a.shape.read_columns())) if p.measured else w.advice_rows)
    a.rec["advice_priced_rows"] = advice
    a.rec["sample_cached"] = None if a.unsampled else advice_sample_cached(a)
    a.rec["partitions_missing"] = a.missing
    hopeless = None if a.strategy == "NO-PS" or not a.plan or a.fragments else cannot_pay(T, w, p, advice)
    a.rec["cannot_pay"] = bool(hopeless)
    a.rec["pays_after"] = pays_after(T, w, p, advice) if hopeless else None
    if hopeless:
        a.rec["reason"] = hopeless
        a.plan = {}
    a.hopeless = hopeless


def size_candidates(a: Advice) -> None:
    """Size the planned candidates: exactly in one capture job, by OPT's oracle, or from a sample;
    with nothing planned, say why."""
    a.by = {c.key: c for c in a.cands}
    if a.plan and a.unsampled:
        _build_partitions(a)
    if a.parts is not None and a.strategy != "OPT":
        _size_exactly(a)
    elif a.parts is not None:
        _size_by_oracle(a)
    elif a.plan:
        _size_from_sample(a)
    elif a.strategy != "NO-PS" and a.unskippable:
        a.rec["reason"] = "no candidate the table's layout can skip on: " + "; ".join(a.unskippable.values())
    elif a.strategy != "NO-PS":
        a.rec["reason"] = f"no safe candidate in the {a.strategy} pool"


def _build_partitions(a: Advice) -> None:
    """The partitions an unsampled sizing captures on, timed."""
    t0 = time.perf_counter()
    a.parts = _partitions(a.cat, a.table, a.plan, a.versions)
    # an oracle knows the sizes for free: OPT's partitions are part of its (excluded) oracle work
    a.rec["seconds"]["oracle_partitions" if a.strategy == "OPT" else "partitions"] = round(time.perf_counter() - t0, 3)
    a.rec["partitions_built"] = a.missing


def _read_through_units(a: Advice, est, keys: set | None = None) -> None:
    """Each estimated size with the read fraction its candidate's read units give."""
    for (k, n), se in est.sizes.items():
        if keys is not None and k not in keys:
            continue
        part = est.partitions[(k, n)]
        a.by[k].sizes[n] = SizeSummary.of(se, part).with_read(
            sketch_read_fraction(a.units[k].units, part, se.fragment_probability, bridged(se, part)),
            a.units[k].source)


def _units_to_build(a: Advice) -> None:
    """The read units of the layouts candidates would build (``advisor.layout.hypothetical``), from
    the finest partition sized on: a sketch on such a candidate is priced as read through them."""
    done = set()
    for (key, n), part in sorted((a.parts or {}).items(), key=lambda kv: (kv[0][0], -kv[0][1])):
        if key not in a.to_build or key in done:
            continue
        done.add(key)
        t, attr = split_key(key, a.table)
        lo = column_stats(a.cat, t, a.versions[t]).get(attr, (None,))[0]
        a.units[key] = clustered_units(part, lo, unit_rows(a.cat, t, attr, a.versions[t]))


def _size_exactly(a: Advice) -> None:
    """Method exact: one capture job reads every candidate by value, giving real sizes (and the
    sketches, so a later capture is sunk)."""
    if a.progress:
        a.progress(f"capturing {len(a.parts)} candidate sketch(es) by value (exact sizes)")
    _units_to_build(a)
    a.exact = exact_sizes(a.cat, a.q, a.parts, a.versions, a.units, answer=a.answer)
    sizes, sketches, secs = a.exact
    a.workload = replace(a.workload, capture_sunk=True)  # the sizing job captured every candidate already
    a.rec.update(estimable=True, exact=True)
    a.rec["seconds"]["exact"] = round(secs, 3)
    for (k, n), s in sizes.items():
        a.by[k].sizes[n] = s


def _size_by_oracle(a: Advice) -> None:
    """OPT: every candidate captured (evaluation only); real sizes stand in as estimates."""
    if a.progress:
        a.progress(f"capturing {len(a.parts)} candidate sketch(es) (OPT oracle)")
    _units_to_build(a)
    real, secs = oracle(a.cat, a.q, a.parts, a.versions, a.units)
    a.rec["seconds"]["oracle"] = round(secs + a.rec["seconds"]["oracle_partitions"], 3)
    a.rec["estimable"] = True
    for (k, n), s in real.items():
        a.by[k].real[n] = a.by[k].sizes[n] = s


def _size_from_sample(a: Advice) -> None:
    """Sample and estimate every planned candidate's size with its expected read fraction, then
    offer the attribute pairs worth weighing."""
    est = estimate(a.cat, a.shape, a.plan, a.sample_rate, a.seed, "bootstrap" if a.method == "exact" else a.method,
                   versions=a.versions, progress=a.progress, pairs=pair_keys(a.pool, a.plan) if a.pairs else None)
    a.rec["estimable"] = True
    a.rec["partitions_built"] = a.missing  # priced per partition by later advice (``Calibration.sampled_rows``)
    a.rec["seconds"].update({k: round(v, 3) for k, v in est.seconds.items()})
    a.rec["sample"] = {"strata": est.sample.strata, "rows": est.sample.meta.get("sample_size"),
                       "cached": est.sample.cached, "uniform_fallback": est.sample.meta.get("uniform_fallback"),
                       "maintained_from": est.sample.meta.get("maintained_from"),
                       "seconds": round(est.sample.seconds, 3)}
    a.rec["estimation_notes"] = list(est.notes)
    a.parts = est.partitions
    _units_to_build(a)
    _read_through_units(a, est)
    spread = [k for k in {k for k, _ in est.sizes} if k not in a.to_build and a.params.build_layouts
              and can_copy(a.cat, a.table)
              and not a.by[k].dim and min(x.read for x in a.by[k].sizes.values()) > a.params.max_read]
    for k in spread:  # the files could skip on it, but its sketch's fragments are spread over them
        best = min(x.read for x in a.by[k].sizes.values())
        a.to_build[k] = f"{k}: its sketch would still read ~{best:.0%} of the table's files"
        a.by[k].skip_note = a.to_build[k]
        _price(a, k)
    if spread:
        _units_to_build(a)
        _read_through_units(a, est, set(spread))
    _copies_that_pay_more(a, est)
    duo = pair_candidates(a.cat, a.q, a.shape, a.versions, est, a.by, a.units, a.table, bridged)
    a.cands += duo
    a.by.update({c.key: c for c in duo})


def _copies_that_pay_more(a: Advice, est) -> None:
    """Candidates the files as stored already skip on, priced again through the copy they would
    get (``_price``): the copy is kept when its net over the predicted uses beats the files' own
    (a copy reading 1 % against files reading 19 % pays once a template runs often enough)."""
    if not a.params.build_layouts or not can_copy(a.cat, a.table):
        return
    w, p, T = a.workload, a.params, a.table_rows
    for k in sorted({k for k, _ in est.sizes}):
        c = a.by[k]
        if k in a.to_build or c.dim or c.attrs or not c.sizes:
            continue
        stored = candidate_costing(c, c.sizes, T, w, p)
        if stored is None:
            continue
        kept = (dict(c.sizes), a.units.get(k), c.skip_note)
        a.to_build[k] = f"{k}: its sketch would read ~{stored.read:.0%} of the files as stored"
        _price(a, k)
        _units_to_build(a)
        _read_through_units(a, est, {k})
        copy = candidate_costing(c, c.sizes, T, w, p)
        if copy is not None and copy.go and copy.net_rows > max(stored.net_rows, 0.0):
            c.skip_note = a.to_build[k] + f" (through a copy ~{copy.read:.0%})"
            continue
        del a.to_build[k]
        c.sizes, c.layout, c.skip_note = kept[0], None, kept[2]
        a.units[k] = kept[1]


def decide(a: Advice) -> None:
    """The strategy's pick and go/no-go, with the reason the advice stopped early if it did."""
    d = a.decision = choose(a.strategy, a.cands, a.table_rows, a.workload, a.params, a.seed, a.fragments)
    if a.hopeless:
        d.reason = a.hopeless
    elif not d.go and d.attr is None and a.unskippable and a.strategy != "NO-PS":
        d.reason = f"no-go: {a.rec['reason']}"
    pick = a.pick = a.by.get(d.attr)
    if a.rec.get("sizing") and not a.hopeless:
        d.reason += f"; {a.rec['sizing']}"
    if pick is not None and pick.layout is not None:
        d.reason += "; " + layout_phrase(pick.layout, a.workload.reuses, rows=pick.rows or a.table_rows,
                                         costing=d.costing, files=pick.skip_note)
    a.rec["decision"] = {"table": pick.table if pick else None, "attr": pick.attr if pick else None,
                         "attrs": list(pick.attrs) if pick and pick.attrs else None,
                         "fragments": d.costing.n_fragments if d.costing else None, "fragments_target": d.n_target,
                         "go": d.go, "reason": d.reason, "layout": dict(pick.layout) if pick and pick.layout else None,
                         "figures": None if d.costing is None else asdict(d.costing) | {
                             "seconds": d.costing.seconds(a.workload.scan_rate)}}


def record_candidates(a: Advice) -> None:
    """One record per candidate, in the candidates' order."""
    for c in a.cands:
        a.rec["candidates"].append(_candidate_record(c, a.decision.attr, a.table_rows, a.workload, a.params,
                                                     a.fragments))


def _candidate_record(c, picked, T: int, w: UseForecast, p: CostParams, fragments) -> dict:
    """A candidate's record: its estimate and costing at the granularity the cost model chose, and
    the net saving at each granularity sized."""
    k = candidate_costing(c, c.sizes, T, w, p, fragments) if c.sizes else None
    s = c.sizes.get(k.n_target) if k else None
    secs_ = k.seconds(w.scan_rate) if k else {}
    real = c.real.get(k.n_target) if k else None
    return {
        "table": c.table, "attr": c.attr, "attrs": list(c.attrs) or None, "safe": c.safe,
        "safety_reason": c.reason, "ndv": c.ndv,
        "roles": sorted(c.roles),
        "estimated": bool(c.sizes), "fragments": k.n_fragments if k else None,
        "fragments_target": k.n_target if k else None,
        "selectivity": s.sel if s else None, "ci": [s.sel_lo, s.sel_hi] if s else None,
        "ci_exact": s.ci_exact if s else None, "unseen_groups": s.unseen_groups if s else None,
        "read_fraction": s.read if s else None, "read_units": s.read_source if s else None,
        "layout_note": c.skip_note, "layout": c.layout,
        "selectivity_point": s.sel_point if s else None, "real_selectivity": real.sel if real else None,
        "real_read_fraction": real.read if real else None,
        "capture_s": secs_.get("capture"), "saving_s": secs_.get("saving"), "net_s": secs_.get("net"),
        "go": k.go if k else None, "picked": c.key == picked,
        "by_granularity": [{"fragments": n, "n_fragments": x.n_fragments, "selectivity": x.sel,
                            "ci": [x.sel_lo, x.sel_hi],
                            "net_scans": candidate_costing(c, {n: x}, T, w, p).net_rows / max(c.rows or T, 1)}
                           for n, x in sorted(c.sizes.items())]}


def save_pick(a: Advice) -> None:
    """``capture=True``: save the exact sizing's sketch of the pick, or capture the picked pair or
    attribute; a no-go captures nothing and says so."""
    d, pick = a.decision, a.pick
    if d.go and pick is not None and pick.layout is not None:
        a.rec["layout"] = _build(a, pick)
    if d.go and pick is not None and a.exact is not None:
        a.rec["captured"] = save_exact(a.cat, pick.table, a.versions, a.exact[1][(d.attr, d.n_target)], a.exact[2])
    elif d.go and pick is not None and pick.attrs:
        a.rec["captured"] = capture_pair(a.cat, a.q, pick, d.n_target, a.parts, a.versions,
                                         pick.sizes[d.n_target].read_source)
    elif d.go and pick is not None:
        a.rec["captured"] = _capture(a.cat, a.q, pick, d, a.parts, a.versions, a.answer)
    else:
        a.rec["reason"] = (a.rec["reason"] + "; " if a.rec["reason"] else "") + "nothing captured: the decision is no-go"


def _build(a: Advice, pick) -> dict:
    """Build the copy the picked sketch needs to skip (``copy_pricing.build_copy``); copies dropped
    under the disk budget are named in the decision."""
    if a.progress:
        a.progress(f"building a {'narrow copy' if pick.layout.get('columns') else 'layout'} of "
                   f"{pick.layout['table']} clustered on {pick.layout['attr']}")
    build_copy(a.cat, pick.layout, a.versions[pick.layout["table"]], a.params.copy_budget_bytes)
    if pick.layout.get("dropped"):
        a.decision.reason += "; " + "; ".join(pick.layout["dropped"])
        a.rec["decision"]["reason"] = a.decision.reason
    return dict(pick.layout)


def bridged(se, part) -> frozenset:
    """Fragments the filter would add by bridging gaps (``use.capped_runs``) if the sketch were its
    likely fragments (probability >= 0.5): read for certain, so the predicted read fraction does not
    pretend a scattered sketch skips what its 32-range filter cannot."""
    prob = se.fragment_probability
    likely = frozenset(int(f) for f, p in (prob.items() if prob is not None else ()) if p >= 0.5)
    return read_set(likely, part) - likely



def advice_sample_cached(a: Advice) -> bool:
    """Whether the sample this advice would draw is stored already (``sample_store.sample_cached``)."""
    return sample_cached(a.cat, a.table, a.shape.strata, a.sample_rate, a.seed, a.versions[a.table])


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


def _capture(cat: Catalog, q, pick, d, parts: dict, versions, answer: list | None = None) -> dict:
    """Capture the picked sketch on the partition it was sized with (stored if derived); with an
    ``answer`` list, in a job that also answers the query."""

    table = pick.table
    part = store_partition(cat, parts[(d.attr, d.n_target)])
    res = capture(cat, q, {table: pick.attr}, part.n_target, versions, check=True, partitions={table: part},
                  answer=answer is not None)
    if res.answer is not None:
        answer.append(res.answer)
    sel = sketch_rows(cat, res.sketch) / max(1, cat.version(table, versions[table]).rows)
    return {"sketch_id": res.sketch.id, "selectivity": sel, "seconds": round(res.seconds, 3)}
