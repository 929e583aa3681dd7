"""A real HDFS for the tests: a MiniDFSCluster (one name node, one data node) from Hadoop's
``hadoop-client-minicluster`` jar, started once per test session on 127.0.0.1 in a JVM of its own
and stopped at the end.  The jar is resolved from Maven Central the first time and cached
(``advisor.engine.packages.extra_jars``)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from storage_helpers import S3_BUCKET, S3_KEY, S3_SECRET, free_port, wait_for_port

from advisor.engine import packages


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




@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    """The endpoint (``http://127.0.0.1:PORT``) of an S3-compatible server (moto's server mode)
    holding an empty bucket ``S3_BUCKET``."""
    import sys

    import boto3

    d = tmp_path_factory.mktemp("s3")
    port = free_port()
    log = d / "moto.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        wait_for_port(port, proc, log, "moto server")
        endpoint = f"http://127.0.0.1:{port}"
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=S3_KEY, aws_secret_access_key=S3_SECRET,
                     region_name="us-east-1").create_bucket(Bucket=S3_BUCKET)
        yield endpoint
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
