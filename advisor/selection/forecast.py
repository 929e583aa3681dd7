"""The workload a decision is made for: predicted reuses, update rate and measured costs.

Read from the store's run log and the table's versions (``advisor.calibration.measured_costs`` for the seconds), so
the pure cost model in ``advisor.selection.cost_model`` can price a sketch without touching the store itself.
"""

from __future__ import annotations

import json
import statistics
from typing import TYPE_CHECKING

import sqlglot

from advisor.calibration.measured_costs import calibrate, rows_for
from advisor.maintain.policy.policies import make_policy
from advisor.maintain.policy.triggers import policy_spec
from advisor.maintain.spark.bulk_init import supports
from advisor.maintain.spark.state_rental import predict_init, too_big
from advisor.plan.parse import templatize
from advisor.selection.cost_model import CostParams, UseForecast

if TYPE_CHECKING:
    from advisor.warehouse.store import Store


def _inc_rows(cal, template: str) -> float | None:
    """The template's incremental step in rows (``Calibration.inc_step_s``: its own steps, the other
    templates' median standing in while it has few)."""
    s = cal.inc_step_s(template)
    return None if s is None else cal.rows(s)


def predict_workload(store: Store, query, table: str, p: CostParams, upto: int | None = None,
                     table_rows: float | None = None) -> UseForecast:
    """Reuses, update rate and measured costs (``advisor.calibration.measured_costs``) from the store's run log and
    the table's versions.  Updates per use count the table's batches per logged instance of this
    template (a template run once per batch meets one batch per use, however busy the table)."""


    rows = store.query("SELECT sql, record_json FROM runs WHERE kind='run' ORDER BY id DESC LIMIT 1000")
    same = on_table = 0
    for r in rows:
        sql = r["sql"] or ""
        if table not in sql.lower():
            continue
        on_table += 1
        try:
            tpl = json.loads(r["record_json"]).get("template")
        except ValueError:
            tpl = None
        if tpl is None:
            try:
                tpl = templatize(sqlglot.parse_one(sql, read="spark"))[0]
            except Exception:  # a logged statement our parser cannot read: not this template
                tpl = None
        same += tpl == query.template
    batches = store.query("SELECT n_ins, n_del FROM versions WHERE table_name=? AND kind='batch' AND version<=?",
                          (table, 1 << 62 if upto is None else upto))
    ups = len(batches) / max(1, same or on_table) if batches else 0.0
    steps = make_policy(policy_spec(store)).steps_per_use(ups)
    delta = statistics.mean(b["n_ins"] + b["n_del"] for b in batches) if batches else 0.0
    reason = (f"template seen {same} time(s) in the last {len(rows)} logged run(s): predicted "
              f"{p.prior_reuses:g} (prior) + {same} reuse(s); {len(batches)} update batch(es) over "
              f"{same or on_table} run(s), {steps:.2f} maintenance step(s) per use (policy {policy_spec(store)})")
    if not p.measured:
        rate = 1.0 / calibrate(store).per_row_s
        return UseForecast(p.prior_reuses + same, ups, delta, rate, reason + " (measured costs off)", steps_per_use=steps)
    cal = calibrate(store)
    init = None if table_rows is None else cal.rows(
        predict_init(store, query.root, table_rows, supports(query.root), query.template))
    reason += (f"; job cost {cal.fixed_s:.2f} s + {cal.per_row_s * 1e6:.3f} s per M rows ({cal.source})"
               f"{f', a sketched run {cal.sketched_extra_s:.2f} s more' if cal.sketched_extra_s else ''}")
    return UseForecast(p.prior_reuses + same, ups, delta, 1.0 / cal.per_row_s, reason, steps_per_use=steps,
                    fixed_rows=cal.fixed_rows, state_buyable=not too_big(store, query.root, query.template),
                    capture_rows=rows_for(cal, cal.recapture_s, query.template),
                    inc_rows=_inc_rows(cal, query.template), init_rows=init,
                    advice_rows=cal.advice_rows(), calibration=cal, extra_rows=cal.rows(cal.sketched_extra_s))
