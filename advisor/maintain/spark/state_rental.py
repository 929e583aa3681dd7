"""Rent or buy operator state (ski rental) for a sketch chain that has none yet.

Initialising IMP state means one aggregation where the plan allows (``bulk``): on the driver with
pyarrow where it reads one table as it is (``bulk_arrow``, a fraction of a scan), else on Spark
(about a capture); or else reading every table the query reads into the engine (SF0.1 lineitem:
~5 s), while a recapture costs one instrumented scan (~1-2 s).  State pays off only if the chain is
maintained again and again, which is not known in advance.  The classic ski-rental rule is
2-competitive: keep *renting* (recapture, no state) while the recapture time already spent on the
chain plus the next recapture stays within the estimated *purchase* (state initialisation); then
buy.  Tables small enough to initialise in under ``MIN_INIT_SECONDS`` are bought at once.  The
initialisation estimate (``predict_init``) is the rows over the median rate of earlier
initialisations in this store (recorded in the ``states`` rows; for a plan the driver cannot
initialise, those on Spark only: the driver's are several times faster), else a prior, plus the
groups the state will hold over ``GROUPS_PER_S``: the state's groups are loaded on the driver, so
a state of 1.5M groups (TPC-H SF1 ``GROUP BY l_orderkey``) took 7.5 s where states of 2-20k groups
over the same 6M rows took 2.3-3.3 s.  The recapture estimate is the chain's last recapture, else a
scan-rate prior.  Chain spend is kept in the ``maint_rent`` table, keyed by the sketch version.

Without measured costs (``measured=False``, a workload whose decisions must not depend on timing)
every figure is a prior: initialisations at the kind's prior rate, recaptures at the scan-rate prior
(also what the chain's rent books), so the same data and queries rent or buy alike on any machine.
(A 30,000-row initialisation measured at 3.6 s on a loaded 2-core machine against ~0.3 s on a quiet
one turned a purchase into rent and a sketched catch-up into a full recapture.)
"""

from __future__ import annotations

import json
import statistics
import time
from typing import TYPE_CHECKING

from advisor.calibration.measured_costs import PRIOR_ROWS_PER_S, calibrate
from advisor.maintain.spark.bulk_arrow import DRIVER_MAX_ROWS, shape_on_driver
from advisor.maintain.spark.bulk_init import lowest_aggregate
from advisor.maintain.spark.state_store import template_groups
from advisor.plan import ir
from advisor.warehouse.column_stats import store_ndv

if TYPE_CHECKING:
    from advisor.warehouse.store import Store

INIT_ROWS_PER_S = 150_000.0          # prior: pyarrow read + pandas operators (measured 120k-200k on 2 cores)
BULK_INIT_ROWS_PER_S = 1_500_000.0   # prior: one Spark aggregation (``bulk``), about a capture's cost
RECAPTURE_ROWS_PER_S = PRIOR_ROWS_PER_S  # prior: one instrumented Spark scan
MIN_INIT_SECONDS = 2.0
# prior: groups of state loaded per second on the driver (arrow transfer + operator arrays).  SF1
# big_orders: 1.5M groups added ~4.5-5 s to a 6M-row initialisation; SF0.1: 150k groups, 0.74 s
# load + ~0.5 s transfer (BENCHMARKS.md)
GROUPS_PER_S = 300_000.0
# the same on the driver (``bulk_arrow``: pyarrow's group-by, no transfer).  SF1: 1.5M groups of
# l_orderkey add 1.0-2.0 s to a 6M-row initialisation whose 10k groups of l_suppkey take 0.3-0.5 s
DRIVER_GROUPS_PER_S = 1_000_000.0
# State predicted to hold more groups than this is never bought (the chain is recaptured instead):
# the groups are loaded on the driver.  TPC-H SF1 GROUP BY l_orderkey, l_partkey (~6M groups) took a
# replay process to 5.2 GB resident and the kernel killed it beside four JVMs; GROUP BY l_orderkey
# (1.5M groups) ran through 40 batches (BENCHMARKS.md).
MAX_STATE_GROUPS = 3_000_000.0


def should_rent(spent: float, next_recapture: float, init_cost: float,
                min_init: float = MIN_INIT_SECONDS) -> bool:
    """Recapture instead of initialising state: the purchase is worth considering and the rent paid
    so far, plus this one, stays within it."""
    return init_cost >= min_init and spent + next_recapture <= init_cost


MEASURED = "measured_costs"  # store setting: "false" prices rent and purchase from the priors alone


def set_measured(store: Store, measured: bool) -> None:
    """Price rent and purchase from this store's measured seconds (True, the default) or from the
    priors alone (False): then the choice depends on the data only, not on how busy the machine
    was, as a replay gated on deterministic counters needs (``measured_costs: false``)."""
    store.set_setting(MEASURED, "true" if measured else "false")


def measured(store: Store) -> bool:
    return store.setting(MEASURED, "true") != "false"


def recapture_seconds(store: Store, rows: float, last: float) -> float:
    """The next recapture's price: the last one measured, else (or with priors only) a prior."""
    return (last if measured(store) else 0.0) or rows / RECAPTURE_ROWS_PER_S


def booked(store: Store, rows: float, seconds: float) -> float:
    """What a recapture adds to its chain's rent: its measured seconds, or with priors only the prior's."""
    return seconds if measured(store) else rows / RECAPTURE_ROWS_PER_S


def answered_rent(store: Store, template: str | None, seconds: float) -> float:
    """The rent of a recapture that also answered its query: what it cost beyond the sketched run
    an owner of state would have made instead (the template's median sketched run logged in this
    store; all of it when none is).  Renting competes with owning, and the owner runs the query too
    (the demo's top-k over lineitem: answering recaptures of 2.2-2.9 s against sketched runs of
    0.3-0.6 s)."""
    sketched = calibrate(store).query_s.get(template, ([], []))[1] if template is not None else []
    return max(0.0, seconds - statistics.median(sketched)) if sketched else seconds


def init_rate(store: Store, bulk: bool = False, spark_only: bool = False, driver_only: bool = False) -> float:
    """Rows per second of state initialisation observed in this store (median over the same kind:
    bulk or row path; with ``spark_only``, bulk ones on Spark only; with ``driver_only``, bulk ones
    on the driver where there are such), else the kind's prior.  The time ``predict_init`` gives a
    recorded state's groups (``init_groups``, at its path's rate) is taken out first.
    Initialisations whose groups account for more than half their time say little about the rows'
    rate and are left out while others exist; with only such, at most half is taken out.
    (Clamping SF1 big_orders' 6.7 s at half, with 4.9 s of it its 1.48M groups, priced small
    states' initialisations at 3.3 s against 1.6-2.5 s measured, and kept renting or declining
    their chains.)"""
    prior = BULK_INIT_ROWS_PER_S if bulk else INIT_ROWS_PER_S
    if not measured(store):
        return prior
    rates, dominated = [], []
    # only initialisations: every incremental step also writes a states row, and the newest 50 rows of
    # a busy store held none (the prior was used after the first 50 steps)
    records = [m for m in (json.loads(r["meta_json"]) for r in store.query(
        "SELECT meta_json FROM states WHERE meta_json LIKE '%\"init_seconds\"%' ORDER BY created DESC LIMIT 50"))
        if m.get("init_seconds") and m.get("init_rows") and bool(m.get("bulk")) == bulk
        and not (spark_only and m.get("driver"))]
    if driver_only and any(m.get("driver") for m in records):
        records = [m for m in records if m.get("driver")]
    for m in records:
        groups_s = float(m.get("init_groups") or 0.0) / (DRIVER_GROUPS_PER_S if m.get("driver") else GROUPS_PER_S)
        if groups_s <= 0.5 * m["init_seconds"]:
            rates.append(m["init_rows"] / max(m["init_seconds"] - groups_s, 1e-3))
        else:
            dominated.append(m["init_rows"] / max(0.5 * m["init_seconds"], 1e-3))
    if rates or dominated:
        return statistics.median(rates or dominated)
    return prior


def state_groups(store: Store, root, template: str | None = None) -> float:
    """Groups the operator state of a plan will hold: those a plain run of its ``template`` formed
    (``Store.observed_groups``), else those a state of the template held (``states.template_groups``:
    a template whose every instance used a sketch never ran plain), else per aggregation the
    product of its keys' distinct counts (the newest table statistics in the store), capped by the
    rows of the tables under it, summed over aggregations.  A key without statistics (a computed
    one) leaves its aggregation out: 0 groups, the estimate before groups were counted.  The product assumes independent keys: TPC-H SF1
    ``GROUP BY l_partkey, l_suppkey`` came out at 6M (the rows) against 800k groups formed."""


    seen = store.observed_groups(template)
    if seen is None:
        seen = template_groups(store, template)
    if seen is not None:
        return float(seen)
    total = 0.0
    for node in root.walk():
        if not isinstance(node, ir.Aggregate) or not node.keys:
            continue
        rows = 0.0
        for s in node.walk():
            if isinstance(s, ir.Scan):
                r = store.one("SELECT rows FROM versions WHERE table_name=? ORDER BY version DESC LIMIT 1", (s.table,))
                rows += float(r["rows"]) if r else 0.0
        g = 1.0
        for k in node.keys:
            c = node.child.col(k)
            ndv = store_ndv(store, c.table, c.source) if c.table and c.source else None
            if not ndv:
                g = 0.0
                break
            g *= float(ndv)
        total += min(g, rows)
    return total


def too_big(store: Store, root, template: str | None = None) -> bool:
    """Whether the plan's operator state would hold more than ``MAX_STATE_GROUPS`` groups."""
    return state_groups(store, root, template) > MAX_STATE_GROUPS


def predict_init(store: Store, root, rows: float, bulk: bool, template: str | None = None,
                 measured: bool = True) -> float:
    """Predicted seconds to initialise the operator state of plan ``root`` over ``rows`` input rows
    (``measured=False``: at the kind's prior rate, module docstring).  A plan the driver cannot
    initialise (``bulk_arrow.shape_on_driver``) is priced by Spark initialisations alone: the
    driver loads SF1 lineitem's 1.5M orders in about 1.5 s, where a Spark initialisation of the
    same size takes about 4.6 s, so a price taken from the driver's would buy at a third of the cost."""
    on_driver = bulk and rows <= DRIVER_MAX_ROWS and shape_on_driver(lowest_aggregate(root))
    rate = (init_rate(store, bulk, spark_only=bulk and not on_driver, driver_only=on_driver) if measured
            else (BULK_INIT_ROWS_PER_S if bulk else INIT_ROWS_PER_S))
    return rows / rate + state_groups(store, root, template) / (DRIVER_GROUPS_PER_S if on_driver else GROUPS_PER_S)


def rent_of(store: Store, sketch_id: int) -> tuple[float, float]:
    """(recapture seconds spent on the chain so far, the last one) for a rented sketch version."""
    r = store.one("SELECT spent, last FROM maint_rent WHERE sketch_id=?", (sketch_id,))
    return (float(r["spent"]), float(r["last"])) if r else (0.0, 0.0)


def record_rent(store: Store, sketch_id: int, spent: float, last: float) -> None:
    with store.tx() as c:
        c.execute("INSERT OR REPLACE INTO maint_rent VALUES (?,?,?,?)", (sketch_id, spent, last, time.time()))
