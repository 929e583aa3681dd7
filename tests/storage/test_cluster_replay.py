"""The CI workload replayed through the CLI on a standalone cluster of two workers with the
warehouse on HDFS: ``advisor --master spark://... --warehouse hdfs://... replay``.

Each worker runs in a mount namespace of its own with an empty tmpfs over the test run's temporary
directory (``cluster_helpers``): its executors see neither the driver's run directory, store and
scratch space nor the other worker's directories, so every file they read or write has to be on
HDFS.  The workload is ``workloads/ci.yaml`` with three of its queries and one of its batches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from cluster_helpers import standalone_cluster

pytestmark = [pytest.mark.cluster, pytest.mark.storage]

ROOT = Path(__file__).resolve().parents[2]


def _workload(path: Path) -> Path:
    """``workloads/ci.yaml`` with a short hand-written order of its own templates and update batch:
    a top-k query, a HAVING query, the batch, and the top-k query again with a smaller k, which
    reuses the sketch of the first one once it is maintained (the one layout it skips through)."""
    wl = yaml.safe_load((ROOT / "workloads" / "ci.yaml").read_text())
    (batch,) = wl.pop("updates")
    del wl["queries"]
    wl["sequence"] = [{"query": "top_areas"}, {"query": "arrest_wards"},
                      {"update": {k: batch[k] for k in ("table", "inserts", "deletes")}}, {"query": "top_areas"}]
    wl["layouts"] = ["crimes.community_area"]
    path.write_text(yaml.safe_dump(wl, sort_keys=False))
    return path


def _hdfs_files(spark, uri: str) -> list[str]:
    jvm = spark.sparkContext._jvm
    p = jvm.org.apache.hadoop.fs.Path(uri)
    fs = p.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    it, out = fs.listFiles(p, True), []
    while it.hasNext():
        out.append(it.next().getPath().toUri().getPath())
    return out


def _finished_apps(c, timeout: float = 60) -> list[dict]:
    """The master's finished applications, once the replay's has finished: the CLI returns before
    its driver JVM has unregistered (a shutdown hook), so one status read can still show it running."""
    end = time.time() + timeout
    while True:
        state = c.state()  # one snapshot: two reads could miss an app moving from active to completed
        if not state["activeapps"] or time.time() > end:
            return state["completedapps"] + state["activeapps"]
        time.sleep(0.5)


def test_ci_workload_replays_on_two_workers_with_the_warehouse_on_hdfs(spark, hdfs, tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    driver = tmp_path_factory.mktemp("driver")
    for d in ("tmp", "spark", "cwd"):
        (driver / d).mkdir()
    wh = f"{hdfs}/cluster-warehouse"
    run = driver / "run"
    with standalone_cluster(tmp_path_factory.mktemp("cluster"), workers=2, cores=1, memory="1g", hide=base) as c:
        env = dict(os.environ, ADVISOR_STORE_DIR=str(driver / "store"), TMPDIR=str(driver / "tmp"),
                   SPARK_LOCAL_IP="127.0.0.1")
        conf = {"spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2",
                "spark.driver.memory": "1g", "spark.local.dir": str(driver / "spark"),
                "spark.sql.shuffle.partitions": "4",
                # both workers are on 127.0.0.1, so Spark would take them for one host and read the
                # other's shuffle files from its disk, which separate machines cannot
                "spark.shuffle.readHostLocalDisk": "false"}
        argv = [sys.executable, "-m", "advisor.cli", "--master", c.url, "--warehouse", wh,
                *[a for k, v in conf.items() for a in ("--conf", f"{k}={v}")],
                "replay", str(_workload(driver / "ci.yaml")), "--out", str(run)]
        r = subprocess.run(argv, env=env, cwd=driver / "cwd", capture_output=True, text=True, timeout=1200)
        log = driver / "store" / "logs" / "advisor.log"
        assert r.returncode == 0, (r.stderr[-3000:], log.read_text()[-5000:] if log.exists() else "")
        apps = _finished_apps(c)
        workers = c.worker_states()
        if c.isolated:  # the workers' directories live in their own namespaces only
            assert not any(d.exists() for d in c.worker_dirs)

    assert [a["state"] for a in apps] == ["FINISHED"], apps
    # each worker ran an executor of the replay
    assert all(len(w["finishedexecutors"] + w["executors"]) >= 1 for w in workers), workers

    doc = json.loads((run / "run.json").read_text())
    assert doc["status"] == "complete" and doc["environment"]["master"] == c.url
    sm = doc["summary"]
    assert sm["answers_identical"], sm["mismatches"]
    assert sm["maintained_equal_to_recapture"]
    per = sm["per_strategy"]
    assert per["CB-OPT-GB"]["captured"] >= 1 and per["CB-OPT-GB"]["rows_read"] < per["NO-PS"]["rows_read"]
    maintained = [m for m in doc["maintenance"] if m["how"] != "current"]
    assert maintained and all(m["equal_to_recapture"] is True for m in maintained), doc["maintenance"]
    assert (run / "report.html").stat().st_size > 0

    # the tables, batches, layouts and samples are on HDFS, below the warehouse URI; none on the driver
    files = _hdfs_files(spark, f"{wh}/runs")
    parquet = [f for f in files if f.endswith(".parquet")]
    assert any("/warehouse/tables/crimes/v000001_base" in f for f in parquet), files
    assert any("/warehouse/tables/crimes/layout_community_area" in f for f in parquet), files
    assert any("/strategies/CB-OPT-GB/tables/crimes/samples/" in f for f in parquet), files
    assert not [p for p in driver.rglob("*") if p.suffix == ".parquet" or p.name.startswith("part-")]
