"""Helpers of the storage tests: ports, and the settings that reach the test S3 server."""

from __future__ import annotations

import socket
import subprocess
import time

from advisor.engine import packages

S3_KEY, S3_SECRET, S3_BUCKET = "advisor-test", "advisor-test-secret", "advisor-wh"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, log, what: str, limit: float = 600) -> None:
    deadline = time.monotonic() + limit
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start: {log.read_text()[-3000:]}")
        time.sleep(0.5)


def s3a_conf(endpoint: str) -> dict[str, str]:
    """Spark settings that reach the server of ``s3`` through ``s3a://`` (hadoop-aws at Spark's
    Hadoop version and its AWS SDK bundle, plus the engine's own packages)."""
    jars = (packages.cached_jars() or []) + packages.extra_jars("s3a")
    return {"spark.jars": ",".join(jars),
            "spark.hadoop.fs.s3a.endpoint": endpoint,
            "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
            "spark.hadoop.fs.s3a.access.key": S3_KEY,
            "spark.hadoop.fs.s3a.secret.key": S3_SECRET,
            "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.change.detection.mode": "none",
            "spark.hadoop.fs.s3a.fast.upload.buffer": "bytebuffer"}  # uploads buffered in memory, not in a local dir
