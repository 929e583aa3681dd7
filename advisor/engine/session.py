"""SparkSession factory: local by default, cluster via --master/SPARK_MASTER, quiet, no progress bars."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Iterable, Mapping

from pyspark import SparkConf, SparkContext, java_gateway
from pyspark.sql import SparkSession

from advisor.engine import packages
from advisor.errors import BadInput
from advisor.plan.to_sql import IN_PUSHDOWN_MAX

DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "4g",
    "spark.sql.parquet.filterPushdown": "true",
    # Timestamps as INT64 microseconds: Spark's default, INT96, carries no min/max statistics and no
    # column index, so a layout clustered on a timestamp skipped nothing and Spark could not push a
    # sketch's range filter on it down to Parquet.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.adaptive.enabled": "true",
    # Constraint inference over a sketch's OR of ranges costs seconds of planning and buys nothing.
    "spark.sql.constraintPropagation.enabled": "false",
    # Local Python workers: keep them alive across tasks.
    "spark.python.worker.reuse": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Parquet's dictionary filter reads, for every row group its min/max keep, the dictionary page and
    # tests the pushed predicate on each entry: for a sketch's OR of 128 ranges over a clustered
    # layout's 1,035 row groups that was 1.0-1.2 s of a 1.6-1.8 s scan (0.6-1.0 s without; SF1,
    # BENCHMARKS.md).  Range filters on a sorted column gain nothing from it.
    "spark.hadoop.parquet.filter.dictionary.enabled": "false",
    # A sketch filter's IN lists (``advisor.plan.to_sql.in_lists``) reach Parquet as value sets; above
    # this many values Spark would push only their [min, max], and far above it (about 700) the
    # pushed filter overflows an executor's stack.
    "spark.sql.parquet.pushdown.inFilterThreshold": str(IN_PUSHDOWN_MAX),
    # Local files without Hadoop's .crc side files: a sketched layout scan skips pages by the column
    # index, so it makes many small reads (footer, column and offset indexes, pages), and through
    # the checksummed local file system each also opens and verifies the .crc file.  Measured on
    # SF1 sketches, quiet machine (BENCHMARKS.md): big_orders' sketched run 0.78-1.23 s
    # against 1.38-2.62 s; agh_ship's sketched runs and all plain runs unchanged.  Spark's file
    # listing already hides the .crc files left by earlier writes (their names start with a dot).
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    # Spark's Delta reader (for what ``advisor.warehouse.delta_parquet`` cannot read as files) runs
    # jobs over a snapshot's state to plan each scan, in 50 partitions by default: an SF1 table's
    # two-file snapshot took 0.9-1.3 s to plan a filtered count, 0.26-0.47 s in one partition.
    "spark.databricks.delta.snapshotPartitions": "2",
    # Compiled whole-stage code is cached per generated source, 100 entries by default.  Sketch
    # filters, captures and sizing jobs each compile their own, so a process that advises evicted
    # the plain queries' code between two instances of a template and recompiled it each time:
    # a 337k-row flights scan took 0.29 s after 60 other queries against 0.15 s with the code
    # kept (BENCHMARKS.md, "Fresh tables").  Generated classes live in the JVM's metaspace.
    "spark.sql.codegen.cache.maxEntries": "2000",
}


JIT_HUGE = "-XX:-DontCompileHugeMethods"


def parse_conf(pairs: Iterable[str]) -> dict[str, str]:
    """Parse repeated `k=v` strings; a malformed pair is bad input."""
    out: dict[str, str] = {}
    for p in pairs:
        if "=" not in p or not p.split("=", 1)[0].strip():
            raise BadInput(f"--conf expects key=value, got {p!r}")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def resolve_master(master: str | None) -> str:
    """--master wins, then SPARK_MASTER, then local[*]."""
    return master or os.environ.get("SPARK_MASTER") or "local[*]"


def build_session(master: str | None = None, conf: Mapping[str, str] | None = None,
                  app_name: str = "advisor", log_file: str | Path | None = None):
    """Create (or return the active) SparkSession with the advisor's defaults and overrides.  With
    ``log_file``, everything the JVM and its Python workers print (start-up lines, Spark's log
    records, stack traces) is appended to that file instead of the terminal (``quiet_gateway``)."""
    os.environ.setdefault("PYSPARK_PYTHON", _python())
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", _python())
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["TZ"] = "UTC"  # Python-side timestamp conversion must match the session time zone
    time.tzset()
    log4j = Path(__file__).with_name("log4j2.properties")

    builder = SparkSession.builder.appName(app_name).master(resolve_master(master))
    merged = dict(DEFAULT_CONF)
    # HotSpot does not JIT-compile methods over 8,000 bytes of bytecode; a sketch filter of a
    # hundred or more ranges makes whole-stage codegen emit one, which then runs interpreted (measured at
    # SF1: 210 ranges 4.3x slower than no sketch, 0.28x with this flag; BENCHMARKS.md).
    merged["spark.driver.extraJavaOptions"] = f"-Dlog4j.configurationFile=file:{log4j} {JIT_HUGE}"
    merged["spark.executor.extraJavaOptions"] = JIT_HUGE
    merged.update(packages.jar_conf())
    merged.update(conf or {})
    for k, v in merged.items():
        builder = builder.config(k, v)
    if log_file is not None:
        quiet_gateway(merged, resolve_master(master), app_name, Path(log_file))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    packages.remember(spark)

    # PySpark logs every captured JVM error as a JSON blob; errors reach the user through our own messages.
    for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    logging.getLogger("pyspark").setLevel(logging.CRITICAL)
    return spark


def quiet_gateway(conf: Mapping[str, str], master: str, app_name: str, log_file: Path) -> None:
    """Start the Spark JVM (unless running) with its stdout and stderr on ``log_file``, so that a
    command's terminal shows only the command's own output, and the JVM dies with this process: the
    kernel sends it SIGTERM when the thread that started it ends, even by SIGKILL (``prctl``
    PR_SET_PDEATHSIG, kept across the launcher's ``exec`` of java), so no JVM outlives a killed CLI."""
    if SparkContext._gateway is not None:
        return
    log_file.parent.mkdir(parents=True, exist_ok=True)
    sc_conf = SparkConf(loadDefaults=False).setMaster(master).setAppName(app_name).setAll(list(conf.items()))
    popen = java_gateway.Popen

    def dies_with_parent(command, **kw):
        pyspark_pre = kw.get("preexec_fn")

        def pre():
            if pyspark_pre is not None:
                pyspark_pre()
            _die_with_parent()
        return popen(command, **(kw | {"preexec_fn": pre}))

    java_gateway.Popen = dies_with_parent
    try:
        with open(log_file, "ab") as log:
            SparkContext._ensure_initialized(gateway=java_gateway.launch_gateway(
                sc_conf, {"stdout": log, "stderr": log}))
    finally:
        java_gateway.Popen = popen


def _die_with_parent() -> None:
    """In a child before exec: SIGTERM when the parent goes (Linux; elsewhere nothing)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the gateway's stdin EOF still stops the JVM
        return


def _python() -> str:
    return sys.executable


if __name__ == "__main__":  # resolve the Spark packages into their cache now (``make`` does this once)
    build_session(master="local[1]").stop()
    print("\n".join(packages.cached_jars() or ["Spark packages not resolved"]))
