"""Operator-state persistence (``advisor.maintain.spark.state_store``): written behind, read back equal, and a
state whose file was never written reads as no state.  A real SQLite store; no Spark."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from advisor.maintain.spark import state_store as states
from advisor.maintain.engine import Maintainer, MaintState
from advisor.warehouse.store import Store
from maintain_helpers import ex51, part, rs_tables

SK2 = {1: ("a", part("R", "a", (6,))), 2: ("c", part("S", "c", (7,)))}


@pytest.fixture
def cat(tmp_path):
    states._cache.clear()
    yield SimpleNamespace(store=Store(tmp_path / "wh"))
    states._cache.clear()


def _state() -> MaintState:
    return Maintainer.init(ex51(), SK2, rs_tables())


def _path(cat, sketch_id: int) -> Path:
    """Where the state's file goes."""
    return cat.store.warehouse / "states" / f"sketch_{sketch_id}.state"


def _named(cat, sketch_id: int) -> str:
    """The file the state's row names ('' until the file is written), resolved against the
    warehouse root (the row records its place below it)."""
    return cat.store.resolve(cat.store.one("SELECT path FROM states WHERE sketch_id=?", (sketch_id,))["path"])


def test_a_saved_state_is_recorded_now_and_written_at_flush(cat):
    st = _state()
    states.save(cat, 1, st, {"init_seconds": 0.5})
    path = _path(cat, 1)
    assert not path.exists() and _named(cat, 1) == ""  # no row names a file not yet written
    assert states.has(cat.store, 1)
    written, _ = states.flush()
    assert written == 1 and path.is_file() and _named(cat, 1) == str(path.absolute())
    assert MaintState.from_bytes(path.read_bytes()).snapshot() == st.snapshot()
    assert states.flush()[0] == 0  # clean now: nothing written twice


def test_load_takes_the_cached_state_and_reads_the_file_after_eviction(cat):
    st = _state()
    states.save(cat, 1, st)
    assert states.load(cat, 1) is st  # the caller mutates it: no copy, no file
    assert not states.has(cat.store, 1)  # taken out, never written
    states.save(cat, 2, st)
    states.evict_all()
    assert not states._cache and _path(cat, 2).is_file()
    back = states.load(cat, 2)
    assert back is not st and back.snapshot() == st.snapshot()


def test_peek_leaves_the_state_cached_and_fresh_copies_are_independent(cat):
    st = _state()
    states.save(cat, 1, st)
    assert states.peek(cat, 1) is st
    c = states.fresh(st)
    assert c is not st and c.snapshot() == st.snapshot()
    for a, b in zip(c.root_op.walk(), st.root_op.walk()):
        for name, v in vars(b).items():
            if isinstance(v, np.ndarray) and v.size:
                assert not np.shares_memory(vars(a)[name], v), name
    assert states.load(cat, 1) is st


def test_a_state_never_written_reads_as_no_state(cat):
    """A process killed before its flush leaves the row without a file: no state, not an error."""
    states.save(cat, 1, _state())
    states._cache.clear()  # what a killed process leaves behind
    assert not states.has(cat.store, 1)
    assert states.load(cat, 1) is None and states.peek(cat, 1) is None


def test_eviction_over_the_budget_writes_the_dirty_state_first(cat, monkeypatch):
    st = _state()
    monkeypatch.setattr(states._cache, "max_bytes", st.memory_bytes() + 1)
    states.save(cat, 1, st)
    assert not _path(cat, 1).exists() and _named(cat, 1) == ""
    states.save(cat, 2, _state())  # over the budget: sketch 1's state is evicted
    assert list(states._cache) == [(str(cat.store.path), 2)]
    assert _path(cat, 1).is_file() and _named(cat, 1) == str(_path(cat, 1).absolute()) and states.has(cat.store, 1)
    assert states.load(cat, 1).snapshot() == st.snapshot()


def test_a_damaged_state_file_reads_as_no_state(cat):
    states.save(cat, 1, _state())
    states.evict_all()
    _path(cat, 1).write_bytes(b"not a state")
    assert states.load(cat, 1) is None


def test_a_process_writes_its_dirty_states_when_it_exits(tmp_path):
    """The ``atexit`` flush, in a real child process that saves a state and returns normally."""
    tests = Path(__file__).parents[1]
    code = textwrap.dedent(f"""
        import sys
        from types import SimpleNamespace
        sys.path.insert(0, {str(tests)!r})
        from advisor.maintain.spark import state_store as states
        from advisor.maintain.engine import Maintainer
        from advisor.warehouse.store import Store
        from maintain_helpers import ex51, part, rs_tables
        sk = {{1: ("a", part("R", "a", (6,))), 2: ("c", part("S", "c", (7,)))}}
        st = Maintainer.init(ex51(), sk, rs_tables())
        cat = SimpleNamespace(store=Store({str(tmp_path / "wh")!r}))
        states.save(cat, 7, st)
        print(repr(st.sketch()))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    path = tmp_path / "wh" / "states" / "sketch_7.state"
    assert path.is_file()
    assert repr(MaintState.from_bytes(path.read_bytes()).sketch()) == out.stdout.strip()
