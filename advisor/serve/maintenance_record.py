"""The record of one maintenance event the advise path triggered, optionally checked against a
fresh capture of the same query at the same data versions (nothing stored)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.partition.range_partition import load_partition
from advisor.plan.parse import parse_sql
from advisor.sketch.capture import capture_batch
from advisor.warehouse.sketch_records import load_sketch

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog


def maint_record(catalog: Catalog, strategy: str, step, trigger: str, res, measure: bool) -> dict:
    """A maintenance event; with ``measure`` also a full recapture (not stored) timed and compared."""
    rec = {"strategy": strategy, "step": step, "trigger": trigger, "sketch_id": res.old_id,
           "new_sketch_id": res.new_id, "how": res.how, "seconds": round(res.seconds, 4),
           "delta_rows": res.delta_rows, "recapture_seconds": None, "equal_to_recapture": None}
    if measure and res.how == "incremental":
        secs, same = recapture_check(catalog, res.new_id)
        rec["recapture_seconds"], rec["equal_to_recapture"] = round(secs, 4), same
    return rec


def recapture_check(catalog: Catalog, sketch_id: int) -> tuple[float, bool]:
    """Capture the sketch's query afresh at its data versions (one job, nothing stored); returns the
    seconds and whether the fragments equal the maintained sketch's."""
    sk = load_sketch(catalog.store, sketch_id)
    q = parse_sql(sk.sql, lambda t: catalog.schema(t))
    on = {p.table: p.attr for p in sk.parts}
    parts = {p.table: load_partition(catalog.store, p.partition_id) for p in sk.parts}
    (fresh,), secs = capture_batch(catalog, [(q, on, parts)], dict(sk.data_versions))
    same = all(fresh.part(p.table).fragments == p.fragments for p in sk.parts)
    return secs, same
