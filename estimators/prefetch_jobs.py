"""The estimators' one helper thread and the prefetched results waiting on it to be claimed.

A prefetch (``estimators.prefetch``) publishes its key as soon as it knows it, then computes; a
draw that would compute the same thing ``claim``s the result under its own key instead.  Kept
apart from what is prefetched, so that the code that draws can claim without importing the code
that schedules the drawing.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

_POOL: Optional[ThreadPoolExecutor] = None
_JOBS: list = []
_LOCK = threading.Lock()
CLAIMED = {"hit": 0, "miss": 0}  # for tests and benchmarks: claims served by a prefetch, or not


def helper_pool() -> ThreadPoolExecutor:
    """The estimators' one helper thread (created on first use): the machine's second core for
    numpy work that overlaps the driver's own (prefetched replicates, the draw's hash keys)."""
    global _POOL
    with _LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(1, thread_name_prefix="advisor-helper")
        return _POOL


def _forget_in_child() -> None:
    """A forked child has none of its parent's threads: work submitted to the parent's pool would
    wait for a thread that is not there, so the child starts a pool (and a job list) of its own."""
    global _POOL, _LOCK
    _POOL, _LOCK = None, threading.Lock()
    _JOBS.clear()


os.register_at_fork(after_in_child=_forget_in_child)


class Job:
    """One prefetch: its key, published as soon as the layout is known, then the blocks."""

    def __init__(self) -> None:
        self.key: Optional[tuple] = None
        self.ready = threading.Event()
        self.future = None


def submit(job: Job, run) -> None:
    """Run ``run()`` on the helper thread as ``job``'s computation and list the job for ``claim``."""
    pool = helper_pool()
    with _LOCK:
        job.future = pool.submit(run)
        _JOBS.append(job)


def pending() -> int:
    """Prefetches listed and not yet claimed."""
    return len(_JOBS)


def discard_pending() -> int:
    """Forget every unclaimed prefetch (a warm-up leaves none behind); returns how many."""
    with _LOCK:
        n = len(_JOBS)
        _JOBS.clear()
    return n


def claim(key: tuple) -> Optional[tuple]:
    """``(blocks, generator state after them)`` prefetched under ``key``, or None.  Every pending
    prefetch is taken off the list: one serves the next draw or none (an unclaimed one is only
    memory until it finishes)."""
    with _LOCK:
        jobs = _JOBS[:]
        _JOBS.clear()
    for job in jobs:
        job.ready.wait()
        if job.key == key:
            CLAIMED["hit"] += 1
            return job.future.result()
    CLAIMED["miss"] += 1
    return None
