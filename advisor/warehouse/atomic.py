"""Crash-consistent writes: files first under a temporary name, then renamed into place, then the
store row that names them, committed in one transaction under the writer lock.

Temporary names carry their host and process id (``.tmp-<host>-<pid>-<random>``) so recovery
(``advisor.warehouse.reconcile``) removes only those of processes that are gone; final names of
new artefacts carry a random suffix, so two writers never write, rename over or delete each
other's files, and a rebuilt artefact never replaces one an older row still names.

``crash_point(name)`` marks the moments between those steps.  With ``ADVISOR_CRASH_AT=NAME:N``
(NAME ``*`` for any) the process kills itself with SIGKILL at the N-th such moment; with
``ADVISOR_PAUSE_AT=NAME`` it creates the file ``ADVISOR_PAUSE_FILE`` and waits there until the file
is removed (or the process killed): crash tests use both to stop a real command at a chosen moment.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import time
import uuid
from pathlib import Path

from advisor.warehouse import filesystem

TMP = ".tmp-"
_TMP_RE = re.compile(r"^\.tmp-(?P<host>[^-]*)-(?P<pid>\d+)-")
_HOST = re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname())[:40]
_counts: dict[str, int] = {}


def tmp_name(kind: str = "") -> str:
    """A fresh temporary name for this process (``kind``: a readable tag).

    >>> n = tmp_name("ins"); n.startswith(".tmp-") and owner(n)[1] == os.getpid()
    True
    """
    return f"{TMP}{_HOST}-{os.getpid()}-{uuid.uuid4().hex[:12]}{'-' + kind if kind else ''}"


def unique(stem: str) -> str:
    """A final name for a new artefact: ``stem`` plus a random suffix (never an existing name).

    >>> unique("v000002_ins").startswith("v000002_ins-")
    True
    """
    return f"{stem}-{uuid.uuid4().hex[:12]}"


def owner(name: str) -> tuple[str, int] | None:
    """(host, pid) of the process that made temporary ``name``, or None if it is not one of ours.

    >>> owner(".tmp-box-42-abc") , owner("v000001_base")
    (('box', 42), None)
    """
    m = _TMP_RE.match(name)
    return (m["host"], int(m["pid"])) if m else None


def is_tmp(name: str) -> bool:
    return name.startswith(TMP)


def owner_gone(name: str) -> bool:
    """Whether the process that made temporary ``name`` no longer runs on this host.  A temporary of
    another host, or of an older naming, is left alone unless it is older than a day."""
    o = owner(name)
    if o is None or o[0] != _HOST:
        return False
    pid = o[1]
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return _zombie(pid)


def pid_gone(pid: int) -> bool:
    """Whether process ``pid`` of this host no longer runs."""
    return owner_gone(f"{TMP}{_HOST}-{pid}-x")


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def remove(path) -> None:
    """Remove a file or directory tree if present (on any file system: ``filesystem``)."""
    if not filesystem.is_local(str(path)):
        filesystem.for_path(str(path)).remove(str(path))
        return
    p = Path(filesystem.local_path(str(path)))
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        p.unlink(missing_ok=True)


def fsync_tree(path: Path) -> None:
    """Flush a written file, or a directory's files and the directory itself, to stable storage
    (a rename is durable only once the data it names is)."""
    for p in [path] if path.is_file() else [*(p for p in path.rglob("*") if p.is_file()), path]:
        _fsync_dir(p)


def _fsync_dir(path: Path) -> None:
    """fsync one file or directory, as far as the file system allows: some (network or FUSE file
    systems, directories on a few platforms) refuse to open or flush it, and then the rename's own
    ordering is all there is."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # flushing refused by the file system (docstring)
    finally:
        os.close(fd)


def publish(tmp, final) -> None:
    """Move a finished temporary file or directory to its final (new) name, durably.  On a Hadoop
    file system the rename is the file system's (atomic on HDFS; ``filesystem`` on object stores)."""
    if not filesystem.is_local(str(final)):
        filesystem.for_path(str(final)).rename(str(tmp), str(final))
        return
    fsync_tree(tmp)
    os.rename(tmp, final)
    _fsync_dir(final.parent)


def write_bytes(final: Path, data: bytes) -> None:
    """Write ``data`` to ``final`` through a temporary file in the same directory."""
    tmp = final.with_name(tmp_name())
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(final.parent)


def moments() -> int:
    """How many crash points this process has passed."""
    return _counts.get("", 0)


def crash_point(name: str) -> None:
    """A named moment between the steps of a write (module docstring); does nothing unless a crash
    test asks for it."""
    _counts[""] = _counts.get("", 0) + 1  # every moment passed (``moments``)
    at = os.environ.get("ADVISOR_CRASH_AT")
    if at:
        want, _, n = at.rpartition(":")
        if want in ("*", name):
            _counts[want] = _counts.get(want, 0) + 1
            if _counts[want] == int(n or 1):
                os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get("ADVISOR_PAUSE_AT") == name and os.environ.get("ADVISOR_PAUSE_FILE"):
        marker = Path(os.environ["ADVISOR_PAUSE_FILE"])
        marker.write_text(str(os.getpid()))
        while marker.exists():
            time.sleep(0.05)
