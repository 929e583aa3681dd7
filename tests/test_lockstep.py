"""The lockstep scheduler of isolated replays, with plain Python children (no Spark): step order,
one child at a time, and a failing child reported as bad input."""

import sys
from pathlib import Path

import pytest

from advisor.errors import BadInput
from workloads.lockstep import run_lockstep

CHILD = """
import sys, time
sys.path.insert(0, {root!r})
from workloads.lockstep import Gate
gate = Gate.from_env()
name, steps, fail = sys.argv[1], [int(x) for x in sys.argv[2].split(",")], sys.argv[3] == "1"
for st in steps:
    gate.wait(st)
    with open(sys.argv[4], "a") as f:
        f.write(f"start {{name}} {{st}}\\n")
    time.sleep(0.05)  # a second child running now would write its start line before this end line
    if fail and st == steps[-1]:
        sys.exit(3)
    with open(sys.argv[4], "a") as f:
        f.write(f"end {{name}} {{st}}\\n")
gate.end()
"""


def _argv(tmp_path, name, steps, log, fail=False):
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(root=str(Path(__file__).parents[1])))
    return [sys.executable, str(script), name, ",".join(map(str, steps)), "1" if fail else "0", str(log)]


def test_children_run_one_at_a_time_in_step_order(tmp_path):
    log = tmp_path / "log"
    seen = []
    # B resumes a run: it has no step 0 left to do; A and C have every step
    run_lockstep({"A": _argv(tmp_path, "A", [0, 1, 2], log), "B": _argv(tmp_path, "B", [1, 2], log),
                  "C": _argv(tmp_path, "C", [0, 2], log)}, on_step=lambda s, st: seen.append((st, s)))
    order = [(0, "A"), (0, "C"), (1, "A"), (1, "B"), (2, "A"), (2, "B"), (2, "C")]
    assert seen == order
    lines = log.read_text().split()
    assert lines[0::3] == ["start", "end"] * 7  # never two children between a start and its end
    assert list(zip(map(int, lines[2::6]), lines[1::6])) == order


def test_a_failing_child_is_bad_input(tmp_path):
    log = tmp_path / "log"
    with pytest.raises(BadInput, match="strategy B .* exited with code 3"):
        run_lockstep({"A": _argv(tmp_path, "A", [0, 1], log), "B": _argv(tmp_path, "B", [0, 1], log, fail=True)})
    assert "start B 1" in log.read_text() and "end B 1" not in log.read_text()
