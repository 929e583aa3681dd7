"""A real standalone Spark cluster (master + worker from pyspark's own jars on 127.0.0.1),
driven through the same session factory via the CLI's --master flag."""

import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from cluster_helpers import free_port, wait_port

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    home = Path(pyspark.__file__).parent
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1",
               SPARK_LOG_DIR=str(tmp_path_factory.mktemp("logs")), SPARK_NO_DAEMONIZE="1")
    port = free_port()
    cls = str(home / "bin" / "spark-class")
    master = subprocess.Popen([cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(free_port())],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"spark://127.0.0.1:{port}"
    worker = None
    try:
        wait_port(port)
        worker = subprocess.Popen([cls, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                                   "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()),
                                   "--work-dir", str(tmp_path_factory.mktemp("work"))],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        yield url
    finally:
        for p in (worker, master):
            if p is not None:
                p.terminate()
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()


SCRIPT = """
import json, sys
from advisor.context import Context
from advisor.sketch.run import run_query
from advisor.plan.parse import parse_sql
from workloads.data.datasets import load_dataset
ctx = Context(sys.argv[1], sys.argv[2], {"spark.executor.memory": "512m", "spark.cores.max": "1"})
assert ctx.spark.sparkContext.master == sys.argv[2]
load_dataset(ctx.catalog, "crimes", rows=5000, seed=3)
q = parse_sql("SELECT district, count(*) AS n FROM crimes GROUP BY district HAVING count(*) > 0 "
              "ORDER BY n DESC LIMIT 3", ctx.schema_lookup())
res = run_query(ctx.catalog, q)
print(json.dumps({"rows": res.rows, "rows_read": res.metrics.rows_read,
                  "executors": ctx.spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()}))
"""


def test_query_runs_on_standalone_cluster(cluster, tmp_path):
    """The session factory (advisor.context.Context -> build_session) with master spark://..."""
    import json

    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "wh"), cluster], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(res["rows"]) == 3 and res["rows_read"] == 5000
    assert res["rows"][0][1] >= res["rows"][1][1] >= res["rows"][2][1]
    assert res["executors"] >= 2  # the driver plus the standalone worker's executor
