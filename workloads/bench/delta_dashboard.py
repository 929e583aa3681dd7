"""Benchmark: a dashboard over Delta tables another writer keeps, plain against the advisor at its
default settings, side by side in one run (`advisor bench dashboard`).

Setup, as a user has such tables: TPC-H lineitem and orders from the project's generator
(``workloads.data.tpch``, tpchgen-cli) are written as Delta tables by plain Spark with delta-spark
in a process of their own (``python -m workloads.bench.delta_dashboard SPEC``: a SparkSession with
only Delta Lake on the classpath and Spark's default settings), in the generator's order (no sort,
no repartition), change data feed and deletion vectors on.  The same writer then commits to each
table, with plain SQL, once per segment boundary (``COMMITS``): new orders and their lineitems
(INSERT), a DELETE of some orders and their lineitems, an UPDATE of some orders and a MERGE
updating some lineitems.

The dashboard is ``workloads/bench/delta_dashboard.yaml`` (copied next to the tables, whose ``path:``
entries are relative to it): four templates round robin, 15 instances each with moving parameters,
imported at version 0 and replayed through the recorded commits (``delta_history``): one commit per
table between each segment of 15 queries.  NO-PS and CB-OPT-GB replay it one after the other, each
in a fresh process (one Spark JVM at a time); everything the advisor decides on (samples,
estimates, copies, captures, maintenance) is inside its total.  Then plain Spark reads each query's
tables at the versions the replay had reached (time travel) and answers it afresh in this process:
every step's answer is compared with NO-PS's and CB-OPT-GB's, and its time is reported beside theirs.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

WORKLOAD = Path(__file__).resolve().parent / "delta_dashboard.yaml"
TABLES = ("lineitem", "orders")
KEYS = {"lineitem": "l_orderkey", "orders": "o_orderkey"}
NEW_KEYS = 100_000_000  # inserted orders get keys above every generated one (SF 10: 60M)


def commits() -> list[tuple[str, str]]:
    """The other writer's commits, in order: (table, statement with ``{t}`` for the table and
    ``{cols:lineitem}`` / ``{cols:orders}`` for its column list).  One commit per table at each of
    the three segment boundaries."""
    return [
        # 1: new orders, copies of every 1,000th with new keys, their lineitems with 4 more items each
        ("lineitem", "INSERT INTO {t} SELECT {new:lineitem} FROM {t} WHERE l_orderkey % 1000 = 7"),
        ("orders", "INSERT INTO {t} SELECT {new:orders} FROM {t} WHERE o_orderkey % 1000 = 7"),
        # 2: some orders cancelled
        ("lineitem", "DELETE FROM {t} WHERE l_orderkey % 500 = 11"),
        ("orders", "DELETE FROM {t} WHERE o_orderkey % 500 = 11"),
        # 3: corrections: some lineitems' quantities (MERGE), some orders moved to a few customers (UPDATE)
        ("lineitem", "MERGE INTO {t} AS t USING (SELECT l_orderkey AS k, l_linenumber AS n FROM {t} "
                     "WHERE l_orderkey % 300 = 5) AS s ON t.l_orderkey = s.k AND t.l_linenumber = s.n "
                     "WHEN MATCHED THEN UPDATE SET l_quantity = t.l_quantity + 10"),
        ("orders", "UPDATE {t} SET o_custkey = (o_custkey % 100) * 30 + 1 WHERE o_orderkey % 300 = 5"),
    ]


def _new_rows(table: str, cols: list[str]) -> str:
    """The select list copying a table's rows as new orders (keys shifted; lineitems 4 more items)."""
    out = []
    for c in cols:
        if c == KEYS[table]:
            out.append(f"{c} + {NEW_KEYS} AS {c}")
        elif c == "l_quantity":
            out.append(f"{c} + 4 AS {c}")
        else:
            out.append(c)
    return ", ".join(out)


# ---------- the plain writer (its own process) ----------

def write_tables(spec: dict) -> dict:
    """Write ``spec["parquet"]`` ({table: generated Parquet file}) as Delta tables below
    ``spec["dest"]`` with plain Spark, then commit ``commits()``; returns {table: latest version}."""
    # start-up time: Spark and the Delta jars only where the tables are written (the writer's process)
    from pyspark.sql import SparkSession

    from advisor.engine.packages import jar_conf

    b = SparkSession.builder.appName("plain-delta-writer").config("spark.ui.enabled", "false")
    b = b.config("spark.driver.memory", spec.get("driver_memory", "2g"))
    for k, v in jar_conf().items():  # the Delta jars and its session extension, nothing of the advisor's
        b = b.config(k, v)
    s = b.getOrCreate()
    s.sparkContext.setLogLevel("ERROR")
    try:
        return write_with(s, spec)
    finally:
        s.stop()


def write_with(s, spec: dict) -> dict:
    """``write_tables`` in the SparkSession ``s``: the tables in the generator's order, then the commits."""
    dest = Path(spec["dest"])
    cols = {}
    for t in TABLES:
        df = s.read.parquet(spec["parquet"][t])
        cols[t] = df.columns
        (df.write.format("delta").option("delta.enableChangeDataFeed", "true")
         .option("delta.enableDeletionVectors", "true").save(str(dest / t)))
    for t, stmt in spec.get("commits", commits()):
        sql = stmt.replace("{t}", f"delta.`{dest / t}`")
        for u in TABLES:
            sql = sql.replace("{new:" + u + "}", _new_rows(u, cols[u]))
        s.sql(sql)
    return {t: int(s.sql(f"DESCRIBE HISTORY delta.`{dest / t}` LIMIT 1").first()["version"]) for t in TABLES}


def ensure_tables(base: Path, sf: float, fresh: bool, log) -> dict:
    """The Delta tables at ``base`` (written when missing, or ``fresh``): {"sf", "versions", "seconds"}."""
    # start-up time: the plain writer's process (``python -m`` this module) loads none of this
    from workloads.data.tpch import generate_tpch

    marker = base / "tables.json"
    if marker.exists() and not fresh:
        done = json.loads(marker.read_text())
        if done.get("sf") == sf and done.get("commits") == commits():
            return done
    for t in TABLES:
        shutil.rmtree(base / t, ignore_errors=True)
    marker.unlink(missing_ok=True)
    base.mkdir(parents=True, exist_ok=True)
    staging = base / "staging"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        t0 = time.perf_counter()
        log(f"generating TPC-H SF {sf:g} lineitem and orders (tpchgen-cli)")
        files = generate_tpch(sf, str(staging), list(TABLES))
        t_gen = time.perf_counter() - t0
        log("writing them as Delta tables with plain Spark, then the other writer's commits")
        t0 = time.perf_counter()
        spec = {"parquet": files, "dest": str(base), "commits": commits()}
        proc = subprocess.run([sys.executable, "-m", "workloads.bench.delta_dashboard", json.dumps(spec)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError("the plain Delta writer failed: " + (proc.stderr or proc.stdout).strip()[-2000:])
        versions = json.loads(proc.stdout.strip().splitlines()[-1])
        done = {"sf": sf, "versions": versions, "commits": commits(),
                "seconds": {"generate": round(t_gen, 2), "write": round(time.perf_counter() - t0, 2)}}
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    marker.write_text(json.dumps(done, indent=1))
    return done


# ---------- the replays ----------

def _child(options: dict, args: list[str], log_file: Path, env: dict | None = None) -> None:
    """One ``advisor`` command in a process of its own; its output goes to ``log_file``."""
    # start-up time: the plain writer's process (``python -m`` this module) loads none of this
    from workloads.replay.runner import child_argv

    with open(log_file, "a") as fh:
        rc = subprocess.run(child_argv(options) + args, stdout=fh, stderr=subprocess.STDOUT,
                            env=dict(os.environ, **(env or {}))).returncode
    if rc != 0:
        tail = log_file.read_text().strip().splitlines()[-5:]
        raise RuntimeError(f"`advisor {' '.join(args)}` failed (exit code {rc}): " + " | ".join(tail))


def run_replays(options: dict, ctx, workload: Path, run_dir: Path, strategies: list[str], log) -> dict:
    """Prepare the run in one process, then replay each strategy in a fresh process of its own,
    one after another; returns the finished run log (``run.json``)."""
    # start-up time: the plain writer's process (``python -m`` this module) loads none of this
    from workloads.replay.runner import PREPARE_ONLY, replay

    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    out = run_dir.parent / f"{run_dir.name}.log"
    out.write_text("")
    log("preparing the replay (importing the tables at version 0, statistics, drawing the steps)")
    _child(options, ["replay", str(workload), "--out", str(run_dir), "--no-report"], out, {PREPARE_ONLY: "1"})
    for s in strategies:
        log(f"replaying {s} in a process of its own")
        _child(options, ["replay", str(workload), "--strategies", s, "--out", str(run_dir), "--no-report"], out)
    replay(ctx, str(workload), strategies, out=str(run_dir), quiet=True)  # finds every step done: run.json
    return json.loads((run_dir / "run.json").read_text())


def bare_spark(spark, base: Path, doc: dict) -> list[dict]:
    """Plain Spark on the same tables: each query step's tables read at the versions the replay had
    reached (time travel), the query answered afresh; [{step, digest, seconds}]."""
    # start-up time: the plain writer's process (``python -m`` this module) loads none of this
    from advisor.serve.decision_record import digest

    at = {t: int(doc["initial_versions"][t]) for t in TABLES}
    out, shown = [], {}
    for s in doc["steps"]:
        if s["kind"] == "update":
            at[s["table"]] = int(s["version"])
            continue
        t0 = time.perf_counter()
        for t in TABLES:  # a table is loaded again when its version moved (a session keeps it otherwise)
            if shown.get(t) != at[t]:
                (spark.read.format("delta").option("versionAsOf", at[t]).load(str(base / t))
                 .createOrReplaceTempView(f"bare_{t}"))
                shown[t] = at[t]
        sql = s["sql"]
        for t in TABLES:
            sql = _rename(sql, t, f"bare_{t}")
        rows = [tuple(r) for r in spark.sql(sql).collect()]
        out.append({"step": s["step"], "digest": digest(rows), "seconds": round(time.perf_counter() - t0, 4),
                    "versions": dict(at)})
    return out


def _rename(sql: str, table: str, to: str) -> str:
    """``sql`` with the table ``table`` renamed ``to`` (sqlglot; columns keep their names).

    >>> _rename("SELECT a FROM lineitem JOIN orders ON a = b", "lineitem", "x")
    'SELECT a FROM x JOIN orders ON a = b'
    """
    # start-up time: the plain writer's process (``python -m`` this module) loads none of this
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(sql, read="spark")
    for node in tree.find_all(exp.Table):
        if node.name.lower() == table:
            node.set("this", exp.to_identifier(to))
    return tree.sql(dialect="spark")


# ---------- the result ----------

def summary(doc: dict, bare: list[dict] | None, tables: dict) -> dict:
    """Totals, ratio, answers equal, actions and rows read; per template seconds, actions and its
    decision lines (the first instance's and the most common)."""
    sm = doc["summary"]["per_strategy"]
    plain, adv = sm["NO-PS"], sm["CB-OPT-GB"]
    by = collections.defaultdict(dict)
    for q in doc["queries"]:
        by[q["step"]][q["strategy"]] = q
    equal = sum(1 for x in by.values() if x["CB-OPT-GB"]["result"]["digest"] == x["NO-PS"]["result"]["digest"])
    res = {"sf": tables["sf"], "tables": tables, "queries": len(by),
           "segments": 1 + sum(1 for s in doc["steps"] if s["kind"] == "update") // len(TABLES),
           "commits_met": [{"after_query": sum(1 for p in doc["steps"][:i] if p["kind"] == "query"),
                            "table": s["table"], "version": s["version"], "inserts": s.get("inserts"),
                            "deletes": s.get("deletes")}
                           for i, s in enumerate(doc["steps"]) if s["kind"] == "update"],
           "plain_seconds": plain["cumulative_seconds"], "advisor_seconds": adv["cumulative_seconds"],
           "ratio": adv["vs_no_ps"], "answers_equal": equal,
           "maintained_equal_to_recapture": doc["summary"]["maintained_equal_to_recapture"],
           "captured": adv["captured"], "reused": adv["reused"], "no_go": adv["no_go"], "plain_runs": adv["plain"],
           "rows_read": {"NO-PS": plain["rows_read"], "CB-OPT-GB": adv["rows_read"]},
           "advisor_phases": adv["seconds"], "maintenance_events": adv["maintenance_events"], "templates": {}}
    if bare is not None:
        bd = {b["step"]: b for b in bare}
        res["bare_spark_seconds"] = round(sum(b["seconds"] for b in bare), 3)
        res["ratio_to_bare_spark"] = round(adv["cumulative_seconds"] / res["bare_spark_seconds"], 4)
        res["answers_equal_bare_spark"] = sum(
            1 for st, x in by.items() if st in bd and x["NO-PS"]["result"]["digest"] == bd[st]["digest"]
            and x["CB-OPT-GB"]["result"]["digest"] == bd[st]["digest"])
    maint = collections.Counter()
    for m in doc.get("maintenance", []):
        if m.get("strategy") == "CB-OPT-GB" and m.get("how") != "current":
            maint[m.get("how")] += 1
    res["maintenance_how"] = dict(maint)
    for step in sorted(by):
        x = by[step]
        name = x["NO-PS"]["template"]
        t = res["templates"].setdefault(name, {"plain_seconds": 0.0, "advisor_seconds": 0.0, "actions": {},
                                               "rows_read": {"NO-PS": 0, "CB-OPT-GB": 0}, "reasons": [],
                                               "equal": 0, "n": 0})
        a = x["CB-OPT-GB"]
        t["n"] += 1
        t["equal"] += a["result"]["digest"] == x["NO-PS"]["result"]["digest"]
        t["plain_seconds"] += x["NO-PS"]["seconds"]["total"]
        t["advisor_seconds"] += a["seconds"]["total"]
        t["rows_read"]["NO-PS"] += x["NO-PS"]["scan"]["rows"]
        t["rows_read"]["CB-OPT-GB"] += a["scan"]["rows"]
        act = a["decision"]["action"]
        t["actions"][act] = t["actions"].get(act, 0) + 1
        t["reasons"].append(f"{act}: {a['decision']['reason']}")
    for t in res["templates"].values():
        t["plain_seconds"], t["advisor_seconds"] = round(t["plain_seconds"], 3), round(t["advisor_seconds"], 3)
        t["ratio"] = round(t["advisor_seconds"] / t["plain_seconds"], 3) if t["plain_seconds"] else None
        reasons = t.pop("reasons")
        t["first_decision"] = reasons[0]
        t["typical_decision"] = collections.Counter(_shape(r) for r in reasons).most_common(1)[0][0]
        t["decisions"] = reasons
    return res


def _shape(reason: str) -> str:
    """A decision line with its numbers blanked, so instances of one kind of decision count together.

    >>> _shape("reuse: reused sketch 12 (0.4 %)")
    'reuse: reused sketch # (#.# %)'
    """
    return re.sub(r"\d", "#", re.sub(r"\d+", "#", reason))


def bench_dashboard(options: dict, ctx, sf: float, fresh: bool, bare: bool, log) -> dict:
    """The whole benchmark: tables (written once per scale factor, kept), the replays, plain Spark."""
    base = Path(ctx.warehouse) / "bench-dashboard" / f"sf{sf:g}"
    tables = ensure_tables(base, sf, fresh, log)
    workload = base / WORKLOAD.name
    shutil.copyfile(WORKLOAD, workload)  # beside the tables: its relative paths name them
    t0 = time.perf_counter()
    doc = run_replays(options, ctx, workload, base / "run", ["NO-PS", "CB-OPT-GB"], log)
    wall = time.perf_counter() - t0
    doc["initial_versions"] = json.loads((base / "run" / "plan.json").read_text())["initial_versions"]
    bare_rows = None
    if bare:
        log("plain Spark on the same tables, at each step's versions")
        bare_rows = bare_spark(ctx.spark, base, doc)
    res = summary(doc, bare_rows, tables)
    res["replay_wall_seconds"] = round(wall, 1)
    res["run_dir"] = str(base / "run")
    if bare_rows is not None:
        res["bare_spark"] = bare_rows
    return res


def render(console, res: dict) -> None:
    p = lambda *a: console.print(*a, highlight=False, markup=False, soft_wrap=True)  # noqa: E731
    p(f"Delta dashboard, TPC-H SF {res['sf']:g}: {res['queries']} queries in {res['segments']} segments; "
      f"commits met between segments: " + ", ".join(
          f"{c['table']} v{c['version']} after query {c['after_query']}" for c in res["commits_met"]))
    p(f"{'':18s} {'NO-PS':>10s} {'CB-OPT-GB':>10s}")
    p(f"{'total seconds':18s} {res['plain_seconds']:>10.1f} {res['advisor_seconds']:>10.1f}   "
      f"ratio {res['ratio']:.3f}x")
    p(f"{'rows read':18s} {res['rows_read']['NO-PS']:>10,} {res['rows_read']['CB-OPT-GB']:>10,}")
    p(f"answers equal to plain: {res['answers_equal']}/{res['queries']}; sketches captured {res['captured']}, "
      f"reused {res['reused']}, no-go {res['no_go']}, plain {res['plain_runs']}; maintenance runs "
      f"{res['maintenance_events']} {res['maintenance_how']}; maintained equal to recapture: "
      f"{res['maintained_equal_to_recapture']}")
    ph = res["advisor_phases"]
    p("advisor's seconds by phase: " + ", ".join(f"{k} {v:.1f}" for k, v in ph.items()))
    if "bare_spark_seconds" in res:
        p(f"plain Spark on the same tables (time travel to each step's versions): {res['bare_spark_seconds']:.1f} s; "
          f"advisor / plain Spark {res['ratio_to_bare_spark']:.3f}x; answers equal to plain Spark: "
          f"{res['answers_equal_bare_spark']}/{res['queries']}")
    for name, t in res["templates"].items():
        acts = ", ".join(f"{k} {v}" for k, v in sorted(t["actions"].items()))
        p(f"  {name}: {t['plain_seconds']:.1f} s -> {t['advisor_seconds']:.1f} s ({t['ratio']:.2f}x), rows "
          f"{t['rows_read']['NO-PS']:,} -> {t['rows_read']['CB-OPT-GB']:,}; {acts}; equal {t['equal']}/{t['n']}")
        p(f"    first: {t['first_decision'][:300]}")
        p(f"    typical: {t['typical_decision'][:300]}")


if __name__ == "__main__":
    print(json.dumps(write_tables(json.loads(sys.argv[1]))), flush=True)
