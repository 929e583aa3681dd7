"""Benchmark: the warehouse's own versioned store against a Delta Lake table holding the same rows,
side by side in one run.

TPC-H lineitem is stored both ways: the own store (Parquet base, batch files, net blocks) and a Delta
table with the Change Data Feed, deletion vectors and row tracking, written from the same snapshot in
the same row order.  A HAVING query on l_orderkey is sketched on each; then for each of ``batches``
update batches (fresh inserts and deletes of existing rows, the same rows on both sides: the own
store applies them as a batch, Delta commits them as an append and a MERGE delete) the sketch is
maintained incrementally (the own store's batch files against Delta's change feed, read on the
driver from the log) and the query run plain and
sketched; the captures are repeated ``reps`` times, sides interleaved, and their median counts.  Printed per store: the sketched-over-plain use ratio, maintenance seconds per batch,
(maintenance + sketched run) over a plain run per batch, with rows read, and the replay ratio of the
workload "query, then (batch, query) per batch" -- CB-OPT-GB's cumulative seconds (capture, then
maintenance and sketched run per batch) over NO-PS's (a plain run per query); both stores' answers
must agree at every version.  On the Delta side the advisor's plain run (wall seconds from parsing
through reading the log for the current version) is set against plain Spark reading the same table
afresh, interleaved, after the capture and after every batch.

Then clustering, on a second query that the stored order does not serve (HAVING by l_suppkey): the
advisor's clustered copy of the own table against Delta's ``OPTIMIZE ... ZORDER BY`` of the Delta
table, each priced by the bytes it wrote and judged by the rows a fresh sketch's run then reads:
rows skipped per MB written.
"""

from __future__ import annotations

import shutil
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from advisor.engine.execute import versions_now
from advisor.layout.clustered_copy import build_layout
from advisor.maintain.spark.service import maintain_sketch
from advisor.plan.parse import parse_sql
from advisor.sketch.capture import capture
from advisor.sketch.run import run_query
from advisor.warehouse.imports import import_table
from advisor.warehouse.sketch_records import load_sketch
from workloads.data.datasets import load_dataset

if TYPE_CHECKING:
    from advisor.context import Context

SQL = "SELECT l_orderkey, sum(l_quantity) AS q FROM {t} GROUP BY l_orderkey HAVING sum(l_quantity) > 300"
ON = "l_orderkey"
# About a tenth of the suppliers at SF0.1 (about 600 rows each, sum(l_quantity) about 15,300).
CLUSTER_SQL = "SELECT l_suppkey, sum(l_quantity) AS q FROM {t} GROUP BY l_suppkey HAVING sum(l_quantity) > 16500"
CLUSTER_ON = "l_suppkey"
KEY_OFFSET = 1_000_000_000  # inserted rows get new order keys, so both stores can delete by key


def _run(cat, sql: str, schema, sketch=None):
    q = parse_sql(sql, schema)
    return run_query(cat, q, versions_now(cat, q), sketch=sketch)


def _timed(f):
    """(f(), wall seconds of the call)."""
    t0 = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t0


def _bare(spark, dpath: str) -> tuple[list, float]:
    """The query run by plain Spark on the Delta table at ``dpath`` (read afresh, as a job would):
    (sorted rows, wall seconds)."""
    t0 = time.perf_counter()
    spark.read.format("delta").load(dpath).createOrReplaceTempView("bench_bare")
    rows = spark.sql(SQL.format(t="bench_bare")).collect()
    return sorted(repr(tuple(r)) for r in rows), time.perf_counter() - t0


def _plain_vs_bare(cat, spark, sql: str, schema, dpath: str, reps: int) -> tuple[float, float, bool]:
    """Medians of the advisor's plain run (wall seconds, from parsing through reading the log for
    the current version) and of plain Spark on the same Delta table, interleaved; and whether
    their answers agree."""
    ours, bare, same = [], [], True
    for _ in range(reps):
        r, t = _timed(lambda: _run(cat, sql, schema))
        rows, tb = _bare(spark, dpath)
        ours.append(t)
        bare.append(tb)
        same = same and sorted(map(repr, r.rows)) == rows
    return statistics.median(ours), statistics.median(bare), same


def bench_store(ctx: Context, sf: float, batches: int, inserts: int, deletes: int, reps: int, console=None) -> dict:
    cat, spark = ctx.catalog, ctx.spark
    if not cat.exists("lineitem"):
        load_dataset(cat, "tpch", sf=sf)
    cols = [c for c, _ in cat.schema("lineitem")]
    own = "lineitem"
    dpath = str(ctx.warehouse / "bench-delta" / "lineitem")
    shutil.rmtree(dpath, ignore_errors=True)
    t0 = time.perf_counter()
    n_files = len(cat.data_files(own) if cat.is_delta(own) else
                  [f for f in (ctx.warehouse / "tables").glob(f"{own}/v*_base/*.parquet")]) or 1
    (cat.read(own).select(*cols).coalesce(n_files).write.format("delta")
     .option("delta.enableChangeDataFeed", "true").option("delta.enableDeletionVectors", "true")
     .option("delta.enableRowTracking", "true").save(dpath))
    t_write = time.perf_counter() - t0
    import_table(cat, "lineitem_delta", dpath, "delta")
    schema = ctx.schema_lookup()
    sides = {"own store": own, "delta": "lineitem_delta"}
    res: dict = {"sf": sf, "rows": cat.version(own).rows, "delta_write_seconds": round(t_write, 2), "sides": {}}
    for t in sides.values():
        _run(cat, SQL.format(t=t), schema)  # warm-up: file listing, JIT
    caps: dict = {label: [] for label in sides}
    for _ in range(reps):  # captures interleaved: one capture's seconds on a 2-core VM vary by +-30 %
        for label, t in sides.items():
            q = parse_sql(SQL.format(t=t), schema)
            caps[label].append(capture(cat, q, {t: ON}, 1000, versions_now(cat, q)))
    for label, t in sides.items():
        sql = SQL.format(t=t)
        cap = caps[label][-1]
        plain = [_run(cat, sql, schema) for _ in range(reps)]
        sk = [_run(cat, sql, schema, cap.sketch) for _ in range(reps)]
        res["sides"][label] = {
            "capture_seconds": round(statistics.median(c.seconds for c in caps[label]), 3),
            "plain_seconds": statistics.median(r.seconds for r in plain),
            "sketched_seconds": statistics.median(r.seconds for r in sk),
            "plain_rows_read": plain[0].metrics.rows_read, "sketched_rows_read": sk[0].metrics.rows_read,
            "plain_files": plain[0].metrics.files_read, "sketched_files": sk[0].metrics.files_read,
            "answer": sorted(map(repr, sk[0].rows)), "batches": [], "sketch_id": cap.sketch.id}
        if cat.is_delta(t):
            ours, bare, same = _plain_vs_bare(cat, spark, sql, schema, dpath, reps)
            res["sides"][label].update({"plain_wall_seconds": round(ours, 3), "bare_spark_seconds": round(bare, 3),
                                        "bare_same_answer": same})
    agree = res["sides"]["own store"].pop("answer") == res["sides"]["delta"].pop("answer")
    for b in range(batches):
        cur = cat.read(own, with_rid=True)
        ins = (cur.sample(False, min(1.0, 3.0 * inserts / res["rows"]), seed=b).limit(inserts).select(*cols)
               .withColumn("l_orderkey", F.col("l_orderkey") + F.lit(KEY_OFFSET * (b + 1))))
        gone = cur.sample(False, min(1.0, 3.0 * deletes / res["rows"]), seed=b + 7919).limit(deletes)
        gone = gone.select("_rid", "l_orderkey", "l_linenumber").localCheckpoint()
        ins = ins.localCheckpoint()
        cat.apply_frames(own, ins, gone.select("_rid"))
        ins.write.format("delta").mode("append").save(dpath)
        gone.select("l_orderkey", "l_linenumber").createOrReplaceTempView("bench_gone")
        spark.sql(f"MERGE INTO delta.`{dpath}` t USING bench_gone g ON t.l_orderkey = g.l_orderkey "
                  "AND t.l_linenumber = g.l_linenumber WHEN MATCHED THEN DELETE")
        answers = {}
        for label, t in sides.items():
            sql = SQL.format(t=t)
            side = res["sides"][label]
            t0 = time.perf_counter()
            done = maintain_sketch(cat, side["sketch_id"])
            t_maint = time.perf_counter() - t0
            side["sketch_id"] = done.new_id
            plain = _run(cat, sql, schema)
            run = _run(cat, sql, schema, load_sketch(cat.store, done.new_id))
            answers[label] = sorted(map(repr, run.rows))
            side["batches"].append({"maintain_seconds": round(t_maint, 3), "how": done.how,
                                    "plain_seconds": round(plain.seconds, 3), "sketched_seconds": round(run.seconds, 3),
                                    "sketched_rows_read": run.metrics.rows_read, "plain_rows_read": plain.metrics.rows_read,
                                    "same_as_plain": answers[label] == sorted(map(repr, plain.rows))})
        agree = agree and answers["own store"] == answers["delta"]
        ours, bare, same = _plain_vs_bare(cat, spark, SQL.format(t=sides["delta"]), schema, dpath, 1)
        res["sides"]["delta"]["batches"][-1].update({"plain_wall_seconds": round(ours, 3),
                                                     "bare_spark_seconds": round(bare, 3), "bare_same_answer": same})
        if console is not None:
            console.print(f"batch {b + 1}: " + "; ".join(
                f"{label} maintain {s['batches'][-1]['maintain_seconds']:.2f}s" for label, s in res["sides"].items()))
    for s in res["sides"].values():
        bs = s["batches"]
        s["use_ratio"] = round(s["sketched_seconds"] / s["plain_seconds"], 3)
        if bs:
            s["maintain_median_seconds"] = statistics.median(x["maintain_seconds"] for x in bs)
            s["per_batch_ratio"] = round(sum(x["maintain_seconds"] + x["sketched_seconds"] for x in bs)
                                         / sum(x["plain_seconds"] for x in bs), 3)
        plain_total = s["plain_seconds"] + sum(x["plain_seconds"] for x in bs)
        sketched_total = s["capture_seconds"] + sum(x["maintain_seconds"] + x["sketched_seconds"] for x in bs)
        s["replay_ratio"] = round(sketched_total / plain_total, 3)
        if "bare_spark_seconds" in s:
            ours = [s["plain_wall_seconds"]] + [x["plain_wall_seconds"] for x in bs]
            bare = [s["bare_spark_seconds"]] + [x["bare_spark_seconds"] for x in bs]
            s["plain_over_bare"] = round(statistics.median(ours) / statistics.median(bare), 3)
    res["replay_ratio_delta_over_own"] = round(res["sides"]["delta"]["replay_ratio"]
                                               / res["sides"]["own store"]["replay_ratio"], 3)
    if res["sides"]["delta"]["batches"]:
        res["maintain_delta_over_own"] = round(res["sides"]["delta"]["maintain_median_seconds"]
                                               / max(res["sides"]["own store"]["maintain_median_seconds"], 1e-9), 3)
    res["answers_agree"] = agree
    res["clustering"] = _clustering(ctx, sides, dpath, schema)
    return res


def _clustering(ctx: Context, sides: dict, dpath: str, schema) -> dict:
    """The advisor's clustered copy against Delta's ZORDER on ``CLUSTER_ON``: bytes written, and
    rows read by a sketch captured after clustering (``CLUSTER_SQL``); both answers equal plain."""
    cat, spark = ctx.catalog, ctx.spark
    out, n_files = {}, 1
    for label, t in sorted(sides.items(), key=lambda kv: cat.is_delta(kv[1])):  # the copy first: its file count
        sql = CLUSTER_SQL.format(t=t)
        before = _run(cat, sql, schema)
        t0 = time.perf_counter()
        if cat.is_delta(t):
            # Delta skips whole files by their statistics; its default target (1 GB files) makes one
            # file of a table this size, so the target is set to give as many files as the copy has
            size = int(spark.sql(f"DESCRIBE DETAIL delta.`{dpath}`").first()["sizeInBytes"])
            key = "spark.databricks.delta.optimize.maxFileSize"
            spark.conf.set(key, str(max(1 << 20, size // n_files)))
            try:
                spark.sql(f"OPTIMIZE delta.`{dpath}` ZORDER BY ({CLUSTER_ON})")
            finally:
                spark.conf.unset(key)
            metrics = spark.sql(f"DESCRIBE HISTORY delta.`{dpath}` LIMIT 1").first()["operationMetrics"]
            written = int(metrics.get("numAddedBytes", 0))
            how = f"OPTIMIZE ZORDER BY ({metrics.get('numAddedFiles')} files)"
        else:
            lay = build_layout(cat, t, CLUSTER_ON)
            files = list(Path(lay["path"]).rglob("*.parquet"))
            written, n_files = sum(f.stat().st_size for f in files), len(files)
            how = f"clustered copy ({n_files} files)"
        secs = time.perf_counter() - t0
        q = parse_sql(sql, schema)
        cap = capture(cat, q, {t: CLUSTER_ON}, 1000, versions_now(cat, q))
        run = _run(cat, sql, schema, cap.sketch)
        skipped = before.metrics.rows_read - run.metrics.rows_read
        out[label] = {"how": how, "seconds": round(secs, 2), "bytes_written": written,
                      "plain_rows_read": before.metrics.rows_read, "sketched_rows_read": run.metrics.rows_read,
                      "sketch_fragments": len(cap.sketch.parts[0].fragments),
                      "rows_skipped_per_mb": round(skipped / max(written / 1e6, 1e-9), 1),
                      "same_as_plain": sorted(map(repr, run.rows)) == sorted(map(repr, before.rows))}
    return out


def render(console, res: dict) -> None:
    console.print(f"TPC-H SF{res['sf']} lineitem, {res['rows']:,} rows; both stores answer alike: {res['answers_agree']}")
    for label, s in res["sides"].items():
        console.print(
            f"{label:9s}: plain {s['plain_seconds']:.2f}s, sketched {s['sketched_seconds']:.2f}s "
            f"(use ratio {s['use_ratio']:.2f}; rows read {s['plain_rows_read']:,} -> {s['sketched_rows_read']:,}, "
            f"files {s['plain_files']} -> {s['sketched_files']}); capture {s['capture_seconds']:.2f}s; "
            f"maintenance per batch (median) {s.get('maintain_median_seconds', 0):.2f}s; "
            f"(maintenance + sketched) / plain per batch {s.get('per_batch_ratio', float('nan')):.2f}; "
            f"replay ratio {s.get('replay_ratio', float('nan')):.2f}")
    d = res["sides"]["delta"]
    if "plain_over_bare" in d:
        console.print(f"delta    : the advisor's plain run over plain Spark reading the same table {d['plain_over_bare']:.3f} "
                      f"(medians of wall seconds; answers agree: {d['bare_same_answer']}); replay ratio over the own "
                      f"store's {res['replay_ratio_delta_over_own']:.3f}; maintenance median over the own store's "
                      f"{res.get('maintain_delta_over_own', float('nan')):.2f}")
    for label, c in res.get("clustering", {}).items():
        console.print(
            f"{label:9s}: {c['how']} on {CLUSTER_ON} in {c['seconds']:.2f}s, {c['bytes_written'] / 1e6:.1f} MB written; "
            f"sketch ({c['sketch_fragments']} of 1000 fragments) reads {c['plain_rows_read']:,} -> {c['sketched_rows_read']:,} rows "
            f"({c['rows_skipped_per_mb']:,.0f} rows skipped per MB written); answers equal plain: {c['same_as_plain']}")
