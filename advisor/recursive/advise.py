"""Recursive queries on the advise path: recognise the shape (unsupported shapes run plainly and
say why), reuse this process's sketch of the query (caught up to the link table's current
version by maintenance), or capture one, then run with the sketch's filter on every link scan.

A sketch and its maintenance state (witness sets, BDDs or the DRed view) are kept in the process
(``SKETCHES``) and pickled under the warehouse (``recursive/``), so a later ``advisor run``
maintains them from the link table's changes instead of recapturing; maintenance runs when the
query next uses the sketch.  A missing or unreadable state file means a recapture.  The decision
record says which happened, with the safety verdict and the rows kept.
"""

from __future__ import annotations

import dataclasses
import hashlib
import pickle
from pathlib import Path

from advisor.engine.execute import RunResult, run_plain_sql
from advisor.engine.scan_metrics import ScanMetrics
from advisor.errors import BadInput, Unsupported
from advisor.recursive.capture import DEFAULT_FRAGMENTS, capture_recursive, catch_up, table_stamp
from advisor.recursive.evaluate import DRIVER_MAX_LINKS, run_general, run_recursive
from advisor.recursive.linear import describe_loop, parse_linear
from advisor.recursive.proof import verdict
from advisor.recursive.shape import looks_recursive, recognise
from advisor.recursive.witnesses import BudgetExceeded

SKETCHES: dict = {}  # (warehouse, template) -> RecursiveSketch
MAINTAINED: dict = {}  # (warehouse, template) -> the last catch-up's BatchResult, until reported


def _result(run, note: str | None = None) -> RunResult:
    """The run as the advise path's result; the answer's schema rides along (``schema``) because
    Spark cannot analyse the query's own text (it rejects UNION in a recursive CTE)."""
    m = ScanMetrics(rows_read=run.scan_rows)
    res = RunResult(run.columns, run.rows, m, run.seconds, run.sketch, note)
    res.schema = run.schema
    return res


def serve_recursive(catalog, sql: str, use: bool = True, fragments: int = DEFAULT_FRAGMENTS):
    """Answer a recursive query; returns (RunResult, template, decision dict)."""
    try:
        shape = recognise(sql)
    except Unsupported as e:
        return _unsketched(catalog, sql, str(e))
    catalog.require(shape.table)
    if not use:
        run = run_recursive(catalog, shape)
        return (
            _result(run),
            shape.template,
            {
                "action": "plain",
                "reason": f"plain run (no sketch asked for); {shape.describe()}; {run.how}, "
                f"{run.rounds} rounds",
            },
        )
    key = (str(catalog.store.warehouse), shape.template)
    rs = SKETCHES.get(key)
    if rs is not None and rs.stamp != table_stamp(catalog, shape.table):
        rs = None
    rs = rs or _load(catalog, shape)
    if rs is not None:
        done = catch_up(catalog, rs)
        if done is not None:
            MAINTAINED[key] = (done, fragments)
        how = (
            "reused"
            if done is None
            else f"maintained ({done.mode} state, {done.method}: +{done.inserted} -{done.deleted} links, "
            f"{done.touched} tuples touched, "
            f"{done.seconds:.3f} s{'; ' + done.note if done.note else ''}) and reused"
        )
        action = "reuse"
    else:
        rs = capture_recursive(catalog, shape, fragments=fragments)
        how, action = f"captured in {rs.seconds:.2f} s from {rs.state.mode} state", "capture"
    SKETCHES[key] = rs
    _save(catalog, shape, rs)
    safe = verdict(shape, rs.attr)
    view, cond = rs.source(catalog)
    run = run_recursive(catalog, shape, rs.version, cond, sketch=rs.to_json(), view=view)
    reason = (
        f"{how}: recursive sketch on {shape.table}.{rs.attr}, {len(rs.fragments)} of "
        f"{rs.part.n_fragments} fragments ({rs.selectivity():.1%} of the links); {run.link_rows:,} link "
        f"rows entered the recursion ({run.how}, {run.rounds} rounds); {safe.reason}"
    )
    return (
        _result(run),
        shape.template,
        {"action": action, "attr": f"{shape.table}.{rs.attr}", "reason": reason},
    )


def _unsketched(catalog, sql: str, why: str):
    """A recursive query no sketch shape covers: the semi-naive loop for ``UNION`` (Spark rejects it
    in a recursive CTE), Spark itself for ``UNION ALL`` and for a query without recursion; a shape
    neither evaluates is refused by ``parse_linear`` with its name (``CannotEvaluate``)."""
    try:
        lq = parse_linear(sql)
    except Unsupported:
        res = run_plain_sql(catalog, sql, why)
        return res, None, {"action": "unsupported", "reason": f"ran without a sketch: {why}"}
    if lq.union_all:
        res = run_plain_sql(catalog, sql, why)
        how = "Spark's recursive CTE (UNION ALL)"
    else:
        run = run_general(catalog, lq)
        res = _result(run, why)
        how = f"semi-naive loop, {run.rounds} rounds, {run.view_rows:,} view rows"
    return res, None, {"action": "unsupported", "reason": f"ran without a sketch ({how}): {why}"}


def maintenance_records(catalog, sql: str, strategy: str, step, measure: bool) -> list[dict]:
    """The record of the maintenance the last ``serve_recursive`` of ``sql`` ran (none if it ran
    none); with ``measure`` the sketch is also captured afresh at the same link-table version with
    the same kind of state (nothing stored) and compared with the maintained one."""
    if not looks_recursive(sql):
        return []
    try:
        shape = recognise(sql)
    except (Unsupported, BadInput):
        return []
    key = (str(catalog.store.warehouse), shape.template)
    got, rs = MAINTAINED.pop(key, None), SKETCHES.get(key)
    if got is None or rs is None:
        return []
    done, fragments = got
    sid = f"recursive:{rs.part.id}"
    rec = {"strategy": strategy, "step": step, "trigger": "query", "sketch_id": sid, "new_sketch_id": sid,
           "how": "incremental", "seconds": round(done.seconds, 4),
           "delta_rows": done.inserted + done.deleted,
           "recapture_seconds": None, "equal_to_recapture": None}
    if measure:
        pol = dataclasses.replace(rs.state.policy, mode=rs.state.mode)
        fresh = capture_recursive(catalog, shape, rs.attr, fragments, rs.version, pol)
        rec["recapture_seconds"] = round(fresh.seconds, 4)
        if fresh.state.mode == rs.state.mode:  # else a budget ended the fresh capture's state: not comparable
            rec["equal_to_recapture"] = fresh.fragments == rs.fragments
    return [rec]


def _state_path(catalog, shape) -> Path:
    h = hashlib.sha1(shape.template.encode()).hexdigest()[:16]
    return Path(catalog.store.warehouse) / "recursive" / f"{h}.pkl"


def _load(catalog, shape):
    p = _state_path(catalog, shape)
    try:
        with open(p, "rb") as f:
            rs = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, BudgetExceeded):
        return None
    if (
        getattr(rs.state, "kind", None) is None  # a state pickled in another format: recapture
        or rs.shape.template != shape.template
        or rs.stamp != table_stamp(catalog, shape.table)
        or rs.version > catalog.current_version(shape.table)
    ):
        return None  # another query hashed alike, or the table was reloaded
    return rs


def _save(catalog, shape, rs) -> None:
    p = _state_path(catalog, shape)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        pickle.dump(rs, f, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(p)


def explain_recursive(sql: str) -> dict:
    """What ``advisor explain`` shows for a recursive query (no Spark needed)."""
    try:
        shape = recognise(sql)
    except Unsupported as e:
        try:
            lq = parse_linear(sql)
            plan = ["Spark's own recursive CTE (UNION ALL, bag semantics)" if lq.union_all else describe_loop(lq)]
        except Unsupported:
            plan = ["a plain Spark query"]
        return {
            "sql": sql,
            "supported": False,
            "recursive": True,
            "reason": str(e),
            "plan": plan,
            "tables": [],
            "sketches": [],
        }
    cands = []
    for a in (shape.src_col, shape.dst_col):
        v = verdict(shape, a)
        cands.append({"attr": a, "safe": bool(v.safe), "reason": v.reason})
    plan = [
        shape.describe(),
        "evaluation: Spark reads the link rows once (the sketch's filter applied); a semi-naive loop "
        f"on the driver when {shape.table} has up to {DRIVER_MAX_LINKS:,} rows, else "
        + (
            "Spark's recursive CTE in UNION ALL form when the hop-bounded walks are few, else "
            if shape.max_hops is not None
            else ""
        )
        + "the semi-naive loop on Spark (Spark's recursive CTE rejects UNION); the outer query in Spark SQL",
        "sketch: fragments of one minimal witness per needed view tuple, filter on every scan of "
        f"{shape.table}",
        "maintenance: "
        + (
            "minimal witness sets while they fit their budget, else derivation supports with levels"
            if shape.max_hops is not None
            else "derivation supports with levels (one shortest derivation per tuple; deletions check "
            "only tuples that lost one)"
        )
        + "; per batch absorption or recomputation, whichever measured cheaper",
    ]
    return {
        "sql": sql,
        "supported": True,
        "recursive": True,
        "reason": None,
        "template": shape.template,
        "bindings": [],
        "plan": plan,
        "tables": [{"table": shape.table, "version": None, "accesses": 2, "candidates": cands}],
        "sketches": [],
    }
