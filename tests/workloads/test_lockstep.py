"""The lockstep scheduler of isolated replays, with plain Python children (no Spark): step order,
one child at a time, and a failing child reported as bad input."""

import sys
from pathlib import Path

import pytest

from advisor.errors import BadInput
from workloads.replay.lockstep import run_lockstep

CHILD = """
import sys, time
sys.path.insert(0, {root!r})
from workloads.replay.lockstep import Gate
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
    script.write_text(CHILD.format(root=str(Path(__file__).parents[2])))
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


def test_spark_memory_sizes_are_read_as_spark_reads_them():
    from workloads.replay.lockstep import size_bytes

    assert size_bytes("4g") == 4 << 30 and size_bytes("2048m") == 2 << 30 and size_bytes("2GB") == 2 << 30
    assert size_bytes("512") == 512 << 20  # no unit: MiB, as spark.driver.memory
    assert size_bytes("1t") == 1 << 40 and size_bytes("64k") == 64 << 10
    assert size_bytes("1.5g") is None and size_bytes("lots") is None and size_bytes("") is None


def test_isolate_warns_when_its_processes_do_not_fit_in_memory():
    """Nine 2 GiB children (about 4 GiB each with the JVM's and Python's own memory) do not fit in
    20 GiB; five do.  Six do not fit in the 23 GiB that one measured machine had available (they
    came within 0.9 GB of it).  Unknown figures give no warning rather than a guess."""
    from workloads.replay.lockstep import available_bytes, memory_warning

    gib = 1 << 30
    w = memory_warning(9, "2048m", 20 * gib)
    assert w is not None and "9 strategy processes" in w and "36.0 GiB" in w and "20.0 GiB" in w
    assert "\n" not in w
    assert memory_warning(5, "2048m", 20 * gib) is None
    assert memory_warning(5, "4g", 20 * gib) is not None  # the default heap: 30 GiB
    assert memory_warning(6, "2048m", 23 * gib) is not None
    assert memory_warning(9, "2048m", None) is None and memory_warning(9, "huge", 20 * gib) is None
    avail = available_bytes()
    assert avail is None or avail > 0


def test_a_resumed_run_counts_only_the_strategies_with_steps_left(tmp_path):
    """On a resumed run a finished strategy's process exits at once: only the others need memory.
    Before the run is prepared every listed strategy counts; a cut-off last log line is not a step."""
    import json

    from workloads.replay.runner import unfinished

    assert unfinished(tmp_path, ["NO-PS", "OPT"]) == ["NO-PS", "OPT"]
    (tmp_path / "plan.json").write_text(json.dumps({"steps": [{"step": 0}, {"step": 1}, {"step": 2}]}))
    lines = [{"type": "warmup", "strategy": "OPT", "step": None}]
    lines += [{"type": "query", "strategy": "NO-PS", "step": i} for i in range(3)]
    lines += [{"type": "query", "strategy": "OPT", "step": i} for i in range(2)]
    (tmp_path / "log.jsonl").write_text("\n".join(json.dumps(r) for r in lines) + '\n{"type": "que')
    assert unfinished(tmp_path, ["NO-PS", "OPT", "RAND-GB"]) == ["OPT", "RAND-GB"]
    (tmp_path / "plan.json").write_text("{not json")
    assert unfinished(tmp_path, ["NO-PS"]) == ["NO-PS"]


def test_a_child_gives_heap_back_only_below_its_floor():
    from workloads.replay.heap_release import floor_bytes, short_of_memory

    gib = 1 << 30
    assert floor_bytes(None, 20 * gib) == gib  # default: a twentieth of the machine
    assert floor_bytes("3g", 20 * gib) == 3 * gib and floor_bytes("512m", None) == gib // 2
    assert floor_bytes(None, None) is None and floor_bytes("", None) is None
    assert short_of_memory(gib, 2 * gib) and not short_of_memory(2 * gib, 2 * gib)
    assert not short_of_memory(None, 2 * gib) and not short_of_memory(gib, None)
    assert not short_of_memory(0, floor_bytes("0", 20 * gib))  # "0": never
    with pytest.raises(BadInput, match="ADVISOR_ISOLATE_MIN_FREE='lots' is not a memory size"):
        floor_bytes("lots", 20 * gib)


def test_meminfo_fields_are_read_in_bytes():
    from workloads.replay.lockstep import available_bytes, meminfo_bytes

    total, avail = meminfo_bytes("MemTotal"), available_bytes()
    assert total is not None and avail is not None  # the suite runs on Linux
    assert 0 < avail <= total and total % 1024 == 0
    assert meminfo_bytes("NoSuchField") is None
