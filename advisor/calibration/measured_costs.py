"""Costs measured on this engine, from the store's run log: what a query job costs regardless of
how much it reads, what each row adds, and what captures, maintenance and advice have cost.

The cost model (``select.cost``) counts rows.  Counting rows alone treated a scan of 8% of the rows
as 8% of a plain query, but on Spark every job pays a fixed price (planning, task launch, opening
files): at TPC-H SF1 on 2 cores a top-k over 0.5M rows took 0.61-0.85 s against 0.99 s plain.  A
least-squares line ``seconds = fixed + per_row * rows_read`` through the logged runs gives both
parts; the fixed part is expressed in rows (``fixed_rows``) and charged to every extra job a sketch
causes (capture, each maintenance step, the estimation), while only the per-row part is saved.
With too little spread in the logged rows the intercept is not identifiable from the runs alone.
The store's job-cost probe (``advisor.calibration.probe``: the same query shape over a 64-row file) then
supplies it: its (rows, seconds) joins the points, and it is the fixed cost whenever the line still
cannot be fitted.  Without a probe the prior is no fixed cost at all (the paper's rows-proportional
model).  Advice (sampling + estimation, or a sizing's partitions and the rest) is predicted from the
records made warm when there are any (``warm_first``): a process's first one also pays one-time costs.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from advisor.calibration.probe import latest_probe

if TYPE_CHECKING:
    from advisor.warehouse.store import Store

PRIOR_FIXED_S = 0.0        # unidentifiable intercept: none (a small job on local[2] measured 0.18-0.4 s)
PRIOR_ROWS_PER_S = 2e6
MIN_POINTS = 6
PRIOR_STEPS = 2            # pseudo-steps of the other templates behind a template's own (``inc_step_s``)
MIN_SPREAD = 4.0           # max/min rows read among the points before the intercept is trusted


@dataclass
class Calibration:
    fixed_s: float
    per_row_s: float
    source: str
    maint_inc_s: dict = field(default_factory=dict)    # template -> median incremental step seconds
    recapture_s: dict = field(default_factory=dict)    # template -> median capture/recapture seconds
    advice_s: list = field(default_factory=list)       # recent sampling + estimation seconds
    draw_s: list = field(default_factory=list)         # recent sample draws (a sample not yet cached), seconds
    sampled_part_s: list = field(default_factory=list)  # recent seconds per partition a sampled advice built
    estimate_s: list = field(default_factory=list)     # recent sampled advice after its pricing, minus draw and builds
    partition_s: list = field(default_factory=list)    # recent seconds per partition built (sizing without sampling)
    overhead_s: list = field(default_factory=list)     # recent rest of such a sizing after its pricing
    overhead_cold: bool = False                        # overhead_s holds only processes' first (cold) sizings
    query_s: dict = field(default_factory=dict)        # template -> ([plain s], [sketched s]), newest first
    maint_inc_steps: dict = field(default_factory=dict)  # template -> incremental step seconds, newest first
    use_s: dict = field(default_factory=dict)          # template -> [(sketched run, the capture it needed)], newest first
    answered: dict = field(default_factory=dict)       # template -> uses answered by their capture job (run 0 in use_s)
    identified: bool = False                           # the logged runs alone identify the fixed cost
    sketched_extra_s: float = 0.0                      # a sketched run beyond a plain one of its rows (``sketched_extra``)

    def inc_step_s(self, template: str | None) -> float | None:
        """A template's incremental step (seconds): the median of its own steps, with the other
        templates' median step standing in for ``PRIOR_STEPS`` of them.  One slow step (its cause
        not established; the machine was short of memory) otherwise decided every later "maintain
        or not" alone: SF1 supp_line's one 1.12 s step (others 0.1 s) kept its sketch unmaintained for
        its last 11 instances, and no step was taken that could have corrected it."""
        own = list(self.maint_inc_steps.get(template, ()))
        others = [v for t, v in self.maint_inc_s.items() if t != template]
        if others:
            own += [statistics.median(others)] * PRIOR_STEPS
        return statistics.median(own) if own else None

    @property
    def fixed_rows(self) -> float:
        return self.fixed_s / self.per_row_s

    def rows(self, seconds: float) -> float:
        """Seconds of work as rows of scanning (the cost model's unit)."""
        return seconds / self.per_row_s

    def advice_rows(self) -> float | None:
        return self.rows(statistics.median(self.advice_s)) if self.advice_s else None

    def sampled_rows(self, cached: bool, missing: int, table_rows: float, columns: int = 1) -> float | None:
        """Sampling + estimation of one recommendation in the cache state it will have, in rows: the
        draw only when its sample is not stored yet (``sample_store.sample_cached``), each partition
        still to build, and the measured rest after the price was weighed (what came before, the
        candidates and their statistics, is sunk by then: ``planning`` in the record); None before
        any sampled advice was measured.
        Charging the median of whole recommendations priced a second template on a table with the
        first one's draw and partition builds (flights: 2.3-4.7 scans of estimation against at most
        3 saved, every later template declined before sampling)."""
        if not self.estimate_s:
            return None
        draw = 0.0 if cached else self.rows(statistics.median(self.draw_s)) if self.draw_s else None
        if draw is None:  # never drawn here (samples came with the store): whole advice as measured
            whole = self.advice_rows()
            return max(whole, self.rows(statistics.median(self.estimate_s))) if whole is not None else None
        part = (self.rows(statistics.median(self.sampled_part_s)) if self.sampled_part_s
                else partition_prior_rows(table_rows, columns))
        return draw + missing * part + self.rows(statistics.median(self.estimate_s))

    def sizing_rows(self, missing: int, table_rows: float, columns: int = 1, warm: bool = False) -> float:
        """Advice without sampling (method exact, the OPT oracle), in rows, besides the capture job:
        the partitions still to build at their measured cost plus the measured rest.  Predicting it
        from whole recommendations charged every template the first, cold one (13.7 s
        predicted where a warm sizing took one capture).  Until a build is measured, one costs a
        ``columns``-th of a scan (the plain run reads that many columns of the table; a build reads
        one): priced at a whole scan each, two builds declined SF1's first two-attribute templates
        before any was measured, where builds then took 0.3-1.1 s against 2.5-4 s scans.  A ``warm``
        process (it has advised before) charges a rest measured only cold as one job's fixed cost: the
        cold rest is the process's one-time costs (in an SF1 replay 13 s of a first view registration,
        charged as 22 scans, declined the next template's first instances before sizing)."""
        part = (self.rows(statistics.median(self.partition_s)) if self.partition_s
                else partition_prior_rows(table_rows, columns))
        rest = self.rows(statistics.median(self.overhead_s)) if self.overhead_s else 0.0
        if warm and self.overhead_cold:
            rest = min(rest, self.fixed_rows)
        return missing * part + rest


def partition_prior_rows(table_rows: float, columns: int = 1) -> float:
    """An unmeasured partition build, in rows: it reads one of the ``columns`` a plain run reads."""
    return float(table_rows) / max(1, columns)


def fit_line(points: list[tuple[float, float]], prior_fixed: float = PRIOR_FIXED_S,
             prior_rate: float = PRIOR_ROWS_PER_S) -> tuple[float, float, str]:
    """(fixed seconds, seconds per row, how) from (rows read, seconds) points.

    Least squares when the points spread enough in rows; otherwise the prior fixed cost and the
    median per-row cost of what is left after it, over the runs within ``MIN_SPREAD`` of the
    largest.  Both parts stay positive."""
    pts = [(float(r), float(s)) for r, s in points if r and r > 0 and s and s > 0]
    if not pts:
        return prior_fixed, 1.0 / prior_rate, "prior"
    rows = [r for r, _ in pts]
    if len(pts) >= MIN_POINTS and max(rows) >= MIN_SPREAD * min(rows):
        mr, ms = statistics.fmean(rows), statistics.fmean(s for _, s in pts)
        var = sum((r - mr) ** 2 for r in rows)
        b = sum((r - mr) * (s - ms) for r, s in pts) / var
        a = ms - b * mr
        cheapest = min(s for _, s in pts)
        if b > 0 and 0 <= a <= cheapest:
            return a, b, f"fit over {len(pts)} run(s)"
        if b > 0 and a > cheapest:
            # a few slow small runs (e.g. sketched scans paying for a long filter) flattened the
            # line: no job's fixed cost exceeds the cheapest job; per-row cost from the largest runs
            # (over all runs, a store of mostly small sketched runs put 4.3 s per M rows on tables
            # whose scans took 0.3-0.8 s per M, and priced a 0.2 s scan of flights at 1.5 s)
            big = [(r, s) for r, s in pts if r * MIN_SPREAD >= max(rows)]
            b = statistics.median(max(s - cheapest, 0.1 * s) / r for r, s in big)
            return cheapest, b, (f"fit over {len(pts)} run(s), fixed cost capped at the cheapest run, "
                                 f"per-row cost from the {len(big)} largest")
    # per-row cost from the largest runs only: in a run of a few thousand rows the job's fixed cost
    # is nearly all of its time, and dividing it by the rows priced a scan 5-10x too high (the
    # demo's first steps: sketched runs of 29k-88k rows at 0.13-0.3 s put 4.3 s per M rows on a
    # table whose plain scans took 0.4-0.5 s per M)
    big = [(r, s) for r, s in pts if r * MIN_SPREAD >= max(rows)]
    b = statistics.median(max(s - prior_fixed, 0.1 * s) / r for r, s in big)
    src = f"the {len(big)} largest of {len(pts)} run(s)" if len(big) < len(pts) else f"{len(pts)} run(s)"
    if prior_fixed == 0.0:
        return 0.0, b, f"no fixed cost (not identifiable), per-row cost from {src}"
    return prior_fixed, b, f"prior fixed cost, per-row cost from {src}"


def sketched_extra(sketched: list[tuple[float, float]], fixed_s: float, per_row_s: float) -> float:
    """What a sketched run costs beyond a plain run reading as many rows (seconds): the median of
    the sketched runs' residuals over the line, 0 with fewer than ``MIN_POINTS`` of them.  The
    sketch filter's planning and compilation, the lookup and the deleted-row filter are paid by
    every use; on a small table they are all it saves (TPC-H SF1 and flights in one store: 0.07 s
    a sketched run against 0.16-0.26 s for a whole plain scan of flights).

    >>> sketched_extra([(10_000, 0.2), (20_000, 0.21), (5_000, 0.19)] * 2, 0.1, 1e-6)
    0.09
    >>> sketched_extra([(10_000, 0.05)] * 6, 0.1, 1e-6), sketched_extra([(10_000, 0.2)], 0.1, 1e-6)
    (0.0, 0.0)
    """
    if len(sketched) < MIN_POINTS:
        return 0.0
    return round(max(0.0, statistics.median(s - fixed_s - per_row_s * r for r, s in sketched)), 6)


def calibrate(store: Store, limit: int = 400) -> Calibration:
    """The calibration from the latest ``limit`` logged runs, maintenance steps and recommendations."""
    pts, maint, recap, advice, queries, uses, parts, rest, answered = [], {}, {}, [], {}, {}, [], [], {}
    sketched_pts = []
    draws, sampled_parts, estimates = [], [], []
    for r in store.query("SELECT kind, record_json FROM runs WHERE kind IN ('run','maintain','recommend') "
                         "ORDER BY id DESC LIMIT ?", (limit,)):
        try:
            rec = json.loads(r["record_json"])
        except ValueError:
            continue
        if r["kind"] == "run" and rec.get("answered") and rec.get("sketch"):
            # a go whose capture job answered the query: a use that cost the capture and no run
            if rec.get("template") is not None:
                uses.setdefault(rec["template"], []).append((0.0, float(rec.get("capture_seconds") or 0.0)))
                answered[rec["template"]] = answered.get(rec["template"], 0) + 1
        elif r["kind"] == "run":
            rows, secs = (rec.get("metrics") or {}).get("rows_read"), rec.get("seconds")
            if rows and secs:
                pts.append((rows, secs))
                if rec.get("sketch"):
                    sketched_pts.append((rows, secs))
            if secs is not None and rec.get("template") is not None:
                queries.setdefault(rec["template"], ([], []))[1 if rec.get("sketch") else 0].append(secs)
                if rec.get("sketch"):
                    uses.setdefault(rec["template"], []).append((secs, float(rec.get("capture_seconds") or 0.0)))
        elif r["kind"] == "maintain":
            tpl, secs = rec.get("template"), rec.get("seconds")
            if secs is None:
                continue
            (maint if rec.get("how") == "incremental" else recap).setdefault(tpl, []).append(secs)
        else:
            s = rec.get("seconds") or {}
            cap = rec.get("captured") or {}
            # the capture of a sizing without sampling is its exact job (counted once)
            spent = s.get("total", 0.0) - s.get("oracle", 0.0) - s.get("exact", cap.get("seconds") or 0.0)
            cold = bool(rec.get("cold"))
            if "sampling" in s and spent > 0:
                advice.append((spent, cold))
                drew = not (rec.get("sample") or {}).get("cached", False)
                if drew:
                    draws.append((s["sampling"], cold))
                built = rec.get("partitions_built")
                if built and s.get("partitions"):
                    sampled_parts.append((s["partitions"] / built, cold))
                rest_s = (spent - s.get("planning", 0.0) - (s["sampling"] if drew else 0.0)
                          - (s.get("partitions", 0.0) if built else 0.0))
                estimates.append((max(0.0, rest_s), cold))
            elif "partitions" in s and ("exact" in s or "oracle" in s):
                if rec.get("partitions_built"):
                    parts.append((s["partitions"] / rec["partitions_built"], cold))
                # what it spent before its price was weighed (``planning``) is sunk when the next is priced
                rest.append((max(0.0, spent - s["partitions"] - s.get("planning", 0.0)), cold))
            if cap.get("seconds") and rec.get("template"):
                recap.setdefault(rec["template"], []).append(cap["seconds"])
    runs_only = fit_line(pts)
    identified = runs_only[2].startswith("fit")

    probe = latest_probe(store)
    if probe is not None and not pts:  # nothing logged yet: the probe's fixed cost, the prior row rate
        a, b = float(probe["seconds"]), 1.0 / PRIOR_ROWS_PER_S
        how = f"fixed cost from the job-cost probe ({a:.3f} s), prior per-row cost"
    elif probe is not None:
        pts.append((float(probe["rows_read"]), float(probe["seconds"])))
        a, b, how = fit_line(pts, prior_fixed=float(probe["seconds"]))
        how += f" (with the job-cost probe: {float(probe['seconds']):.3f} s)"
    else:
        a, b, how = runs_only
    med = lambda d: {k: statistics.median(v) for k, v in d.items() if v}  # noqa: E731
    return Calibration(a, b, how, med(maint), med(recap), advice_s=warm_first(advice), draw_s=warm_first(draws),
                       sampled_part_s=warm_first(sampled_parts), estimate_s=warm_first(estimates), query_s=queries,
                       use_s=uses, partition_s=warm_first(parts), overhead_s=warm_first(rest),
                       overhead_cold=bool(rest) and all(cold for _, cold in rest), answered=answered,
                       identified=identified, maint_inc_steps={k: v for k, v in maint.items() if v},
                       sketched_extra_s=sketched_extra(sketched_pts, a, b))


def warm_first(timed: list, keep: int = 20) -> list:
    """The newest ``keep`` seconds of advice recorded warm, or of all when none was: a process's
    first sampling or sizing also pays its imports and first compilations, once
    (``recommend._note_warmth``), so it overstates what the next advice will cost."""
    warm = [t for t, cold in timed if not cold]
    return (warm or [t for t, _ in timed])[:keep]


def rows_for(cal: Calibration, per_template: dict, template: str | None) -> float | None:
    """A template's measured seconds as rows, or None (other templates may read other tables:
    their captures say little about this one's)."""
    return cal.rows(per_template[template]) if template in per_template else None


def predicted_seconds(cal: Calibration, rows: float) -> float:
    """A plain run reading ``rows`` rows, by the fitted line."""
    return cal.fixed_s + cal.per_row_s * rows


def plain_proxy(cal: Calibration, template: str, rows: float) -> float:
    """A plain run of a template never run plain in this store: its captures' median (a capture by
    value reads what a plain run reads and costs about one), else the fitted line.  The line comes
    last: fitted on mostly sketched runs, where the fixed costs dominate, it put a 1.7 s SF1 scan at
    6.1 s and a 1.5 s one at 9.0 s."""
    return cal.recapture_s.get(template) or predicted_seconds(cal, rows)
