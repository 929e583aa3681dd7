"""The warehouse's writer lock: one writer at a time publishes files and commits store rows.

An exclusive ``flock`` on ``advisor.lock`` beside ``advisor.db``, held only for a commit section
(renaming finished files into place and committing the rows that name them), so holders are brief.
A writer that cannot take it within ``ADVISOR_LOCK_WAIT`` seconds (default 60) stops with
"warehouse busy", naming the holder (exit code 2).  The lock is re-entrant within a process and is
released by the kernel when its holder dies, so a killed command never leaves it held.

Scope: writers on one machine, or on several machines sharing a POSIX file system whose ``flock``
is coherent (a local disk, NFSv4).  The store lives with the driver that owns the warehouse; a
second driver on another machine must not open the same ``advisor.db``: it would see a lock that
guards nothing it shares.  Object stores (S3) and HDFS have no such lock; there the warehouse's
table files may live remotely, but the store and its lock stay on one driver.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from advisor.errors import BadInput

LOCK_FILE = "advisor.lock"
DEFAULT_WAIT = 60.0


class WarehouseBusy(BadInput):
    """Another writer holds the warehouse's lock past the wait: one line, exit code 2."""


_held: dict[str, list] = {}  # lock path -> [fd, depth]: re-entrant within this process


def wait_seconds() -> float:
    """How long a writer waits for the lock (``ADVISOR_LOCK_WAIT``, seconds).

    >>> os.environ.pop("ADVISOR_LOCK_WAIT", None) and None; wait_seconds()
    60.0
    """
    raw = os.environ.get("ADVISOR_LOCK_WAIT")
    if raw is None:
        return DEFAULT_WAIT
    try:
        v = float(raw)
    except ValueError:
        raise BadInput(f"ADVISOR_LOCK_WAIT must be a number of seconds, got {raw!r}") from None
    if v < 0:
        raise BadInput(f"ADVISOR_LOCK_WAIT must be >= 0, got {raw!r}")
    return v


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return "another process"
    since = time.strftime("%H:%M:%S", time.localtime(info.get("since", 0)))
    who = f"pid {info.get('pid', '?')} on {info.get('host', '?')}"
    return f"{who} ({info.get('command', '?')}, since {since})"


def _command() -> str:
    args = [a for a in sys.argv[1:] if not a.startswith("-")][:3]
    return "advisor " + " ".join(args) if args else "advisor"


@contextmanager
def writer_lock(warehouse: Path | str, wait: float | None = None) -> Iterator[None]:
    """Hold the warehouse's writer lock for the ``with`` block, waiting at most ``wait`` seconds
    (default ``wait_seconds()``); ``WarehouseBusy`` when another process keeps it longer."""
    path = Path(warehouse) / LOCK_FILE
    key = str(path.resolve())
    if key in _held:
        _held[key][1] += 1
        try:
            yield
        finally:
            _held[key][1] -= 1
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + (wait_seconds() if wait is None else wait)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise WarehouseBusy(f"warehouse busy: {_holder(path)} is writing to {path.parent}; "
                                        "try again when it finishes (or raise ADVISOR_LOCK_WAIT)") from None
                time.sleep(0.05)
        info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": _command(),
                           "since": time.time()})
        os.ftruncate(fd, 0)
        os.pwrite(fd, info.encode(), 0)
    except BaseException:
        os.close(fd)
        raise
    _held[key] = [fd, 1]
    try:
        yield
    finally:
        _held.pop(key, None)
        os.close(fd)  # closing the descriptor releases the flock


def try_writer_lock(warehouse: Path | str):
    """The writer lock if it is free right now, else None (recovery skips work another writer may
    be in the middle of).  Use as ``with try_writer_lock(w) as got:``."""
    return _TryLock(Path(warehouse))


class _TryLock:
    def __init__(self, warehouse: Path):
        self._cm = writer_lock(warehouse, wait=0.0)
        self._mine = str((warehouse / LOCK_FILE).resolve()) in _held

    def __enter__(self) -> bool:
        if self._mine:  # this process is inside a commit section: not a moment to recover
            self._cm = None
            return False
        try:
            self._cm.__enter__()
        except WarehouseBusy:
            self._cm = None
            return False
        return True

    def __exit__(self, *exc) -> None:
        if self._cm is not None:
            self._cm.__exit__(*exc)
