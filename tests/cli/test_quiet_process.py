"""The CLI as a separate process: no JVM or Spark start-up line on the terminal (they go to
WAREHOUSE/logs/advisor.log), ``--json`` output that is pure JSON, one line for a Spark runtime error,
and no process left behind when the CLI is killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wh(spark, tmp_path_factory):
    from advisor.warehouse.catalog import Catalog
    from advisor.warehouse.store import Store

    d = tmp_path_factory.mktemp("quietwh")
    Catalog(spark, Store(d)).create_table("nation", spark.createDataFrame(
        pd.DataFrame({"n_nationkey": range(25), "n_name": [f"N{i}" for i in range(25)]})))
    return d


def advisor(wh, *args, **kw):
    env = dict(os.environ, PYTHONPATH=str(ROOT), SPARK_MASTER="local[1]")
    return subprocess.Popen([sys.executable, "-m", "advisor.cli", "--warehouse", str(wh), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_json_output_is_pure_and_stderr_empty_and_a_runtime_error_is_one_line(wh):
    ok = advisor(wh, "run", "SELECT count(*) AS n FROM nation", "--json")
    bad = None
    out, err = ok.communicate(timeout=600)
    assert ok.returncode == 0, err
    assert err == ""
    assert json.loads(out)["rows"] == [[25]]
    bad = advisor(wh, "run", "SELECT n_name FROM nation WHERE n_nationkey / 0 > 1")
    out, err = bad.communicate(timeout=600)
    assert bad.returncode == 2
    assert err.count("\n") == 1 and "DIVIDE_BY_ZERO" in err and err.startswith("error: "), err
    log = (wh / "logs" / "advisor.log").read_text()
    assert "Using incubator modules" in log or "log level" in log  # the JVM's lines went to the log


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("after", [0.0, 3.0])  # as its JVM starts, and while it runs a job
def test_no_process_outlives_a_killed_cli(wh, after):
    # a query long enough to be running when the CLI is killed
    p = advisor(wh, "run", "SELECT count(*) AS n FROM range(0, 2000000000) a", start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline and not _has_java_child(p.pid):
        time.sleep(0.5)
    assert _has_java_child(p.pid), "the CLI never started its JVM"
    time.sleep(after)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    deadline = time.time() + 30
    while time.time() < deadline and _alive(p.pid):
        time.sleep(0.5)
    assert not _alive(p.pid), "processes of the killed CLI are still running"


def _has_java_child(pid: int) -> bool:
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
                comm = (d / "comm").read_text().strip()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and comm == "java":
                return True
    return False
