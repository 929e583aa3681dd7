"""A standalone Spark cluster for the tests: a master and workers from pyspark's own jars on
127.0.0.1 (``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``).

``hide``: a directory the workers (and so their executors) must not see.  Each worker then runs in a
mount namespace of its own (``unshare -rm``) with an empty tmpfs over that directory, and keeps its
work and scratch directories inside it: a worker sees neither the driver's files there nor the other
worker's, as on separate machines.  Where the kernel refuses unprivileged namespaces the workers
run plainly, each in its own directories (``Cluster.isolated`` says which)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyspark

# mounts the tmpfs, makes the worker's directories inside it and starts the worker from there
_ISOLATE = 'mount -t tmpfs tmpfs "$HIDE" && mkdir -p "$SPARK_WORKER_DIR" "$SPARK_LOCAL_DIRS" && ' \
           'cd "$SPARK_WORKER_DIR" && exec "$@"'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 120) -> None:
    end = time.time() + timeout
    while time.time() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"port {port} did not open")


def can_isolate(hide: Path) -> bool:
    """Whether this process may start a worker in a mount namespace of its own with a tmpfs over ``hide``."""
    try:
        return subprocess.run(["unshare", "-rm", "--propagation", "private", "sh", "-c",
                               f"mount -t tmpfs tmpfs '{hide}'"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1, never through a proxy


def _json(ui: str, tries: int = 5) -> dict:
    """A web UI's JSON status.  A busy UI can drop the connection or answer with an empty page (seen
    on a worker's UI right after a two-worker replay on 2 cores): asked again after a second."""
    for i in range(tries):
        try:
            with _DIRECT.open(f"{ui}/json/", timeout=10) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            if i == tries - 1:
                raise
            time.sleep(1.0)
    raise AssertionError("unreachable")


@dataclass
class Cluster:
    """A running cluster: the master's URL and web UI, each worker's web UI and directory."""
    url: str
    ui: str
    isolated: bool
    worker_dirs: list[Path]
    worker_uis: list[str]

    def state(self) -> dict:
        """The master's JSON status (workers, applications)."""
        return _json(self.ui)

    def worker_states(self) -> list[dict]:
        """Each worker's JSON status (its running and finished executors)."""
        return [_json(u) for u in self.worker_uis]


def _stop(procs) -> None:
    for p in reversed(procs):
        p.terminate()
    for p in reversed(procs):
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _alive(cluster: Cluster) -> int:
    try:
        return sum(w["state"] == "ALIVE" for w in _json(cluster.ui, tries=1)["workers"])
    except (OSError, ValueError):  # the web UI is not up yet, or answers with an empty page while starting
        return 0


@contextmanager
def standalone_cluster(base: Path, workers: int = 1, cores: int = 1, memory: str = "1g", hide: Path | None = None):
    """A running master and ``workers`` workers (each ``cores`` cores, ``memory``); yields a
    ``Cluster``.  Their output goes to log files under ``base``; without ``hide`` each worker's
    work and scratch directories are ``base/worker-<i>/{work,local}``."""
    home = Path(pyspark.__file__).parent
    cls = str(home / "bin" / "spark-class")
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1")
    isolated = hide is not None and can_isolate(hide)
    port, ui = free_port(), free_port()
    procs: list[subprocess.Popen] = []
    url = f"spark://127.0.0.1:{port}"
    dirs, uis = [], []
    try:
        with open(base / "master.log", "wb") as log:
            procs.append(subprocess.Popen([cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                           "--port", str(port), "--webui-port", str(ui)],
                                          env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        wait_port(port)
        for i in range(workers):
            d = (hide if isolated else base) / f"worker-{i}"
            dirs.append(d)
            wenv = dict(env, SPARK_WORKER_DIR=str(d / "work"), SPARK_LOCAL_DIRS=str(d / "local"))
            wui = free_port()
            uis.append(f"http://127.0.0.1:{wui}")
            argv = [cls, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", str(cores),
                    "--memory", memory, "--webui-port", str(wui), "--work-dir", str(d / "work")]
            if isolated:
                wenv["HIDE"] = str(hide)
                argv = ["unshare", "-rm", "--propagation", "private", "sh", "-c", _ISOLATE, "sh", *argv]
            else:
                for sub in ("work", "local"):
                    (d / sub).mkdir(parents=True)
            with open(base / f"worker-{i}.log", "wb") as log:
                procs.append(subprocess.Popen(argv, env=wenv, stdout=log, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL, cwd=None if isolated else d / "work"))
        cluster = Cluster(url, f"http://127.0.0.1:{ui}", isolated, dirs, uis)
        end = time.time() + 120
        while _alive(cluster) < workers:
            if time.time() > end or any(p.poll() is not None for p in procs):
                raise RuntimeError(f"the workers did not register: {(base / 'worker-0.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield cluster
    finally:
        _stop(procs)
