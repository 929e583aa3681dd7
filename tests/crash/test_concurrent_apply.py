"""Two `data apply` processes on one table at once: both prepare their batch against the same
version, then commit one after the other.  The first commits; the second is refused with one
"warehouse busy" line and exit code 2 and removes only its own files; every version's rows in the
store equal the rows its files hold.  A writer that cannot take the lock in time is refused too."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from crash_helpers import raw_problems, run_child, temporaries, version_problems, wait_child

from advisor.context import Context
from workloads.data.datasets import load_dataset
from workloads.data.update_batches import make_batch

pytestmark = pytest.mark.crash


def _wait_for(marker: Path) -> None:
    deadline = time.monotonic() + 600
    while not marker.exists():
        assert time.monotonic() < deadline, f"{marker} never appeared"
        time.sleep(0.05)


def test_two_applies_at_once_lose_nothing(spark, tmp_path, capfd):
    wh = tmp_path / "wh"
    ctx = Context(wh, spark=spark)
    load_dataset(ctx.catalog, "crimes", rows=2000, seed=9)
    a, b = str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")
    make_batch(ctx.catalog, "crimes", 30, 6, a, 1)
    make_batch(ctx.catalog, "crimes", 20, 4, b, 2)
    ctx.store.close()
    pause_a, pause_b = tmp_path / "pause_a", tmp_path / "pause_b"
    # each pauses with its files written, before the commit section (children use the JVM in turn)
    pa_ = run_child(["--warehouse", str(wh), "data", "apply", a, "--table", "crimes"], wait=False,
                    env={"ADVISOR_PAUSE_AT": "apply.written", "ADVISOR_PAUSE_FILE": str(pause_a)})
    _wait_for(pause_a)
    pb_ = run_child(["--warehouse", str(wh), "data", "apply", b, "--table", "crimes"], wait=False,
                    env={"ADVISOR_PAUSE_AT": "apply.written", "ADVISOR_PAUSE_FILE": str(pause_b)})
    _wait_for(pause_b)
    capfd.readouterr()
    pause_a.unlink()
    assert wait_child(pa_) == 0
    pause_b.unlink()
    assert wait_child(pb_) == 2
    err = [x for x in capfd.readouterr().err.splitlines() if x.startswith("error:")]
    assert len(err) == 1 and "warehouse busy" in err[0] and "version 2" in err[0], err
    assert raw_problems(wh) == [] and version_problems(wh) == []
    assert run_child(["--warehouse", str(wh), "data", "list"]) == 0
    assert temporaries(wh) == []
    ctx = Context(wh, spark=spark)
    vs = ctx.catalog.versions("crimes")
    assert [(v.version, v.n_ins, v.n_del) for v in vs] == [(1, 2000, 0), (2, 30, 6)]
    for v in vs:
        assert ctx.catalog.read("crimes", v.version).count() == v.rows
    ctx.store.close()
    # applied again, the refused batch commits on top of the winner's
    assert run_child(["--warehouse", str(wh), "data", "apply", b, "--table", "crimes"]) == 0
    assert version_problems(wh) == []


def test_a_writer_refused_after_the_lock_wait_exits_2(spark, tmp_path, capfd):
    wh = tmp_path / "wh"
    ctx = Context(wh, spark=spark)
    load_dataset(ctx.catalog, "crimes", rows=1000, seed=3)
    ctx.store.close()
    held = tmp_path / "held"
    holder = run_child(["--warehouse", str(wh), "layout", "crimes", "beat", "--rows-per-file", "400"],
                       wait=False,
                       env={"ADVISOR_PAUSE_AT": "layout.renamed", "ADVISOR_PAUSE_FILE": str(held)})
    _wait_for(held)  # inside the commit section, holding the lock
    capfd.readouterr()
    rc = run_child(["--warehouse", str(wh), "layout", "crimes", "ward", "--rows-per-file", "400"],
                   env={"ADVISOR_LOCK_WAIT": "0.5"})
    assert rc == 2
    err = [x for x in capfd.readouterr().err.splitlines() if x.startswith("error:")]
    assert len(err) == 1 and err[0].startswith(f"error: warehouse busy: pid {holder} on "), err
    held.unlink()
    assert wait_child(holder) == 0
    assert raw_problems(wh) == [] and temporaries(wh) == []
