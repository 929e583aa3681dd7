"""The cheapest "no sketch can pay" verdict, tried before the candidates are enumerated and proven
safe (``recommend`` runs it first for a query run anyway; ``advice_steps.check_can_pay`` is the
full check once the plan is known)."""

from __future__ import annotations

from advisor.calibration import warmth
from advisor.selection.advice_steps import Advice, advice_sample_cached
from advisor.selection.cost_model import cannot_pay
from advisor.selection.decision_memory import pays_after


def precheck_can_pay(a: Advice) -> bool:
    """``cannot_pay`` at the cheapest advice any plan could cost (no partition to build; sized by
    the capture job, or from the sample as it is cached now), tried before the candidates are
    enumerated and proven safe (one Z3 proof per column: 0.5 s for flights' 19 columns) when the
    query is run anyway (``answer``): a template no sketch can repay is declined without them.
    Advice only grows with the partitions a plan builds, so a template declined here is declined
    by ``check_can_pay`` too.  True when it declined."""
    w, p, T = a.workload, a.params, a.table_rows
    if a.answer is None or a.strategy in ("NO-PS", "OPT") or a.fragments:
        return False
    cols = len(a.shape.read_columns())
    sampled = (0.0 if not p.charge_advice
               else w.sampled_advice_rows(T, p.advice_prior_scans, cached=advice_sample_cached(a), missing=0, columns=cols)
               if p.measured else (w.advice_rows or 0.0))
    floor = min(w.sizing_rows(0, T, cols, warmth.advised()), sampled)
    hopeless = cannot_pay(T, w, p, floor)
    if not hopeless:
        return False
    a.hopeless = hopeless
    a.rec.update(cannot_pay=True, pays_after=pays_after(T, w, p, floor), reason=hopeless, advice_priced_rows=floor)
    return True
