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
not repay capture, maintenance and the estimation at the costs measured in this store; for a query
run anyway it is tried first at the cheapest estimation any plan could cost, before the candidates
are enumerated (``precheck.precheck_can_pay``: then ``candidates`` is empty).  When the
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
          "ci_exact": bool | null,            # the interval is a point because the size is exact by construction
          "unseen_groups": float | null,      # passing groups the sample is expected to miss (counted in size and CI)
          "real_selectivity": float | null,   # OPT only (captured)
          "read_fraction": float | null,      # expected share of rows scans still read (layout-aware)
          "real_read_fraction": float | null, # OPT only: the captured sketch's share of rows read
          "read_units": str | null,           # what the scan prunes: "layout <id> (<n> files)" / "row groups (<n>)"
          "layout_note": str | null,          # why the files cannot skip on it (dropped, or priced with a layout)
          "layout": {"table", "attr", "build_rows", "share_rows", "build_scans", "source", "other_uses",
                     "built"} | null,         # the clustered layout a sketch on it would need, priced
          "capture_s": float | null, "saving_s": float | null, "net_s": float | null,
          "go": bool | null, "picked": bool,
          "by_granularity": [{"fragments": int, "n_fragments": int, "selectivity": float,
                              "ci": [lo, hi], "net_scans": float}]}],
      "decision": {"table": str | null, "attr": str | null, "attrs": [a, b] | null,
                   "fragments": int | null, "fragments_target": int | null,
                   "go": bool, "reason": str,
                   "figures": {capture/saving/overhead/net in rows and seconds} | null},
      "layout": {"table": str, "attr": str, "built": bool, "id": int, "seconds": float,
                 "build_rows": float, "share_rows": float, ...} | null,  # the layout the pick needed, built
      "captured": {"sketch_id": int, "selectivity": float, "seconds": float,
                   "sketch_ids": [int, int]} | null,  # sketch_ids: a pair's two sketches (leading first)
      "seconds": {"planning": s, "sampling": s, "partitions": s, "sample_query": s, "groups": s, "sizes": s,
                  "exact": s, "oracle": s, "oracle_partitions": s, "total": s}
    }
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from advisor.calibration import warmth
from advisor.errors import BadInput
from advisor.partition.range_partition import MAX_FRAGMENTS
from advisor.selection.advice_steps import (
    Advice,
    analyze_query,
    bridged,  # noqa: F401 - re-exported
    check_can_pay,
    decide,
    parse_query,
    plan_candidates,
    predict_reuse,
    price_layouts,
    read_versions,
    record_candidates,
    save_pick,
    size_candidates,
)
from advisor.selection.cost_model import CostParams
from advisor.selection.precheck import precheck_can_pay
from advisor.selection.strategies import STRATEGIES

if TYPE_CHECKING:
    from advisor.context import Context

METHODS = ("bootstrap", "clt", "exact")


def _note_warmth(rec: dict) -> None:
    """Mark the record ``cold`` when it is the process's first to sample or size (``calibrate``
    predicts advice from warm records when it has them: in an SF1 replay the first
    sizing's rest took 2.9 s and the next 0.5 s, and their median declined three templates)."""
    warmth.note(rec)


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
            "exact": False, "sample": None, "estimation_notes": [], "workload": None, "candidates": [], "captured": None, "layout": None, "seconds": {},
            "decision": {"attr": None, "fragments": None, "go": False, "reason": "", "figures": None}}


def recommend(ctx: Context, sql: str, strategy: str = "CB-OPT-GB", sample_rate: float = 0.05, capture: bool = False,
              fragments: int | None = None, method: str = "bootstrap", seed: int = 0, progress=None,
              params: CostParams | None = None, pairs: bool = True, answer: list | None = None) -> dict:
    """Compute the recommendation record (see the module docstring); no printing.  ``pairs``: offer
    two-attribute candidates when the best single one is weak (``advisor.selection.attribute_pairs``).  With an
    ``answer`` list, a job that reads the whole query (an exact sizing by value, or a capture)
    also answers the query: its ``execute.RunResult`` is appended, and the caller need not
    run the query again (nothing is appended when no such job ran)."""

    t_all = time.perf_counter()
    strategy = validate(strategy, sample_rate, fragments, method)
    method = method.lower()
    rec = _base(sql, strategy, float(sample_rate), method)
    a = Advice(ctx, sql, strategy, float(sample_rate), fragments, method, seed, progress,
               params or CostParams(), pairs, answer, rec)
    if not (parse_query(a) and analyze_query(a)):
        return rec
    read_versions(a)
    predict_reuse(a)
    declined = precheck_can_pay(a)  # bounds that decide without candidates first
    if not declined:
        plan_candidates(a)
        price_layouts(a)
    # what the advice spent before its price is weighed (parsing, candidates, their statistics, the
    # forecast) is sunk by then: ``Calibration.sampled_rows`` charges later advice only the rest
    rec["seconds"]["planning"] = round(time.perf_counter() - t_all, 3)
    if not declined:
        check_can_pay(a)
        size_candidates(a)
    decide(a)
    record_candidates(a)
    if capture:
        save_pick(a)
    _log_advice(a, t_all)
    return rec


def _log_advice(a: Advice, t_all: float) -> None:
    """Total time, the process's warmth, and the record logged in the store's ``runs``."""
    a.rec["seconds"]["total"] = round(time.perf_counter() - t_all, 3)
    _note_warmth(a.rec)
    a.ctx.store.log_run("recommend", a.sql, a.rec)


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
            if c.get("ci_exact"):
                sel += " exact"  # a point interval: exact by construction, not a sampling accident
            if c["real_selectivity"] is not None:
                sel += f" real {c['real_selectivity']:.1%}"
            if c["read_fraction"] is not None:
                sel += f", reads ~{c['read_fraction']:.0%}"
            if c.get("layout"):
                sel += f" on a new layout (~{c['layout']['build_scans']:g} scans to build)"
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
    if rec.get("layout") and rec["layout"].get("built"):
        lay = rec["layout"]
        console.print(f"built layout {lay['id']}: {lay['table']} clustered on {lay['attr']} in {lay['seconds']:.1f}s")
    if rec["captured"]:
        c = rec["captured"]
        console.print(f"captured sketch {c['sketch_id']}: real selectivity {c['selectivity']:.1%} in {c['seconds']:.2f}s")


def what_if_params(uses: float | None = None) -> CostParams:
    """The cost model of an explicit recommendation: the estimate is what the user asked for, so
    its cost is not weighed; ``uses`` replaces the prior of predicted uses."""
    if uses is not None and not uses > 0:
        raise BadInput(f"--uses must be positive, got {uses}")
    return CostParams(charge_advice=False, **({"prior_reuses": float(uses)} if uses is not None else {}))


def recommend_command(ctx: Context, console, sql: str, strategy: str = "CB-OPT-GB", sample_rate: float = 0.05,
                      as_json: bool = False, capture: bool = False, fragments: int | None = None,
                      method: str = "bootstrap", uses: float | None = None) -> dict:
    """CLI entry: progress bar on stderr while sampling/estimating, then the table (unless as_json)."""
    validate(strategy, sample_rate, fragments, method)
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("planning", total=None)

        def progress(msg: str) -> None:
            bar.update(task, description=msg, advance=1)

        rec = recommend(ctx, sql, strategy, sample_rate, capture, fragments, method, progress=progress,
                        params=what_if_params(uses))
    if not as_json:
        render(console, rec)
    return rec
