"""A lockstep child gives its JVM's idle heap back to the machine when memory runs short.

Why: under ``--isolate`` every strategy keeps a JVM alive for the whole run, and a JVM keeps the
heap it once committed.  A run of six strategies (spark.driver.memory=2048m, SF1) fell to
0.87 GB available of 23.5 GB at step 45, with JVMs at 2.9-3.0 GB resident; only a hand-run
``jcmd GC.run`` on the idle JVMs (after lowering ``MaxHeapFreeRatio`` to 40) kept the kernel from
killing one, and it freed 4.5 GB.  This does the same from inside: after a step, before the child
waits at the gate, it checks MemAvailable and, when short, runs a full GC with ``MaxHeapFreeRatio``
lowered for it, so G1 uncommits what it does not use.  The child is between timed steps and the parent waits
for it, so no strategy's timed step runs beside the collection; but the next step regrows the heap,
so the query records it precedes say so (``"heap"``) and the summary counts them."""

from __future__ import annotations

import os
import time
from typing import Optional

from advisor.errors import BadInput
from workloads.replay.lockstep import available_bytes, meminfo_bytes, size_bytes

ENV = "ADVISOR_ISOLATE_MIN_FREE"  # a Spark size ("3g"); below it a child gives heap back ("0": never)
# Default floor: a twentieth of the machine's memory (1.2 GB of 23.5 GB, where a run was rescued
# by hand).  Not higher: each release costs the child's next step the heap's regrowth, measured at
# 2-4 s per SF1 step (BENCHMARKS.md), so it is a last resort before the OOM killer.
FLOOR_SHARE = 0.05
FREE_RATIO = "40"  # G1 shrinks a full GC's heap to at most 40 % free (JVM default 70 %)


def floor_bytes(setting: Optional[str], total: Optional[int]) -> Optional[int]:
    """The MemAvailable below which a child gives heap back: ``setting`` (a Spark size) if given,
    else ``FLOOR_SHARE`` of ``total``; None (never) when neither is known.  A setting that is not a size is
    bad input."""
    if setting is not None and setting.strip():
        floor = size_bytes(setting)
        if floor is None:
            raise BadInput(f"{ENV}={setting!r} is not a memory size (e.g. 3g, 2048m, 0)")
        return floor
    return int(total * FLOOR_SHARE) if total else None


def short_of_memory(available: Optional[int], floor: Optional[int]) -> bool:
    """True when the machine has less than ``floor`` bytes available (unknown figures: never)."""
    return available is not None and floor is not None and available < floor


def give_back_heap(spark) -> int:
    """Run a full GC with ``MaxHeapFreeRatio`` (a manageable flag) lowered for it, then restore the
    flag, so the JVM sizes its heap as before until the next release; returns the bytes of committed
    heap released."""
    jvm = spark._jvm
    mf = jvm.java.lang.management.ManagementFactory
    bean = mf.getPlatformMXBean(jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    old = bean.getVMOption("MaxHeapFreeRatio").getValue()
    rt = jvm.java.lang.Runtime.getRuntime()
    before = rt.totalMemory()
    bean.setVMOption("MaxHeapFreeRatio", FREE_RATIO)
    try:
        jvm.java.lang.System.gc()
    finally:
        bean.setVMOption("MaxHeapFreeRatio", old)
    return max(0, before - rt.totalMemory())


class HeapKeeper:
    """The child's check between steps: gives heap back when the machine is short."""

    def __init__(self, spark, floor: Optional[int] = None):
        self.spark = spark
        self.floor = floor if floor is not None else floor_bytes(os.environ.get(ENV), meminfo_bytes("MemTotal"))

    def between_steps(self) -> Optional[dict]:
        """Give heap back if the machine is short; returns what that did (for the step's log entry)."""
        if not short_of_memory(available_bytes(), self.floor):
            return None
        t0 = time.perf_counter()
        released = give_back_heap(self.spark)
        return {"released_bytes": released, "seconds": round(time.perf_counter() - t0, 4)}
