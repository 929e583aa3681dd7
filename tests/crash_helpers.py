"""Running the real CLI in forked children of the test process, so a crash test pays for one JVM:
each child inherits the test's Spark session, runs one command, and is killed by the command's own
crash hook (``advisor.warehouse.atomic.crash_point``: SIGKILL at its N-th commit moment) or exits.
Children never use the JVM at the same time (the parent waits), so they share its connection in
turn; a child drops the operator states the parent holds in memory (the parent writes them to their
files first, ``state_store.flush``), so it starts as a new process would.  What a crash test checks
afterwards reads the store's SQLite file directly, before any store is opened (opening one
repairs)."""

from __future__ import annotations

import json
import os
import sqlite3
import traceback
from pathlib import Path

import pyarrow.dataset as ds

from advisor.warehouse import stored_paths

KILLED = -9


def run_child(argv: list[str], env: dict | None = None, moments_file: Path | None = None, wait: bool = True):
    """Run ``advisor ARGV`` in a forked child; returns its exit code (``KILLED`` when SIGKILLed), or
    its pid when ``wait`` is false.  ``moments_file`` receives the names of the crash points it
    passed, one a line, each written before the point acts (a run killed at a point lists it last)."""
    pid = os.fork()
    if pid == 0:  # the child: the CLI as a process runs it, then what its exit would do
        code = 1
        try:
            os.environ.update(env or {})
            from advisor.cli.main import main
            from advisor.maintain.spark import state_store
            from advisor.warehouse import atomic

            state_store._cache.clear()  # a CLI process starts with no operator state in memory
            atomic._counts.clear()  # ... and has passed no crash moment yet
            if moments_file is not None:
                _record_moments(atomic, moments_file)
            try:
                main(argv)
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            state_store.flush()  # the CLI's exit hook
        except BaseException:  # noqa: BLE001 - reported by the exit code
            traceback.print_exc()
        finally:
            os._exit(code)
    return wait_child(pid) if wait else pid


def _record_moments(atomic, moments_file: Path) -> None:
    """In a child: every crash point appends its name to ``moments_file`` before it acts."""
    moments_file.write_text("")
    point = atomic.crash_point

    def recorded(name: str) -> None:
        with open(moments_file, "a") as f:
            f.write(name + "\n")
        point(name)
    atomic.crash_point = recorded


def read_moments(moments_file: Path) -> list[str]:
    """The crash points a child passed, in order (``run_child``'s ``moments_file``)."""
    return moments_file.read_text().splitlines() if moments_file.exists() else []


def wait_child(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _files(p: str) -> list[str]:
    return sorted(str(f) for f in Path(p).glob("*.parquet"))


def raw_problems(wh: Path) -> list[str]:
    """Rows of the store at ``wh`` that name files that do not exist, read before any repair."""
    conn = sqlite3.connect(wh / "advisor.db")
    out = []

    def at(p):  # rows name places below the warehouse root
        return stored_paths.resolve(str(wh.absolute()), p)

    try:
        sql = "SELECT table_name, version, base_path, ins_path, del_path FROM versions"
        for t, v, *paths in conn.execute(sql):
            out += [f"{t} v{v}: {p} missing" for p in paths if p and not _files(at(p))]
        for i, path, man in conn.execute("SELECT id, path, manifest_json FROM layouts"):
            missing = [m["path"] for m in json.loads(man) if not (Path(at(path)) / m["path"]).exists()]
            if not Path(at(path)).is_dir() or missing:
                out.append(f"layout {i}: {len(missing)} manifest file(s) missing")
        out += [f"sample {i}: {p} missing" for i, p in conn.execute("SELECT id, path FROM samples")
                if not Path(at(p)).exists()]
        out += [f"state {i}: {p} missing" for i, p in conn.execute("SELECT sketch_id, path FROM states")
                if p and not Path(at(p)).is_file()]
        for t, a, b, *paths in conn.execute("SELECT * FROM net_deltas"):
            out += [f"net delta {t} {a}-{b}: {p} missing" for p in paths[:2] if p and not Path(at(p)).exists()]
    finally:
        conn.close()
    return out


def _file_rids(p: str) -> set:
    return set(ds.dataset(_files(p)).to_table(columns=["_rid"]).column(0).to_pylist())


def version_problems(wh: Path) -> list[str]:
    """Versions whose files do not hold the rows their row says (each read with pyarrow from the
    base and batch files, as ``Catalog.read_arrow`` does)."""
    conn = sqlite3.connect(wh / "advisor.db")
    conn.row_factory = sqlite3.Row
    out = []
    try:
        rows = conn.execute("SELECT * FROM versions ORDER BY table_name, version").fetchall()
    finally:
        conn.close()
    ids: dict[str, set] = {}

    def _rids(p):  # rows name places below the warehouse root
        return _file_rids(stored_paths.resolve(str(wh.absolute()), p))

    for r in rows:
        t = r["table_name"]
        if r["kind"] == "base":
            ids[t] = _rids(r["base_path"])
        else:
            if r["ins_path"]:
                ids[t] |= _rids(r["ins_path"])
            if r["del_path"]:
                ids[t] -= _rids(r["del_path"])
        if len(ids[t]) != r["rows"]:
            out.append(f"{t} v{r['version']}: {len(ids[t])} rows in its files, {r['rows']} in the store")
    return out


def temporaries(wh: Path) -> list[str]:
    """Temporary files or directories anywhere in the warehouse."""
    return [str(p) for p in wh.rglob(".tmp-*")]
