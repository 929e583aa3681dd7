"""SparkSession factory: local by default, cluster via --master/SPARK_MASTER, quiet, no progress bars."""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path
from typing import Iterable, Mapping

from pyspark.sql import SparkSession

from advisor.engine import packages
from advisor.errors import BadInput

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
    # A sketch filter's IN list of one-value runs (``advisor.sketch.apply.MAX_POINTS``) reaches Parquet as a
    # value set; above this many values Spark would push only its [min, max] and skip nothing.
    "spark.sql.parquet.pushdown.inFilterThreshold": "1024",
    # Local files without Hadoop's .crc side files: a sketched layout scan skips pages by the column
    # index, so it makes many small reads (footer, column and offset indexes, pages), and through
    # the checksummed local file system each also opens and verifies the .crc file.  Measured on
    # SF1 sketches, quiet machine (BENCHMARKS.md): big_orders' sketched run 0.78-1.23 s
    # against 1.38-2.62 s; agh_ship's sketched runs and all plain runs unchanged.  Spark's file
    # listing already hides the .crc files left by earlier writes (their names start with a dot).
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
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
                  app_name: str = "advisor"):
    """Create (or return the active) SparkSession with the advisor's defaults and overrides."""
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
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    packages.remember(spark)

    # PySpark logs every captured JVM error as a JSON blob; errors reach the user through our own messages.
    logging.getLogger("DataFrameQueryContextLogger").setLevel(logging.CRITICAL)
    logging.getLogger("pyspark").setLevel(logging.CRITICAL)
    return spark


def _python() -> str:
    return sys.executable


if __name__ == "__main__":  # resolve the Spark packages into their cache now (``make`` does this once)
    build_session(master="local[1]").stop()
    print("\n".join(packages.cached_jars() or ["Spark packages not resolved"]))
