"""Rent or buy operator state (ski rental) for a sketch chain that has none yet.

Initialising IMP state means one Spark aggregation where the plan allows (``bulk``, about a
capture) or else reading every table the query reads into the engine (SF0.1 lineitem: ~5 s),
while a recapture costs one instrumented scan (~1-2 s).  State pays off only if the chain is
maintained again and again, which is not known in advance.  The classic ski-rental rule is
2-competitive: keep *renting* (recapture, no state) while the recapture time already spent on the
chain plus the next recapture stays within the estimated *purchase* (state initialisation); then
buy.  Tables small enough to initialise in under ``MIN_INIT_SECONDS`` are bought at once.  The
initialisation estimate uses the median rate of earlier initialisations in this store (recorded in
the ``states`` rows), else a prior; the recapture estimate is the chain's last recapture, else a
scan-rate prior.  Chain spend is kept in the ``maint_rent`` table, keyed by the sketch version.
"""

from __future__ import annotations

import json
import statistics
import time

INIT_ROWS_PER_S = 150_000.0          # prior: pyarrow read + pandas operators (measured 120k-200k on 2 cores)
BULK_INIT_ROWS_PER_S = 1_500_000.0   # prior: one Spark aggregation (``bulk``), about a capture's cost
RECAPTURE_ROWS_PER_S = 2_000_000.0   # prior: one instrumented Spark scan
MIN_INIT_SECONDS = 2.0

def should_rent(spent: float, next_recapture: float, init_cost: float,
                min_init: float = MIN_INIT_SECONDS) -> bool:
    """Recapture instead of initialising state: the purchase is worth considering and the rent paid
    so far, plus this one, stays within it."""
    return init_cost >= min_init and spent + next_recapture <= init_cost


def init_rate(store, bulk: bool = False) -> float:
    """Rows per second of state initialisation observed in this store (median over the same kind:
    Spark bulk or row path), else the kind's prior."""
    rates = []
    for r in store.query("SELECT meta_json FROM states ORDER BY created DESC LIMIT 50"):
        m = json.loads(r["meta_json"])
        if m.get("init_seconds") and m.get("init_rows") and bool(m.get("bulk")) == bulk:
            rates.append(m["init_rows"] / max(m["init_seconds"], 1e-3))
    if rates:
        return statistics.median(rates)
    return BULK_INIT_ROWS_PER_S if bulk else INIT_ROWS_PER_S


def rent_of(store, sketch_id: int) -> tuple[float, float]:
    """(recapture seconds spent on the chain so far, the last one) for a rented sketch version."""
    r = store.one("SELECT spent, last FROM maint_rent WHERE sketch_id=?", (sketch_id,))
    return (float(r["spent"]), float(r["last"])) if r else (0.0, 0.0)


def record_rent(store, sketch_id: int, spent: float, last: float) -> None:
    with store.tx() as c:
        c.execute("INSERT OR REPLACE INTO maint_rent VALUES (?,?,?,?)", (sketch_id, spent, last, time.time()))
