"""Driver memory valve for the in-process caches.

Each cache (operator states, bootstrap replicate blocks, group estimates, sample rows, join sides)
has its own bound (``advisor.caches``), but together they took a replay's strategy process to
4.4 GB resident, and the kernel killed it beside four JVMs (TPC-H SF1, BENCHMARKS.md).  Every memo
with a ``rank`` in the registry can ``shrink`` by its least recently used entry; ``relieve``
empties them in rank order while the process's resident set is above the budget.  Every cached value can be
rebuilt (states are on disk, draws are seeded), so dropping costs time, never answers.

Budget: ``ADVISOR_DRIVER_CACHE_MB`` (resident megabytes above which caches are dropped), else
``DEFAULT_FRACTION`` of physical memory, at most ``DEFAULT_MAX_MB``.  Off where ``/proc`` does not
give the resident set (not Linux).
"""

from __future__ import annotations

import ctypes
import gc
import os

from advisor import caches
from advisor.errors import BadInput

ENV = "ADVISOR_DRIVER_CACHE_MB"
DEFAULT_FRACTION = 0.1
DEFAULT_MAX_MB = 2048


def rss_bytes() -> int:
    """This process's resident set in bytes (0 where ``/proc/self/statm`` is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def budget_bytes() -> int:
    """The resident set above which caches are dropped (module docstring)."""
    env = os.environ.get(ENV, "").strip()
    if env:
        try:
            mb = float(env)
        except ValueError:
            mb = -1.0
        if not mb > 0:
            raise BadInput(f"{ENV} must be a positive number of megabytes, got {env!r}")
        return int(mb * (1 << 20))
    try:
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        phys = 0
    cap = DEFAULT_MAX_MB << 20
    return min(cap, int(DEFAULT_FRACTION * phys)) if phys > 0 else cap


def _trim_heap() -> None:
    """Hand freed heap pages back to the system (glibc keeps them otherwise, and the resident set
    would not show what dropping freed)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _drops():
    """Drop cache entries one at a time, lowest rank first and least recently used first within a
    cache; yields after each one."""
    for memo in caches.ranked():
        while memo.shrink():
            yield


def empty_all() -> int:
    """Empty every registered memo, the valve's lowest rank first; returns the entries dropped (a
    replay's warm-up leaves the interpreter and the JVM warm, not the data it cached:
    ``workloads.replay.warmup``)."""
    dropped = caches.drain_all()
    gc.collect()
    _trim_heap()
    return dropped


def relieve(budget: int | None = None) -> int:
    """Drop cache entries, lowest rank first and least recently used first within a cache, while
    the resident set exceeds ``budget`` (default ``budget_bytes()``) and something is left to drop;
    returns the number dropped."""
    limit = budget_bytes() if budget is None else budget
    if rss_bytes() <= limit:
        return 0
    dropped = 0
    for _ in _drops():
        dropped += 1
        gc.collect()
        _trim_heap()
        if rss_bytes() <= limit:
            break
    return dropped
