"""`data compact` and `layout` stopped at the boundary between renaming their finished files into
place and committing the row that names them (``ADVISOR_PAUSE_AT``), then killed with SIGKILL while
they hold the writer lock: the renamed files belong to no row.  The next command succeeds, removes
them and every temporary, and the store reads as before the killed command."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from crash_helpers import KILLED, raw_problems, run_child, temporaries, version_problems, wait_child

from advisor.context import Context
from workloads.data.datasets import load_dataset
from workloads.data.update_batches import make_batch

pytestmark = pytest.mark.crash


def _killed_at(wh: Path, argv: list[str], moment: str, marker: Path) -> None:
    """Run ``advisor ARGV`` until it pauses at ``moment``, then SIGKILL it there."""
    pid = run_child(["--warehouse", str(wh), *argv], wait=False,
                    env={"ADVISOR_PAUSE_AT": moment, "ADVISOR_PAUSE_FILE": str(marker)})
    deadline = time.monotonic() + 900
    while not marker.exists():
        assert time.monotonic() < deadline, f"{argv} never reached {moment}"
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    assert wait_child(pid) == KILLED
    marker.unlink()


def _entries(d: Path, prefix: str) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith(prefix))


@pytest.fixture()
def wh(spark, tmp_path):
    d = tmp_path / "wh"
    ctx = Context(d, spark=spark)
    load_dataset(ctx.catalog, "crimes", rows=1500, seed=4)
    make_batch(ctx.catalog, "crimes", 40, 8, str(tmp_path / "b.parquet"), 1)
    ctx.catalog.apply_batch("crimes", str(tmp_path / "b.parquet"))
    ctx.store.close()
    return d


def test_compact_killed_between_rename_and_commit(wh, spark, tmp_path):
    tdir = wh / "tables" / "crimes"
    before = _entries(tdir, "v")
    _killed_at(wh, ["data", "compact", "crimes"], "compact.renamed", tmp_path / "paused")
    renamed = [n for n in _entries(tdir, "v000003_base") if n not in before]
    assert len(renamed) == 1  # the kill came after the rename: a file no row names
    assert raw_problems(wh) == [] and version_problems(wh) == []
    assert run_child(["--warehouse", str(wh), "data", "list"]) == 0
    assert temporaries(wh) == [] and _entries(tdir, "v") == before
    ctx = Context(wh, spark=spark)
    assert [v.version for v in ctx.catalog.versions("crimes")] == [1, 2]
    assert ctx.catalog.read("crimes").count() == ctx.catalog.version("crimes").rows == 1532
    ctx.store.close()
    assert run_child(["--warehouse", str(wh), "data", "compact", "crimes"]) == 0
    assert raw_problems(wh) == [] and version_problems(wh) == [] and temporaries(wh) == []


def test_layout_killed_between_rename_and_commit(wh, spark, tmp_path):
    tdir = wh / "tables" / "crimes"
    argv = ["layout", "crimes", "beat", "--rows-per-file", "500"]
    _killed_at(wh, argv, "layout.renamed", tmp_path / "paused")
    assert len(_entries(tdir, "layout_beat_")) == 1  # renamed into place, never committed
    assert raw_problems(wh) == []
    assert run_child(["--warehouse", str(wh), "data", "list"]) == 0
    assert temporaries(wh) == [] and _entries(tdir, "layout_") == []
    assert run_child(["--warehouse", str(wh), "layout", "crimes", "beat", "--rows-per-file", "500"]) == 0
    ctx = Context(wh, spark=spark)
    lays = ctx.store.query("SELECT path FROM layouts")
    assert [Path(r["path"]).name for r in lays] == _entries(tdir, "layout_")
    ctx.store.close()
    assert raw_problems(wh) == [] and temporaries(wh) == []
