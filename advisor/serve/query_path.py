"""Serve one query: reuse a stored sketch (catching a stale one up per the maintenance policy),
otherwise decide by cost whether to sketch (``advisor.serve.decide``) or to build the layout a
stored sketch needs (``advisor.serve.layout_repair``), then run and fill the decision record.

>>> from advisor.serve.settings import AdviseSettings
>>> AdviseSettings(strategy="NO-PS").plain
True
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from advisor.engine.execute import RunResult, run_plain_sql, versions_now
from advisor.errors import BadInput, Unsupported, spark_rejected
from advisor.maintain.policy.triggers import after_apply, before_use
from advisor.plan.parse import parse_sql
from advisor.plan.read_columns import read_columns
from advisor.recursive.advise import serve_recursive
from advisor.recursive.shape import looks_recursive
from advisor.selection.attribute_pairs import catch_up, combine
from advisor.selection.decision_memory import all_memos, restore_memos, revisit
from advisor.serve.copy_revisit import revisit_timed
from advisor.serve.decide import decide
from advisor.serve.decision_record import finish_record, new_record
from advisor.serve.layout_repair import layout_bound, repair
from advisor.serve.maintenance_record import maint_record
from advisor.serve.settings import AdviseSettings
from advisor.sketch.lookup import read_fraction, sketch_rows, usable_sketches
from advisor.sketch.run import run_query

if TYPE_CHECKING:
    from advisor.context import Context
    from advisor.warehouse.catalog import Catalog

DEFAULT = AdviseSettings()


@dataclass
class Served:
    """A served query: its result (rows, scan metrics), the decision record and the maintenance
    events it triggered."""

    result: RunResult
    record: dict
    maintenance: list

    @property
    def rows(self) -> list:
        return self.result.rows

    @property
    def columns(self) -> list:
        return self.result.columns


@dataclass
class Decided:
    """A query after the advise path decided how to answer it, before the run: the parsed query
    (None: unsupported, answered plainly already in ``answers``), the sketch to use, a job that
    already answered it, and the record with the seconds spent so far."""

    sql: str
    q: object
    rec: dict
    secs: dict
    versions: dict | None
    pinned: bool
    sketch: object = None
    answers: list = field(default_factory=list)
    maint: list = field(default_factory=list)
    lookup_s: float = 0.0
    measuring: float = 0.0
    t_start: float = 0.0


def serve_query(ctx: Context, sql: str, s: AdviseSettings = DEFAULT, step=None, bindings=None,
                versions: dict | None = None) -> Served:
    """Answer ``sql`` the advise path's way (module docstring).  ``versions`` pins tables to older
    versions (``--as-of``): then stored sketches are only looked up, never maintained or captured.
    ``step`` labels the record (a replay step, or a statement's position in a file).  A query Spark
    fails (bad input at run time: a cast of malformed text, a division by zero) leaves the stored
    decisions as they were."""
    memos = all_memos(ctx.store)
    try:
        return run_decided(ctx, decide_query(ctx, sql, s, step, bindings, versions), step)
    except BadInput:
        if all_memos(ctx.store) != memos:
            restore_memos(ctx.store, memos)
        raise


def decide_query(ctx: Context, sql: str, s: AdviseSettings = DEFAULT, step=None, bindings=None,
                 versions: dict | None = None) -> Decided:
    """Everything before the run: reuse, catch up, or decide and capture (``serve_query``)."""
    cat = ctx.catalog
    secs = {k: 0.0 for k in ("sampling", "estimation", "capture", "maintenance", "query", "other", "oracle")}
    rec = new_record(sql, s.strategy, step, bindings=bindings)
    dd = Decided(sql, None, rec, secs, versions, versions is not None, t_start=time.perf_counter())
    where = str(step) if step is not None else "run"
    if looks_recursive(sql):  # recursive queries have their own planner, sketches and maintenance
        res, rec["template"], decision = serve_recursive(cat, sql, use=s.use and s.strategy != "NO-PS")
        rec["decision"].update(decision)
        if res.sketch is not None:
            rec["sketch_id"] = f"recursive:{res.sketch['partition']}"
            rec["selectivity"]["real"] = res.sketch["selectivity"]
        dd.answers.append(res)
        return dd
    try:
        q = dd.q = parse_sql(sql, ctx.schema_lookup())
    except Unsupported as e:
        dd.answers.append(run_plain_sql(cat, sql, str(e)))
        rec["decision"].update(action="unsupported", reason=f"ran without a sketch: {e}")
        return dd
    rec["template"] = q.template
    plain_rows = _plain_rows(cat, q, versions)
    rec["table_rows"] = int(plain_rows)
    pinned, d = dd.pinned, rec["decision"]
    if s.strategy == "NO-PS":
        d["reason"] = "NO-PS never uses sketches"
    elif not s.use:
        d["reason"] = "plain run asked for (--no-use)"
    elif not pinned and s.measured_costs and (lost := revisit(cat.store, q.template, s.strategy,
                                                              plain_rows, where)):
        d.update(action="no-go", reason=lost)
    else:
        declined: list[str] = []
        if not pinned:
            t0 = time.perf_counter()
            done = before_use(cat, q, declined if s.measured_costs else None, answer=True,
                              measured=s.measured_costs)
            done += catch_up(cat, q, s.measured_costs)
            secs["maintenance"] = time.perf_counter() - t0
            dd.answers += [r.answer for r in done if r.answer is not None][:1]
            t0 = time.perf_counter()
            dd.maint = [maint_record(cat, s.strategy, step, "query", r, s.measure_recapture) for r in done]
            dd.measuring += time.perf_counter() - t0
        t0 = time.perf_counter()
        versions = dd.versions = versions if pinned else versions_now(cat, q)
        good, bad = usable_sketches(cat, q, versions)
        dd.lookup_s = time.perf_counter() - t0  # finding the sketch is part of using it (the query phase)
        if dd.maint:
            caught = "; ".join(f"caught sketch {m['sketch_id']} up to the current data as sketch {m['new_sketch_id']} "
                               f"({m['how']}, {m['seconds']:.2f} s)" for m in dd.maint)
        if declined and not good:
            d.update(action="no-go", reason=declined[0])
        elif good:
            dd.sketch = combine(cat, q, versions, good)
            copy = None if pinned else revisit_timed(ctx, s, q, versions, dd.sketch, secs)
            # the share of the sketched tables' rows the scan is predicted to read, beside what it reads
            rec["predicted_read"] = round(read_fraction(cat, dd.sketch, versions, read_columns(q)), 6)
            d.update(action="reuse", attr=_attr(dd.sketch), reason=f"reused sketch {dd.sketch.id}" + _pair(dd.sketch) + (
                "" if tuple(dd.sketch.bindings) == tuple(q.bindings)
                else " (reuse proven by Z3 for these bindings)") + (f"; {caught}" if dd.maint else "")
                + (f"; {copy['reason']}" if copy else ""), **({"layout": copy} if copy else {}))
        elif not pinned and (spread := layout_bound(bad)):
            t0 = time.perf_counter()
            lay, why = repair(ctx, s, q, versions, spread[0])
            secs["capture"] += time.perf_counter() - t0
            good = usable_sketches(cat, q, versions)[0] if lay else []
            if good:
                dd.sketch = good[0]
                rec["predicted_read"] = round(read_fraction(cat, dd.sketch, versions, read_columns(q)), 6)
                d.update(action="reuse", attr=_attr(dd.sketch), layout=lay,
                         reason=f"reused sketch {dd.sketch.id}; {why}")
            else:
                d.update(action="no-go", layout=lay, reason=why)
        elif pinned or not s.advise:
            why = "; ".join(f"sketch {b.id}: {w}" for b, w in bad[:3]) or "no stored sketch of this template"
            d["reason"] = (f"stored sketches only ({'tables pinned to older versions' if pinned else '--no-advise'})"
                           f": {why}")
        else:
            dd.sketch = decide(ctx, s, where, q, versions, rec, secs, dd.answers)
            if dd.sketch is not None and not dd.answers:  # captured or derived now, then run with it
                rec["predicted_read"] = round(read_fraction(cat, dd.sketch, versions, read_columns(q)), 6)
    if not pinned:
        dd.versions = versions_now(cat, q)
    return dd


def use_capture(decision: dict, capture_s: float) -> tuple[float, float]:
    """(the capture a use paid, the copy or layout build inside it): a build is an investment the
    cost model already shared over the predicted uses, so the per-use measurement that can
    contradict a go (``decision_memory.measured_loss``) counts the capture without it.

    >>> use_capture({"layout": {"built": True, "seconds": 4.5}}, 4.75), use_capture({}, 0.5)
    ((0.25, 4.5), (0.5, 0.0))
    """
    lay = decision.get("layout") or {}
    built = float(lay.get("seconds") or 0.0) if lay.get("built") else 0.0
    return max(capture_s - built, 0.0), built


def run_decided(ctx: Context, dd: Decided, step=None) -> Served:
    """Run a decided query (unless a job already answered it), log the run, finish the record."""
    cat, rec, secs, d = ctx.catalog, dd.rec, dd.secs, dd.rec["decision"]
    if dd.q is None:  # unsupported: answered plainly while deciding
        res = dd.answers[0]
        return Served(res, finish_record(rec, res, secs, spent=time.perf_counter() - dd.t_start), [])
    q, sketch, versions = dd.q, dd.sketch, dd.versions
    if dd.answers:
        # the sizing or capture job answered the query at these versions: its time is already
        # charged (capture or estimation), so the step has no separate run
        job_s = dd.answers[0].seconds
        res = dataclasses.replace(dd.answers[0], seconds=0.0)
        job = ("recapture" if d["action"] == "reuse" else "capture" if secs["capture"] else "sizing")
        d["reason"] += f"; answered by the {job} job (no separate run)"
    else:
        job_s = None
        try:
            t0 = time.perf_counter()
            res = run_query(cat, q, versions, sketch)
            dd.measuring += time.perf_counter() - t0 - res.seconds  # reading the scan metrics
        except Exception as e:
            if isinstance(e, BadInput):
                raise
            where_ = f"step {step}: " if step is not None else ""
            raise BadInput(f"{where_}{spark_rejected(e)}") from None
    if sketch is not None:
        rec["sketch_id"] = sketch.id
        t0 = time.perf_counter()
        rec["selectivity"]["real"] = _sel(cat, sketch, versions)
        dd.measuring += time.perf_counter() - t0
    capture, built = use_capture(d, secs["capture"])
    log = res.to_json() | {"rows": len(res.rows), "template": q.template, "capture_seconds": capture,
                           "build_seconds": built}
    if step is not None:
        log["replay_step"] = step
    if job_s is not None:
        # calibration: a go answered by its capture is a use that cost the capture alone; a no-go
        # answered by the sizing job ran about as a plain run does (``calibrate``)
        log |= {"answered": True, "sketch": sketch.to_json() if sketch is not None else None,
                "seconds": 0.0 if sketch is not None else job_s,
                "capture_seconds": capture or job_s if sketch is not None else 0.0}
    cat.store.log_run("run", dd.sql, log)
    spent = time.perf_counter() - dd.t_start - dd.measuring
    return Served(res, finish_record(rec, res, secs, dd.lookup_s, spent=spent), dd.maint)


def serve_update(ctx: Context, table: str, n_rows: int, s: AdviseSettings = DEFAULT, step=None) -> list[dict]:
    """A batch of ``n_rows`` changes reached ``table``: maintain the sketches reading it whose policy
    says so (eager, batched); returns the maintenance records."""
    if s.plain:
        return []
    done = after_apply(ctx.catalog, table, n_rows)
    return [maint_record(ctx.catalog, s.strategy, step, "update", r, s.measure_recapture) for r in done]


def _sel(catalog: Catalog, sk, versions) -> float:
    total = sum(catalog.version(p.table, versions.get(p.table)).rows for p in sk.parts)
    return sketch_rows(catalog, sk) / max(1, total)


def _pair(sk) -> str:
    """How a pair of sketches serves the query (``attribute_pairs.combine``), or ''."""
    if "+" not in sk.how:
        return ""
    attrs = " AND ".join(p.attr for p in sk.parts)
    return f" with sketch {sk.how.split('+')[1]} (two attributes: {attrs})"


def _attr(sk) -> str:
    return ", ".join(f"{p.table}.{p.attr}" for p in sk.parts)


def _plain_rows(cat: Catalog, q, versions: dict | None = None) -> float:
    """Rows a plain run of ``q`` reads (every table it scans, once per scan)."""
    return float(sum(cat.version(s.table, (versions or {}).get(s.table)).rows for s in q.scans()))
