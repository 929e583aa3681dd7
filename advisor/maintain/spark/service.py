"""Maintaining stored sketches on Spark data: state persistence, deltas, recapture fallback.

A sketch row is immutable and tied to the data versions it is correct for. `maintain_sketch`
brings one sketch head from its versions V to the current versions V' in one step (this is also
how the lazy policy catches up): it loads the operator state persisted for that sketch (or
initialises it by feeding the tables at V as one insert batch), feeds the net deltas V -> V'
through the IMP engine (the non-delta join sides are evaluated by Spark, `SparkBase`), stores the
result as a new sketch version whose parent is the old one, and keeps the new state for it
(``states``: the row now, the file when evicted or at exit). If the engine cannot continue (a top-k buffer ran
dry), the sketch is recaptured instead. A chain without state is recaptured while initialising
state does not pay yet (ski rental, `rent`). The previous version is never modified.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from advisor.errors import BadInput
from advisor.maintain.engine import Maintainer, MaintState, not_incremental
from advisor.maintain.operators.protocol import NeedsRecapture
from advisor.maintain.spark import bulk_init, state_rental, state_store
from advisor.maintain.spark.spark_side import SparkBase, warm_sides
from advisor.partition.range_partition import load_partition
from advisor.plan.parse import parse_sql
from advisor.sketch.capture import capture
from advisor.warehouse.delta_source import ChangeFeedGap
from advisor.warehouse.sketch_records import Sketch, SketchPart, latest_versions, load_sketch, save_sketch

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog


@dataclass
class MaintResult:
    old_id: int
    new_id: int
    how: str                 # "incremental" | "recapture" | "current"
    seconds: float
    delta_rows: int
    changed: dict            # table -> (added fragments, removed fragments)
    state_bytes: int = 0
    init_seconds: float = 0.0  # of ``seconds``: initialising operator state (first step of a chain)
    answer: object = None      # execute.RunResult of the sketch's query when the recapture also answered it

    def to_json(self) -> dict:
        return {"old": self.old_id, "new": self.new_id, "how": self.how, "seconds": round(self.seconds, 4),
                "delta_rows": self.delta_rows, "state_bytes": self.state_bytes,
                "changed": {t: {"added": sorted(a), "removed": sorted(r)} for t, (a, r) in self.changed.items()}}


def sketched_scans(catalog: Catalog, query, sk: Sketch) -> dict:
    """scan_id -> (internal attribute name, RangePartition) for every access of a sketched table."""
    out = {}
    for p in sk.parts:
        part = load_partition(catalog.store, p.partition_id)
        for s in query.scans():
            if s.table == p.table:
                out[s.scan_id] = (next(c.name for c in s.cols if c.source == p.attr), part)
    return out


def _pandas_tables(catalog: Catalog, tables: list[str], versions: dict[str, int]) -> dict:
    return {t: catalog.read_pandas(t, versions[t]) for t in tables}


def init_state(catalog: Catalog, sk: Sketch, query, sketched: dict, topk_buffer: int | None = None,
               use_bulk: bool = True) -> MaintState:
    """Initialise operator state for the tables at the sketch's versions: by one Spark aggregation
    where the plan allows (``bulk``), else by feeding the tables as one insert batch."""
    tables = sorted({s.table for s in query.scans()})
    versions = _versions_for(catalog, sk, tables)
    base = SparkBase(catalog, sketched, versions, versions)
    if use_bulk and bulk_init.supports(query.root):
        state = MaintState(query.root, sketched, topk_buffer=topk_buffer)
        if bulk_init.initialise(state, base):
            warm_sides(state, base)
            return state
    data = _pandas_tables(catalog, tables, versions)
    state = Maintainer.init(query.root, sketched, data, topk_buffer=topk_buffer)
    warm_sides(state, base)
    return state


def _versions_for(catalog: Catalog, sk: Sketch, tables: list[str]) -> dict[str, int]:
    """The sketch's data versions; tables it does not sketch are read at the version current when
    it was made (recorded for every table the query reads)."""
    return {t: sk.data_versions.get(t, catalog.current_version(t)) for t in tables}


def maintain_sketch(catalog: Catalog, sketch_id: int, topk_buffer: int | None = None, answer: bool = False,
                    buy: bool = False, measured: bool = True) -> MaintResult:
    """Bring sketch `sketch_id` (a head) to the tables' current versions; returns what happened.
    A chain without operator state either initialises it or, while that does not pay yet, is
    recaptured (``rent``); with ``buy`` it initialises the state at once.  With ``answer``, such a
    recapture also answers the sketch's query (``MaintResult.answer``): a caller about to
    run that very query need not run it.  ``measured=False`` prices that choice with priors alone,
    never with seconds measured in this store (``state_rental``).  Each step is logged (kind
    ``maintain``) for ``advisor.calibration.measured_costs``."""
    res = _maintain(catalog, sketch_id, topk_buffer, answer, buy, measured)
    if res.how != "current":
        state_store.prune(catalog)
        sk = load_sketch(catalog.store, sketch_id)
        catalog.store.log_run("maintain", sk.sql, {"template": sk.template, "how": res.how,
                                                   "seconds": round(res.seconds - res.init_seconds, 4),
                                                   "init_seconds": res.init_seconds, "delta_rows": res.delta_rows,
                                                   "sketch_id": res.old_id, "new_sketch_id": res.new_id})
    return res


def _maintain(catalog: Catalog, sketch_id: int, topk_buffer: int | None, answer: bool = False,
              buy: bool = False, measured: bool = True) -> MaintResult:
    sk = load_sketch(catalog.store, sketch_id)
    if sk is None:
        raise BadInput(f"no sketch with id {sketch_id}")
    query = parse_sql(sk.sql, lambda t: catalog.schema(t))
    tables = sorted({s.table for s in query.scans()})
    old = _versions_for(catalog, sk, tables)
    new = {t: catalog.current_version(t) for t in tables}
    if old == new:
        return MaintResult(sk.id, sk.id, "current", 0.0, 0, {})
    t0 = time.perf_counter()
    sketched = sketched_scans(catalog, query, sk)
    state, init = state_store.load(catalog, sk.id), None
    if not_incremental(query.root):
        n = sum(x.n_ins + x.n_del for t in tables for x in catalog.versions(t) if old[t] < x.version <= new[t])
        return _recapture(catalog, sk, query, new, t0, None, 0.0, n, answer)
    if state is None:
        rows = sum(catalog.version(t, old[t]).rows for t in tables)
        spent, last = state_rental.rent_of(catalog.store, sk.id)
        is_bulk = bulk_init.supports(query.root)
        measured = measured and state_rental.measured(catalog.store)
        prior = rows / state_rental.RECAPTURE_ROWS_PER_S
        nxt = (last if measured else 0.0) or prior
        renting = not buy and state_rental.should_rent(
            spent, nxt, state_rental.predict_init(catalog.store, query.root, rows, is_bulk, query.template,
                                                  measured))
        if renting or state_rental.too_big(catalog.store, query.root, query.template):
            n = sum(x.n_ins + x.n_del for t in tables for x in catalog.versions(t) if old[t] < x.version <= new[t])
            return _recapture(catalog, sk, query, new, t0, None, spent, n, answer,
                              None if measured else prior)
        t_init = time.perf_counter()
        state = init_state(catalog, sk, query, sketched, topk_buffer)
        init = {"init_seconds": round(time.perf_counter() - t_init, 4), "init_rows": rows, "bulk": is_bulk,
                "driver": bool(getattr(state, "init_on_driver", False)),
                "init_groups": state_rental.state_groups(catalog.store, query.root, query.template)}
    deltas, n_delta = {}, 0
    for t in tables:
        if old[t] != new[t]:
            seen: list = []
            try:
                ins_p, del_p = catalog.delta_pandas(t, old[t], new[t], columns=state.columns(t),
                                                    where=state.delta_where(t), seen=seen)
            except ChangeFeedGap:  # a Delta table's change feed does not cover the versions: recapture
                return _recapture(catalog, sk, query, new, t0, None, 0.0, 0, answer)
            n_delta += seen[0]
            deltas[t] = (ins_p, del_p)
    scan_table = {s.scan_id: s.table for s in query.scans()}
    try:
        per_scan = state.apply(deltas, SparkBase(catalog, sketched, old, new))
        how = "incremental"
    except NeedsRecapture:
        return _recapture(catalog, sk, query, new, t0, (sketched, topk_buffer), 0.0, n_delta)
    frags: dict[str, set] = {p.table: set() for p in sk.parts}
    for sid, fs in per_scan.items():
        frags[scan_table[sid]] |= set(fs)
    new_sk = Sketch(0, sk.template, sk.bindings, sk.sql,
                    [SketchPart(p.table, p.attr, p.partition_id, frozenset(frags[p.table])) for p in sk.parts],
                    dict(new), parent_id=sk.id, how="maintain")
    save_sketch(catalog.store, new_sk)
    size = state_store.save(catalog, new_sk.id, state, init)
    return MaintResult(sk.id, new_sk.id, how, time.perf_counter() - t0, n_delta, _changes(sk, new_sk), size,
                       init["init_seconds"] if init else 0.0)


def _recapture(catalog: Catalog, sk: Sketch, query, new: dict, t0: float, init_with, spent: float,
               n_delta: int = 0, answer: bool = False, booked: float | None = None) -> MaintResult:
    """Recapture the chain's next version at ``new``.  With ``init_with`` = (sketched, topk buffer)
    operator state is initialised for it (a top-k buffer ran dry); without, the chain stays
    state-less and the recapture is booked as rent (``rent``): its seconds (beyond a sketched run
    when it also answered the query, ``state_rental.answered_rent``), or ``booked`` (the prior, when
    costs are not measured)."""

    on = {p.table: p.attr for p in sk.parts}
    parts = {p.table: load_partition(catalog.store, p.partition_id) for p in sk.parts}
    res = capture(catalog, query, on, versions=new, check=False, partitions=parts, answer=answer)
    # the recapture saved its own row; re-link it as the next version of this chain
    with catalog.store.tx() as c:
        c.execute("UPDATE sketches SET parent_id=?, how='recapture', data_versions_json=? WHERE id=?",
                  (sk.id, json.dumps(new), res.sketch.id))
    size = 0
    if init_with is None:
        rows = sum(catalog.version(t, v).rows for t, v in new.items())
        paid = state_rental.booked(catalog.store, rows, res.seconds) if booked is None else booked
        if res.answer is not None and booked is None and state_rental.measured(catalog.store):
            paid = state_rental.answered_rent(catalog.store, sk.template, paid)
        state_rental.record_rent(catalog.store, res.sketch.id, spent + paid, paid)
    else:
        state = init_state(catalog, load_sketch(catalog.store, res.sketch.id), query, *init_with)
        size = state_store.save(catalog, res.sketch.id, state)
    return MaintResult(sk.id, res.sketch.id, "recapture", time.perf_counter() - t0, n_delta,
                       _changes(sk, load_sketch(catalog.store, res.sketch.id)), size, answer=res.answer)


def _changes(a: Sketch, b: Sketch) -> dict:
    out = {}
    for p in a.parts:
        q = b.part(p.table)
        if q is not None:
            out[p.table] = (q.fragments - p.fragments, p.fragments - q.fragments)
    return out


def stale_heads(catalog: Catalog, tables: set[str] | None = None) -> list[Sketch]:
    """Sketch heads whose data versions are behind the current table versions."""
    out = []
    for s in latest_versions(catalog.store):
        query_tables = set(s.data_versions)
        if tables is not None and not (query_tables & tables):
            continue
        if any(catalog.exists(t) and catalog.current_version(t) != v for t, v in s.data_versions.items()):
            out.append(s)
    return out
