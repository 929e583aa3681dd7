"""The store's guards without Spark: an empty or damaged store file and table files without a
store are refused (exit code 2, nothing written); recovery on open removes what killed commands
left and drops rows whose files are gone, saying so once; the writer lock names its holder; YAML
workload files with alias bombs are refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from advisor.errors import BadInput
from advisor.warehouse import atomic
from advisor.warehouse.lock import WarehouseBusy, writer_lock
from advisor.warehouse.store import Store

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "advisor.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def _listing(d: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(d)), p.stat().st_size) for p in d.rglob("*"))


def test_an_empty_store_file_is_refused_and_nothing_is_written(tmp_path):
    wh = tmp_path / "wh"
    (wh / "tables" / "crimes" / "v000001_base").mkdir(parents=True)
    (wh / "tables" / "crimes" / "v000001_base" / "part-0.parquet").write_bytes(b"PAR1")
    (wh / "advisor.db").write_bytes(b"")
    before = _listing(wh)
    r = _cli("--warehouse", str(wh), "data", "list")
    assert r.returncode == 2, r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "empty (0 bytes)" in err[0] and "data init --force" in err[0]
    assert _listing(wh) == before


def test_table_files_without_a_store_are_refused(tmp_path):
    wh = tmp_path / "wh"
    (wh / "tables" / "crimes").mkdir(parents=True)
    (wh / "tables" / "crimes" / "v000001_base").mkdir()
    with pytest.raises(BadInput, match="holds warehouse data but no store"):
        Store(wh)
    assert not (wh / "advisor.db").exists()
    (wh / "advisor.db").write_bytes(b"not a database, but some bytes")
    with pytest.raises(BadInput, match="damaged or not an advisor store"):
        Store(wh)


def test_init_force_starts_afresh_and_keeps_the_old_file(tmp_path):
    wh = tmp_path / "wh"
    wh.mkdir()
    (wh / "advisor.db").write_bytes(b"")
    r = _cli("--warehouse", str(wh), "data", "init", "--force")
    assert r.returncode == 0, r.stderr
    assert (wh / "advisor.db").stat().st_size > 0
    assert len(list(wh.glob("advisor.db.damaged-*"))) == 1
    assert _cli("--warehouse", str(wh), "data", "list").returncode == 0


def test_a_new_store_in_an_empty_directory(tmp_path):
    s = Store(tmp_path / "new")
    assert s.query("SELECT count(*) n FROM tables")[0]["n"] == 0
    s.close()


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_recovery_removes_leftovers_and_dangling_rows_once(tmp_path, capsys):
    wh = tmp_path / "wh"
    s = Store(wh)
    tdir = wh / "tables" / "t"
    base = tdir / "v000001_base"
    base.mkdir(parents=True)
    (base / "part-0.parquet").write_bytes(b"x")
    layout = tdir / "layout_a_v000001-0123456789ab"
    layout.mkdir()
    (layout / "part-0.parquet").write_bytes(b"x")
    with s.tx() as c:
        c.execute("INSERT INTO tables VALUES ('t', '', 0, 1, '[]')")
        c.execute("INSERT INTO versions VALUES ('t', 1, 'base', ?, NULL, NULL, 1, 1, 1, 0, 0)", (str(base),))
        c.execute("INSERT INTO layouts(table_name, attr, table_version, path, manifest_json, created) "
                  "VALUES ('t', 'a', 1, ?, ?, 0)", (str(layout), json.dumps([{"path": str(layout / "gone.parquet")}])))
        c.execute("INSERT INTO samples(table_name, strata_json, theta, seed, table_version, path, meta_json, created)"
                  " VALUES ('t', '[]', 0.1, 1, 1, ?, '{}', 0)", (str(tdir / "samples" / "gone"),))
        c.execute("INSERT INTO states VALUES (7, ?, '{}', 0)", (str(wh / "states" / "sketch_7.state"),))
    s.close()
    dead = tdir / f".tmp-{atomic.tmp_name().split('-')[1]}-{_dead_pid()}-abc"
    dead.mkdir()
    mine = tdir / atomic.tmp_name("live")  # this process is alive: its temporary stays
    mine.mkdir()
    orphan = tdir / "v000002_ins-0123456789ab"  # renamed into place, never committed
    orphan.mkdir()
    capsys.readouterr()
    s = Store(wh)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"recovered {wh}:"), err
    assert "1 temporary" in err[0] and "2 file(s) no store row names" in err[0]  # the orphan, the layout
    assert "dropped 3 store row(s)" in err[0]
    assert not dead.exists() and mine.exists() and not orphan.exists() and base.exists()
    assert s.query("SELECT count(*) n FROM layouts")[0]["n"] == 0
    assert s.query("SELECT count(*) n FROM samples")[0]["n"] == 0
    assert s.query("SELECT path FROM states")[0]["path"] == ""
    s.close()
    Store(wh).close()  # said once: nothing left to repair
    assert capsys.readouterr().err == ""


def test_the_writer_lock_names_its_holder_when_busy(tmp_path):
    wh = tmp_path / "wh"
    wh.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from advisor.warehouse.lock import writer_lock
        with writer_lock({str(wh)!r}):
            print("held", flush=True)
            time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(WarehouseBusy, match=rf"warehouse busy: pid {holder.pid} on "):
            with writer_lock(wh, wait=0.2):
                pass
    finally:
        holder.kill()
        holder.wait()
    deadline = time.monotonic() + 30
    while True:  # the kernel released the dead holder's lock
        try:
            with writer_lock(wh, wait=0.2):
                break
        except WarehouseBusy:
            assert time.monotonic() < deadline


def test_a_yaml_alias_bomb_is_refused(tmp_path):
    from workloads.replay.workload_file import load_workload

    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]")
    p = tmp_path / "bomb.yaml"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(BadInput, match="more than 32 YAML aliases"):
        load_workload(str(p))
    big = tmp_path / "big.yaml"
    big.write_text("name: x\n" + "#" * (2 << 20) + "\n")
    with pytest.raises(BadInput, match="at most 1 MiB"):
        load_workload(str(big))
