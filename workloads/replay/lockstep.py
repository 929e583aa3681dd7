"""Lockstep scheduling for ``advisor replay --isolate``: one child process (one JVM) per strategy,
all alive at once, released one step at a time in step order.

Why: strategies replayed one after another are timed minutes apart, and this machine's speed drifts
over minutes (the same plain query, probed every 8 steps inside two strategies' processes, took
1.5-1.9 s in one and 1.6-2.5 s in the other; BENCHMARKS.md).  Interleaving the
strategies step by step puts every strategy's step i at the same time, so drift hits them alike,
while only one child runs at any moment (no contention between them).

Protocol: the parent passes two pipe ends in ``ADVISOR_REPLAY_GATE`` (``read_fd,write_fd``).  Before
each step it has not finished, a child writes ``wait STEP`` and blocks until the parent writes
``go``; after its last step it writes ``end``.  The parent always releases the child waiting on the
smallest step (ties: the workload's strategy order)."""

from __future__ import annotations

import os
import subprocess
from typing import Optional

from advisor.errors import BadInput

ENV = "ADVISOR_REPLAY_GATE"


class Gate:
    """The child's side: ``wait(step)`` before each step, ``end()`` after the last."""

    def __init__(self, spec: str):
        rfd, wfd = (int(x) for x in spec.split(","))
        self._r = os.fdopen(rfd, "r")
        self._w = os.fdopen(wfd, "w")

    @classmethod
    def from_env(cls) -> Optional["Gate"]:
        spec = os.environ.get(ENV)
        return cls(spec) if spec else None

    def wait(self, step: int) -> None:
        self._w.write(f"wait {step}\n")
        self._w.flush()
        if self._r.readline().strip() != "go":
            raise BadInput("the lockstep parent of this replay went away")

    def end(self) -> None:
        self._w.write("end\n")
        self._w.flush()


class _Child:
    """The parent's handle on one strategy's process."""

    def __init__(self, strategy: str, argv: list[str]):
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        env = dict(os.environ, **{ENV: f"{to_child_r},{from_child_w}"})
        self.strategy = strategy
        self.proc = subprocess.Popen(argv, env=env, pass_fds=(to_child_r, from_child_w))
        os.close(to_child_r)
        os.close(from_child_w)
        self._w = os.fdopen(to_child_w, "w")
        self._r = os.fdopen(from_child_r, "r")
        self.step: Optional[int] = None

    def next_message(self) -> bool:
        """Read the child's next request; True while it waits on a step, False once it ended."""
        line = self._r.readline().split()
        if line[:1] == ["wait"] and len(line) == 2:
            self.step = int(line[1])
            return True
        rc = self.proc.wait()
        if rc != 0 or line[:1] != ["end"]:
            raise BadInput(f"the replay of strategy {self.strategy} in its own process exited with code {rc}")
        return False

    def release(self) -> None:
        self._w.write("go\n")
        self._w.flush()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def run_lockstep(argvs: dict[str, list[str]], on_step=None) -> None:
    """Start one child per strategy (in order; each after the previous one reached its first step,
    so the first prepares the run alone) and release them step by step.  ``on_step(strategy, step)``
    is called after each released step finishes."""
    order = {s: i for i, s in enumerate(argvs)}
    waiting: list[_Child] = []
    children: list[_Child] = []
    try:
        for s, argv in argvs.items():
            c = _Child(s, argv)
            children.append(c)
            if c.next_message():
                waiting.append(c)
        while waiting:
            c = min(waiting, key=lambda x: (x.step, order[x.strategy]))
            done = c.step
            c.release()
            if not c.next_message():
                waiting.remove(c)
            if on_step is not None:
                on_step(c.strategy, done)
    finally:
        for c in children:
            c.kill()


# A lockstep child's footprint beyond its JVM heap: the JVM's own native memory (code cache,
# metaspace, buffers) and the Python driver with its operator states.  Measured at
# spark.driver.memory=2048m over 45 steps of tpch_two_gb_200_sf1: JVMs at 2.9-3.0 GB resident, the
# sketched strategies' Python drivers at 1.1-1.2 GB (NO-PS's 0.35 GB), so heap + ~2 GB; six such
# children left 0.9 GB of 23.5 GB available (an estimate of heap + 1 GB had said they fit).
CHILD_OVERHEAD = 2 << 30
_UNITS = {"": 1 << 20, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}  # Spark: no unit = MiB


def size_bytes(text: str) -> Optional[int]:
    """A Spark memory size (``4g``, ``2048m``, ``512``: MiB) in bytes; None if it is not one."""
    t = str(text).strip().lower().removesuffix("b")
    num = t.rstrip("kmgt")
    unit = t[len(num):]
    if not num.isdigit() or unit not in _UNITS:
        return None
    return int(num) * _UNITS[unit]


def meminfo_bytes(field: str) -> Optional[int]:
    """A /proc/meminfo field (``MemAvailable``, ``MemTotal``) in bytes; None where there is none
    (not Linux)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def available_bytes() -> Optional[int]:
    """MemAvailable: what the machine can still give without swapping."""
    return meminfo_bytes("MemAvailable")


def memory_warning(children: int, driver_memory: str, available: Optional[int]) -> Optional[str]:
    """One line if ``children`` processes alive at once, each with a ``driver_memory`` heap, would
    need more than ``available`` bytes: the kernel's OOM killer then ends one mid-run (a run was
    lost that way).  None when they fit or either figure is unknown."""
    heap = size_bytes(driver_memory)
    if heap is None or available is None:
        return None
    need = children * (heap + CHILD_OVERHEAD)
    if need <= available:
        return None
    gib = 1 << 30
    return (f"warning: --isolate keeps {children} strategy processes alive at once, about "
            f"{need / gib:.1f} GiB at spark.driver.memory={driver_memory} against {available / gib:.1f} GiB "
            "available; list fewer strategies per run (--strategies) or lower spark.driver.memory")
