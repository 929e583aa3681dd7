"""A sketch for new bindings of a template, derived from the maintained state of another instance:
no Spark job.

Where a plan's lowest aggregation is COUNT/SUM/AVG with only unary operators above it
(``bulk_init.supports``), that aggregation's operator state -- per group the row count, sums and rows
per fragment -- does not depend on constants above it (a HAVING threshold, a top-k's k).  Two
instances of one template that differ only there share it.  So a new instance whose sketch no
stored one can serve gets its operators built, the aggregation's state copied from a head of the
template that has state (caught up first when it is stale), and the aggregation's groups carried
through the new operators above it, as a bulk initialisation does (``bulk_init.initialise``).  The
sketch equals a capture's (tests/maintain/test_derive.py compares them) and the new chain has
operator state from its first version, so it is maintained incrementally without renting
recaptures (``rent``).

Joins below the aggregation keep no rows, only bloom filters of the keys each side ever emitted
(``ops_join``); those are copied with the aggregation's state (a sketch of lineitem JOIN orders by
o_orderdate on orders otherwise started each new chain with a 5-7 s state initialisation at SF1).

Where no head has state and none is current, the new binding would be captured: rent paid on the
template, as the recaptures of its state-less chains are.  Ski rental decides across both
(``_bought_state``): once the template's chains have spent, in recaptures and captures, plus this
capture, what the state's initialisation is predicted to cost, the new instance's own state is
initialised instead (one Spark aggregation) and its sketch derived from it.  Later bindings then
derive from that state.  (At SF1 a binding of lineitem JOIN orders by o_orderdate was captured for
5.0 s, and the next one initialised state for 5.5 s.)

Not derived (the caller captures): instances that differ below the aggregation (e.g. a WHERE
constant), templates whose heads neither have state nor are current while renting still pays,
and aggregations of more than ``DERIVE_MAX_GROUPS`` groups (those of a head's state, else as
estimated in ``_groups_estimate``).  At TPC-H SF1 grouped by l_orderkey (1.5M groups) a
derivation took 2.3-2.9 s against 1.6-2.0 s for a capture, most of it writing and
reading the state file and a Python loop over every group's DECIMAL sum; with states written
behind (``states``), copied in memory, and the sums vectorised, it takes 0.6-1.05 s against
2.0-3.1 s for the same binding's capture.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from advisor.maintain.engine import MaintState
from advisor.maintain.operators.join import JoinOp
from advisor.maintain.spark import bulk_init, state_rental, state_store
from advisor.maintain.spark.service import init_state, maintain_sketch, sketched_scans
from advisor.maintain.spark.spark_side import SparkBase
from advisor.plan import ir
from advisor.plan.parse import parse_sql
from advisor.safety.reuse_check import NotReusable, compare
from advisor.warehouse.column_stats import stored_ndv
from advisor.warehouse.sketch_records import Sketch, SketchPart, latest_versions, load_sketch, save_sketch

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog

DERIVE_MAX_GROUPS = 2_000_000  # about 1.3 s of derivation at the rate measured above


def _ndv_product(catalog: Catalog, query) -> float | None:
    """Product of the stored NDVs of the lowest aggregation's group keys (scanned columns), or None."""
    node = bulk_init.lowest_aggregate(query.root)
    if node is None or not isinstance(node, ir.Aggregate):
        return None
    n = 1.0
    for k in node.keys:
        c = node.child.col(k)
        if c.table is None or c.source is None:
            return None
        ndv = stored_ndv(catalog, c.table, c.source)
        if ndv is None:
            return None
        n *= max(1, ndv)
    return n


def _groups_estimate(catalog: Catalog, query, heads: list[Sketch]) -> float | None:
    """Groups a derivation would copy: those of the newest head's recorded state, else those a
    plain run of the template formed or the NDV product capped by the rows under it
    (``state_rental.state_groups``); None when a key has no stored NDV.  The product alone assumes
    independent keys: TPC-H SF1 ``GROUP BY l_partkey, l_suppkey`` is 2e9 by it, 6M by the rows and
    800k in the state, so every new binding of that template was captured (3.3-3.9 s) and each of
    its chains initialised a state of its own (6.5-7.7 s)."""
    for h in heads:
        g = state_store.groups(catalog.store, h.id)
        if g is not None:
            return float(g)
    if _ndv_product(catalog, query) is None:
        return None
    return state_rental.state_groups(catalog.store, query.root, query.template)


def derivable(query) -> bool:
    """The plan's shape allows a derivation: a lowest COUNT/SUM/AVG aggregation (``bulk_init.supports``)."""
    return bulk_init.lowest_aggregate(query.root) is not None


def _same_below(a: MaintState, b: MaintState) -> bool:
    """The two states' lowest aggregations see the same input and compute the same aggregates."""
    na, nb = bulk_init.lowest_aggregate(a.plan), bulk_init.lowest_aggregate(b.plan)
    if na is None or nb is None:
        return False
    try:
        d = compare(na, nb)
    except NotReusable:
        return False
    return not d.consts and not d.topk


def _heads(catalog: Catalog, query, want: dict) -> list[Sketch]:
    """The heads of ``query``'s template sketched as ``want`` ({table: (attr, partition id)}), newest first."""
    return sorted((s for s in latest_versions(catalog.store) if s.template == query.template
                   and {p.table: (p.attr, p.partition_id) for p in s.parts} == want), key=lambda s: -s.id)


def _init_record(catalog: Catalog, root, t0: float, versions: dict[str, int], template: str | None,
                 state: MaintState) -> dict:
    """The ``states`` record of ``state``'s bulk initialisation started at ``t0`` (feeds
    ``state_rental.init_rate``)."""
    return {"init_seconds": round(time.perf_counter() - t0, 4),
            "init_rows": sum(catalog.version(t, v).rows for t, v in versions.items()),
            "init_groups": state_rental.state_groups(catalog.store, root, template), "bulk": True,
            "driver": bool(getattr(state, "init_on_driver", False))}


def _head_state(catalog: Catalog, heads: list[Sketch], versions: dict[str, int]) -> tuple[MaintState, int] | None:
    """(the operator state, to read only, and the head's id) of one of ``heads`` at ``versions``: a head with
    state (caught up by one incremental step if stale), else a current head whose state is
    initialised now (one Spark aggregation, about a capture), else None."""


    has_state = {h.id for h in heads if state_store.has(catalog.store, h.id)}
    current = lambda h: all(h.data_versions.get(t) == v for t, v in versions.items())  # noqa: E731
    for head in [h for h in heads if h.id in has_state] + [h for h in heads if h.id not in has_state and current(h)]:
        if head.id not in has_state:
            t0 = time.perf_counter()
            hq = parse_sql(head.sql, lambda t: catalog.schema(t))
            st = init_state(catalog, head, hq, sketched_scans(catalog, hq, head))
            state_store.save(catalog, head.id, st, _init_record(catalog, hq.root, t0, versions, hq.template, st))
        elif not current(head):
            res = maintain_sketch(catalog, head.id)  # one incremental step (the head has state)
            if res.how != "incremental":
                continue
            head = load_sketch(catalog.store, res.new_id)
            if not current(head):
                continue
        st = state_store.peek(catalog, head.id)  # read only: the derivation copies what it takes
        if st is not None:
            return st, head.id
    return None


def _bought_state(catalog: Catalog, query, want: dict, heads: list[Sketch],
                  versions: dict[str, int]) -> tuple[MaintState, dict] | None:
    """(this instance's own operator state, its ``states`` record), initialised at ``versions`` (one
    Spark aggregation), when ski rental says buy: the template's ``heads`` (sketched as ``want``)
    exist, none has state or is current, and the recaptures and captures their chains have spent
    (``maint_rent``) plus this binding's capture reach the predicted initialisation.  Else None
    (the caller captures)."""

    if not heads or not bulk_init.supports(query.root):
        return None
    paid = [state_rental.rent_of(catalog.store, h.id) for h in heads]
    rows = sum(catalog.version(t, v).rows for t, v in versions.items())
    spent = sum(s for s, _ in paid)
    nxt = state_rental.recapture_seconds(catalog.store, rows, max((last for _, last in paid), default=0.0))
    init = state_rental.predict_init(catalog.store, query.root, rows, bulk=True, template=query.template)
    if state_rental.too_big(catalog.store, query.root, query.template) or state_rental.should_rent(spent, nxt, init):
        return None
    t0 = time.perf_counter()
    sk = Sketch(0, query.template, tuple(query.bindings), query.sql,
                [SketchPart(t, a, pid, frozenset()) for t, (a, pid) in sorted(want.items())], dict(versions))
    st = init_state(catalog, sk, query, sketched_scans(catalog, query, sk))
    bought = {"spent": round(spent, 4), "next": round(nxt, 4), "predicted": round(init, 4)}
    return st, _init_record(catalog, query.root, t0, versions, query.template, st) | {"bought": bought}


def derive_sketch(catalog: Catalog, query, on: dict[str, str], partitions: dict, versions: dict[str, int]):
    """(the saved sketch of ``query`` at ``versions``, seconds, the head it came from) derived from a
    head of its template (``_head_state``), or from its own state bought now (``_bought_state``; head
    None), or None.  ``on``/``partitions``: the sketched attribute and partition per
    table, which the head must share."""

    if not derivable(query):
        return None
    t0 = time.perf_counter()
    want = {t: (on[t], partitions[t].id) for t in on}
    heads = _heads(catalog, query, want)
    groups = _groups_estimate(catalog, query, heads)
    if groups is None or groups > DERIVE_MAX_GROUPS:
        return None
    got, meta = _head_state(catalog, heads, versions), None
    if got is None:
        own = _bought_state(catalog, query, want, heads, versions)
        if own is None:
            return None
        got, meta = (own[0], None), own[1]
    old, head_id = got
    sk = Sketch(0, query.template, tuple(query.bindings), query.sql,
                [SketchPart(t, on[t], partitions[t].id, frozenset()) for t in sorted(on)], dict(versions),
                how="derive")
    sketched = sketched_scans(catalog, query, sk)
    new = MaintState(query.root, sketched)
    src, dst = bulk_init.plain_agg_op(old), bulk_init.plain_agg_op(new)
    if src is None or dst is None or not _same_below(old, new):
        return None  # the instances differ below the aggregation: no head of this template serves
    for name in ("index", "cnt", "nn", "sums", "f1", "c1", "multi", "dec", "started"):
        setattr(dst, name, state_store.fresh(getattr(src, name)))  # the head keeps its own
    sj, dj = ([o for o in a.children[0].walk() if isinstance(o, JoinOp)] for a in (src, dst))
    if len(sj) != len(dj):
        return None
    for a, b in zip(sj, dj):  # same subtree below the aggregation: the joins' key filters carry over
        b.use_bloom, b.bloom_l, b.bloom_r = a.use_bloom, state_store.fresh(a.bloom_l), state_store.fresh(a.bloom_r)
    dst.pending = dst.all_outputs()
    per_scan = new.apply({}, SparkBase(catalog, sketched, versions, versions))
    scan_table = {s.scan_id: s.table for s in query.scans()}
    frags: dict[str, set] = {t: set() for t in on}
    for sid, fs in per_scan.items():
        frags[scan_table[sid]] |= set(fs)
    sk.parts = [SketchPart(p.table, p.attr, p.partition_id, frozenset(frags[p.table])) for p in sk.parts]
    save_sketch(catalog.store, sk)
    state_store.save(catalog, sk.id, new, meta)
    return sk, time.perf_counter() - t0, head_id
