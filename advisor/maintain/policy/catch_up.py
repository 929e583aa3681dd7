"""Is bringing a stale sketch up to date worth it for the query that wants it?  Decided from what
this store has measured: the template's plain and sketched query times, and what maintaining it
costs (a recapture while the chain has no operator state, an incremental step once it has).

At TPC-H SF1 on 2 cores a stale top-k sketch was recaptured for 2.9 s before each use that then
saved 0.1-0.4 s over a plain run; lazily maintaining it lost ~70 s over the run.  When the
predicted maintenance exceeds what the uses until the next batch save, the query runs plain and
the sketch stays stale (it can be caught up in one step later, when that pays).  A template never
run plain in this store gets its plain time from its captures, else the fitted cost line
(``calibrate.plain_proxy``); without a sketched run or a maintenance measurement, maintenance goes
ahead: no evidence against it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from advisor.calibration.measured_costs import calibrate, plain_proxy
from advisor.maintain.spark.bulk_init import supports
from advisor.maintain.spark.state_rental import predict_init, rent_of
from advisor.plan.parse import parse_sql

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog


@dataclass
class Evidence:
    plain_s: float | None       # median plain run of the template
    sketched_s: float | None    # median sketched run of the template
    uses_per_batch: float       # instances of the template per update batch of its tables
    future_uses: float          # predicted further instances (the template seen m times: m more)
    maint_s: float | None       # predicted next step: recapture (no state) or incremental step
    init_s: float | None        # predicted state initialisation (no state yet), else None
    inc_s: float | None         # predicted incremental step once state exists


def _saving(e: Evidence) -> float:
    """What the uses until the next batch save over plain runs."""
    return max(0.0, e.plain_s - e.sketched_s) * max(1.0, e.uses_per_batch)


def buy_now(e: Evidence) -> bool:
    """Whether maintenance is worth it only because operator state would pay over the horizon: then
    the state is bought at once (``maintain_sketch(buy=True)``).  Renting first (a recapture the use
    cannot repay) would only add to the purchase: big_orders at SF1 paid 1.3-2.3 s recaptures before
    six uses that each saved ~0.7 s, then bought the state anyway (BENCHMARKS.md)."""
    if e.plain_s is None or e.sketched_s is None or e.maint_s is None or e.init_s is None or e.inc_s is None:
        return False
    saving = _saving(e)
    if saving >= e.maint_s or e.future_uses <= 0:
        return False
    return e.future_uses / max(1.0, e.uses_per_batch) * (saving - e.inc_s) > e.init_s


def decline_reason(e: Evidence) -> str | None:
    """Why maintaining now does not pay (run plain instead), or None to maintain."""
    if e.plain_s is None or e.sketched_s is None or e.maint_s is None:
        return None
    saving = _saving(e)
    if saving >= e.maint_s or buy_now(e):  # a rent repaid by this batch's uses, or state that pays
        return None
    return (f"stale sketch not maintained: maintenance ~{e.maint_s:.2f} s > saving ~{saving:.2f} s "
            f"(plain {e.plain_s:.2f} s vs sketched {e.sketched_s:.2f} s, {max(1.0, e.uses_per_batch):.1f} "
            f"use(s) per batch; measured)")


def _init_seconds(catalog: Catalog, sk, rows: float) -> float:
    """Predicted initialisation of the sketch's operator state (``rent.predict_init``)."""
    root = parse_sql(sk.sql, catalog.schema).root
    return predict_init(catalog.store, root, rows, supports(root), sk.template)


def evidence(catalog: Catalog, sk, has_state: bool, limit: int = 400) -> Evidence:
    """Gather the measurements for sketch ``sk``'s template from the store's run log."""
    store = catalog.store
    cal = calibrate(store, limit)
    plain, sketched = cal.query_s.get(sk.template, ([], []))
    # every table the query reads: a sketch on a joined dimension goes stale with the fact table's
    # batches, and a plain run reads all of them
    tables = set(sk.data_versions) or {p.table for p in sk.parts}
    batches = sum(1 for t in tables for v in catalog.versions(t) if v.kind == "batch")
    n = len(plain) + len(sketched) + cal.answered.get(sk.template, 0)
    rows = sum(catalog.version(t).rows for t in tables)
    inc = cal.inc_step_s(sk.template)  # own steps, the other templates' standing in while few
    if has_state:
        maint, init = inc, None
    else:
        _, last = rent_of(store, sk.id)
        maint = last or cal.recapture_s.get(sk.template)
        init = _init_seconds(catalog, sk, rows)
    med = lambda xs: statistics.median(xs[:10]) if xs else None  # noqa: E731
    # never run plain in this store (every instance used a sketch): its captures stand in.  With the
    # fitted line (9.0 s for a 1.5 s scan) SF1 big_orders kept maintaining a sketch whose runs took
    # 1.8-2.7 s against 1.5 s plain: 23 s of maintenance over the replay
    plain_s = med(plain) if plain else plain_proxy(cal, sk.template, rows)
    return Evidence(plain_s, med(sketched), n / max(1, batches), float(n), maint, init,
                    inc if inc is not None else cal.fixed_s)
