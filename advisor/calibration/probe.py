"""A probe of one Spark job's fixed cost: the same shape as the advisor's queries (scan, group,
HAVING, collect) over a one-file table of a few dozen rows, so that nearly all of its time is what
every job pays regardless of how much it reads (planning, task launch, opening a file, the shuffle).

Why: the cost model saves only the per-row part of a query and charges the fixed part to every
extra job a sketch causes (``advisor.calibration.measured_costs``).  The fit of ``seconds = fixed + per_row * rows``
over logged runs cannot identify the fixed part until runs of very different sizes exist, and until
then the model took it as zero.  On the demo's TPC-H SF0.1 a plain run took 0.25 s, nearly all of it
fixed, so a sketch reading 24 % of the rows looked like saving 0.19 s a use; it was captured and its
runs took 0.21-0.66 s.  The probe measures the fixed part directly and ``calibrate`` uses the store's
newest probe as one more (rows, seconds) point, and as the fixed cost when the fit cannot identify
one.  It runs when asked (``advisor calibrate``) and when a replay with measured costs prepares its
warehouse (before the strategies' stores are cloned from it); never inside ``recommend``, so that an
unprobed store decides without timing, as the tests rely on.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from typing import TYPE_CHECKING

import pyarrow as pa

from advisor.warehouse import filesystem, stored_paths

if TYPE_CHECKING:
    from advisor.context import Context
    from advisor.warehouse.store import Store

PROBE_ROWS = 64
PROBE_RUNS = 6   # the first two pay the JVM's warm-up for this plan shape and are not counted
WARMUP_RUNS = 2


def latest_probe(store: Store) -> dict | None:
    """The newest probe record in the store's run log, or None."""
    r = store.one("SELECT record_json FROM runs WHERE kind='probe' ORDER BY id DESC LIMIT 1")
    if r is None:
        return None
    try:
        rec = json.loads(r["record_json"])
    except ValueError:
        return None
    return rec if isinstance(rec, dict) and rec.get("seconds") and rec.get("rows_read") else None


def measure_job_cost(spark, root, runs: int = PROBE_RUNS) -> dict:
    """Run the probe query ``runs`` times over a fresh ``PROBE_ROWS``-row Parquet file under ``root``
    (the warehouse root, a local directory or a URI the executors read);
    the record: the median of the runs after the warm-up ones (``seconds``; in a fresh JVM the first
    run took 4.1 s and the second 0.5 s, against 0.2-0.3 s after), the rows read, all run times."""


    d = stored_paths.join(str(root), "_probe")
    fs = filesystem.for_path(d, spark)
    fs.mkdirs(d)
    tmp = f"{d}/.{uuid.uuid4().hex}.parquet.tmp"
    path = f"{d}/{uuid.uuid4().hex}.parquet"
    filesystem.write_parquet(pa.table({"k": [i % 8 for i in range(PROBE_ROWS)], "v": list(range(PROBE_ROWS))}),
                             tmp, spark)
    fs.rename(tmp, path)
    sql = (f"SELECT k, sum(v) AS s FROM parquet.`{path}` GROUP BY k "
           f"HAVING count(*) > 0")
    times = []
    try:
        for _ in range(max(WARMUP_RUNS + 1, runs)):
            t0 = time.perf_counter()
            spark.sql(sql).collect()
            times.append(time.perf_counter() - t0)
    finally:
        fs.remove(path)
    return {"seconds": statistics.median(times[WARMUP_RUNS:]), "rows_read": PROBE_ROWS,
            "runs": [round(t, 4) for t in times], "app": spark.sparkContext.applicationId}


def record_probe(ctx: Context) -> dict:
    """Measure the job cost with the context's Spark session and log it in the store (kind 'probe')."""
    rec = measure_job_cost(ctx.spark, ctx.store.root)
    ctx.store.log_run("probe", None, rec)
    return rec
