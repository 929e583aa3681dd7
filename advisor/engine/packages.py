"""Spark packages the engine needs (Delta Lake), resolved once from Maven Central and then used offline.

The first session resolves ``PACKAGES`` the way PySpark users do, through ``spark.jars.packages``
(Spark's Ivy) into a cache directory, and records the jar files Ivy chose.  Every later session puts
those files on ``spark.jars``: no resolution and no network.  The cache is
``$ADVISOR_PACKAGES_CACHE``, else ``~/.cache/advisor/spark-packages``.

    python -m advisor.engine.session   # resolve now (make does this before tests and the demo)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

# delta-spark's Python package of the same version (pyproject.toml) supports this pyspark.
DELTA_VERSION = "4.4.0"
PACKAGES = (f"io.delta:delta-spark_2.13:{DELTA_VERSION}",)

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def cache_dir() -> Path:
    return Path(os.environ.get("ADVISOR_PACKAGES_CACHE") or Path.home() / ".cache" / "advisor" / "spark-packages")


def _manifest() -> Path:
    return cache_dir() / "resolved.json"


def cached_jars() -> list[str] | None:
    """The resolved jar files of ``PACKAGES`` if every one is still in the cache, else None."""
    try:
        rec = json.loads(_manifest().read_text())
    except (OSError, ValueError):
        return None
    jars = rec.get("jars") or []
    if rec.get("packages") != list(PACKAGES) or not jars or not all(Path(j).is_file() for j in jars):
        return None
    return jars


def jar_conf() -> dict[str, str]:
    """Session settings that put the packages on the classpath: the cached jars, or Ivy resolution
    into the cache (whose result ``remember`` records once the session is up)."""
    jars = cached_jars()
    if jars is not None:
        return {"spark.jars": ",".join(jars), **DELTA_CONF}
    cache_dir().mkdir(parents=True, exist_ok=True)
    return {"spark.jars.packages": ",".join(PACKAGES), "spark.jars.ivy": str(cache_dir() / "ivy"), **DELTA_CONF}


def remember(spark) -> None:
    """Record the jars Ivy resolved for this session (Spark lists them in ``spark.jars``)."""
    if cached_jars() is not None:
        return
    conf = spark.sparkContext.getConf()
    if conf.get("spark.jars.packages", "") != ",".join(PACKAGES):
        return
    jars = [unquote(urlparse(u).path) if u.startswith("file:") else u
            for u in conf.get("spark.jars", "").split(",") if u]
    jars = [j for j in jars if Path(j).is_file()]
    if jars:
        tmp = _manifest().with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({"packages": list(PACKAGES), "jars": jars}, indent=1))
        tmp.replace(_manifest())



# Jars outside the engine's classpath (a test's HDFS or S3 connector, a MiniDFSCluster), resolved
# the same way into ``<cache>/extra/<name>`` and recorded in its own ``resolved.json``.
EXTRA = {
    # MiniDFSCluster asserts with JUnit 5 while it sets up its directories
    "minidfs": ("org.apache.hadoop:hadoop-client-minicluster:3.5.0", "org.junit.jupiter:junit-jupiter-api:5.10.2"),
    "s3a": ("org.apache.hadoop:hadoop-aws:3.5.0",),
}


def extra_jars(name: str) -> list[str]:
    """The jar files of the extra package set ``name`` (``EXTRA``): from the cache, else resolved
    now by Spark's Ivy in a short-lived JVM of its own (the first time only; later calls are offline)."""
    coords = EXTRA[name]
    d = cache_dir() / "extra" / name
    manifest = d / "resolved.json"
    try:
        rec = json.loads(manifest.read_text())
        if rec.get("packages") == list(coords) and rec["jars"] and all(Path(j).is_file() for j in rec["jars"]):
            return rec["jars"]
    except (OSError, ValueError, KeyError):
        pass  # no manifest yet, or a damaged one: resolve again below
    d.mkdir(parents=True, exist_ok=True)
    code = ("import sys; from pyspark.sql import SparkSession; "
            "s = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false')"
            ".config('spark.jars.packages', sys.argv[1]).config('spark.jars.ivy', sys.argv[2]).getOrCreate(); "
            "print('JARS=' + s.sparkContext.getConf().get('spark.jars', '')); s.stop()")
    out = subprocess.run([sys.executable, "-c", code, ",".join(coords), str(d / "ivy")], capture_output=True,
                         text=True, timeout=1800)
    line = [x for x in out.stdout.splitlines() if x.startswith("JARS=")]
    if out.returncode != 0 or not line:
        raise RuntimeError(f"could not resolve {', '.join(coords)}: {out.stderr.strip()[-2000:]}")
    jars = [unquote(urlparse(u).path) if u.startswith("file:") else u for u in line[0][5:].split(",") if u]
    jars = [j for j in jars if Path(j).is_file()]
    tmp = manifest.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"packages": list(coords), "jars": jars}, indent=1))
    tmp.replace(manifest)
    return jars
