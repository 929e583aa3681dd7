"""Sizing without sampling: when one capture job can size every planned candidate exactly, and
when that job costs less than drawing a sample and estimating.

Method exact always sizes so.  Under the estimators (bootstrap, the default) a query that is run
anyway is sized by the capture job that answers it when sampling and estimation (as measured in
this store, else at their prior) cost more than what that job reads beyond a plain run: a sample
of many small groups costs several scans to draw and estimate (TPC-H SF1 by l_orderkey: 4 s to
draw, 9 s to estimate, against a 2.5 s plain run and a 2.7 s capture), and the sizes it gives are
exact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.estimation.size_estimates import split_key
from advisor.selection.cost_model import CostParams, UseForecast, capture_rows
from advisor.sketch.capture import by_value_types_ok
from advisor.sketch.lookup import sketch_rows
from advisor.warehouse.sketch_records import save_sketch

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog


def exact_extra_jobs(cat: Catalog, q, table: str, plan: dict, deciding: set) -> int | None:
    """Exact sizing applies when one capture job can read planned candidates by value and every
    other planned candidate decides the groups (a join key through a dimension key), so that one
    more capture job by fragment id sizes them all (``exact_sizes``): the number of jobs besides the
    by-value one (0 or 1); None when the estimator must size some candidate (sample instead)."""
    by_value = {k: by_value_types_ok(q, {t: a}, {t: cat.column_type(t, a)})
                for k in plan for t, a in [split_key(k, table)]}
    if not any(by_value.values()) or any(not v and k not in deciding for k, v in by_value.items()):
        return None
    return 0 if all(by_value.values()) else 1


def cheaper_than_sampling(w: UseForecast, p: CostParams, T: float, extra: int, missing: int, columns: int,
                          warm: bool) -> str | None:
    """The sentence saying why the capture job sizes a query that is run anyway (``extra`` more
    jobs, ``missing`` partitions to build, ``columns`` read), or None to sample where sampling is
    cheaper: as measured in this store, else at the prior of a draw's passes over the table
    (``UseForecast.sampled_advice_rows``).  Sampling the first template before any was measured
    cost the demo 10.4 s (a 2.2 s draw, 7.9 s of estimation) where its capture job read ~0.3 scans
    beyond the plain run.

    >>> class Cal:
    ...     def sampled_rows(self, cached, missing, rows, columns): return 5.5 * rows
    ...     def sizing_rows(self, missing, rows, columns, warm): return 0.2 * rows
    >>> w = UseForecast(reuses=4, updates_per_use=0, delta_rows=0, scan_rate=1e6, fixed_rows=0,
    ...                 capture_rows=1.1e6, calibration=Cal())
    >>> cheaper_than_sampling(w, CostParams(), 1e6, 0, 1, 2, True)
    'sized exactly by its capture job: ~0.30 scans beyond the plain run against ~5.50 scans to sample and estimate'
    """
    if not (p.measured and p.charge_advice) or not T:
        return None
    sampled = w.sampled_advice_rows(T, p.advice_prior_scans, cached=False, missing=missing, columns=columns)
    exact = w.sizing_rows(missing, T, columns, warm) + extra * T + max(capture_rows(T, w, p) - w.reads * T, 0.0)
    if exact >= sampled:
        return None
    return (f"sized exactly by its capture job: ~{exact / T:.2f} scans beyond the plain run against "
            f"~{sampled / T:.2f} scans to sample and estimate")


def save_exact(cat: Catalog, table: str, versions: dict, sk, secs: float) -> dict:
    """Store the picked sketch of an exact sizing (captured in that job; the pool is safety-checked)."""
    sk = save_sketch(cat.store, sk)
    sel = sketch_rows(cat, sk) / max(1, cat.version(table, versions[table]).rows)
    return {"sketch_id": sk.id, "selectivity": sel, "seconds": round(secs, 3)}
