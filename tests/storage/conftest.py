"""A real HDFS for the tests: a MiniDFSCluster (one name node, one data node) from Hadoop's
``hadoop-client-minicluster`` jar, started once per test session on 127.0.0.1 in a JVM of its own
and stopped at the end.  The jar is resolved from Maven Central the first time and cached
(``advisor.engine.packages.extra_jars``)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

import pytest

from advisor.engine import packages


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


@pytest.fixture(scope="session")
def hdfs(tmp_path_factory, spark):
    """The URI of a running HDFS (``hdfs://127.0.0.1:PORT``) that the session's Spark reaches."""
    jars = packages.extra_jars("minidfs")
    d = tmp_path_factory.mktemp("minidfs")
    port = free_port()
    log = d / "minidfs.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["java", "-Xmx512m", "-cp", os.pathsep.join(jars), f"-Dtest.build.data={d / 'data'}",
             f"-Dhadoop.tmp.dir={d / 'tmp'}", "org.apache.hadoop.mapreduce.MiniHadoopClusterManager",
             "-nomr", "-nnport", str(port), "-format", "-writeConfig", str(d / "conf.xml")],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_port(port, proc, log, "MiniDFSCluster")
        uri = f"hdfs://127.0.0.1:{port}"
        jvm = spark.sparkContext._jvm
        fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI(uri), spark.sparkContext._jsc.hadoopConfiguration())
        deadline = time.monotonic() + 300
        while True:  # the name node answers before the data node has registered: write a file
            try:
                out = fs.create(jvm.org.apache.hadoop.fs.Path(f"{uri}/.ready"), True)
                out.write(bytearray(b"ok"))
                out.close()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        yield uri
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
