"""One strategy's execution of one workload step, through the advise path (``advisor.serve``): a
query, or an update batch (move the table's pin forward, maintain per the policy).  Produces the
records of ``reports/schema.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.recursive.advise import maintenance_records
from advisor.serve.query_path import serve_query, serve_update
from advisor.serve.settings import AdviseSettings

if TYPE_CHECKING:
    from advisor.context import Context


def settings_for(wl, strategy: str, step: int | None = None, measure: bool | None = None) -> AdviseSettings:
    """The workload's estimator knobs for ``strategy``; each step draws its own seed."""
    return AdviseSettings(strategy=strategy, sample_rate=wl.sample_rate, fragments=wl.fragments, method=wl.method,
                          seed=wl.seed * 1_000_003 + (step or 0), measured_costs=wl.measured_costs,
                          measure_recapture=wl.measure_recapture if measure is None else measure)


def run_update(ctx: Context, strategy: str, step: dict, measure: bool) -> list[dict]:
    """Make the batch's version current for this strategy; maintain eagerly if the policy says so."""
    ctx.catalog.pin(step["table"], step["version"])
    s = AdviseSettings(strategy=strategy, measure_recapture=measure)
    return serve_update(ctx, step["table"], step["inserts"] + step["deletes"], s, step=step["step"])


def run_query_step(ctx: Context, strategy: str, step: dict, wl) -> tuple[dict, list[dict]]:
    """Execute one query step for ``strategy``; returns (query record, maintenance records).  The
    record names the workload's template rather than the query's parameterised text."""
    served = serve_query(ctx, step["sql"], settings_for(wl, strategy, step["step"]), step=step["step"],
                         bindings=step.get("bindings", {}))
    served.record["template"] = step["template"]
    recursive = maintenance_records(ctx.catalog, step["sql"], strategy, step["step"], wl.measure_recapture)
    return served.record, served.maintenance + recursive
