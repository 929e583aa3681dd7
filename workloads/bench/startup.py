"""Time to first result: `advisor run` on a trivial query against a bare PySpark session running
the same query, each a fresh process, alternated so both see the same machine state.  The
difference is what the CLI adds on top of starting Spark: imports, the store, the advise path."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

QUERY = "SELECT n_regionkey, count(*) AS c FROM nation GROUP BY n_regionkey"

BARE = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[*]").config("spark.ui.enabled", "false").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
spark.read.parquet(sys.argv[1]).createOrReplaceTempView("nation")
print(spark.sql(sys.argv[2]).collect())
"""


def _timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    secs = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed: {(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
    return secs


def bench_startup(warehouse: Path, base_path: str, reps: int = 5) -> dict:
    """Median seconds of each side over ``reps`` alternated runs, and their ratio."""
    cli = [sys.executable, "-m", "advisor.cli", "--warehouse", str(warehouse), "run", QUERY]
    bare = [sys.executable, "-c", BARE, base_path, QUERY]
    imports = [sys.executable, "-X", "importtime", "-c", "import advisor.cli.main"]
    got: dict[str, list[float]] = {"advisor run": [], "bare pyspark": []}
    for _ in range(reps):
        got["advisor run"].append(_timed(cli))
        got["bare pyspark"].append(_timed(bare))
    t0 = time.perf_counter()
    subprocess.run(imports, capture_output=True)
    med = {k: statistics.median(v) for k, v in got.items()}
    return {"query": QUERY, "reps": reps, "seconds": got, "median": med,
            "ratio": med["advisor run"] / med["bare pyspark"],
            "cli_import_seconds": time.perf_counter() - t0}
