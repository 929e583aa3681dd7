"""Recovery on open: make the store and the warehouse's files agree after an interrupted command.

Writes put files in place before the row that names them (``advisor.warehouse.atomic``), so a
killed command can leave only (a) temporaries, (b) files no row names yet, and -- for artefacts
written before this ordering, or files removed by hand -- (c) rows whose files are gone.  On open
the store removes (a) of processes that are gone, and, holding the writer lock (so no live writer
is between its rename and its commit), removes (b) and drops or empties (c).  Table versions are
never dropped: a version whose files are missing is reported, since later versions build on it.
The lock is taken only when something looks repairable: opening a clean store (every read-only
command) neither waits for a writer nor touches ``advisor.lock``.

A warehouse on a Hadoop file system (``hdfs://``, ``s3a://``) is not reconciled on open: its files
are reachable only through a Spark session, which opening a store does not start.  The write order
still holds there, so a killed writer leaves at most files no row names (space, never a wrong or
missing answer).
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Protocol

from advisor.warehouse import atomic
from advisor.warehouse.lock import try_writer_lock

ARTEFACT = re.compile(r"^(v\d{6}_(base|ins|del)|layout_|net_v\d{6}_v\d{6})")
_SIBLING_TMP = re.compile(r"\.(tmp|old)-(\d+)$")  # ``reservoir_local.write``'s siblings of a sample
OLD_TMP_AGE = 3600.0  # temporaries without an owner (an older naming) are removed after an hour


class ReconcilableStore(Protocol):
    """What recovery needs of the store being opened (``advisor.warehouse.store.Store`` has it):
    its local directory, whether its files are remote, its connection, and where a row's place is."""

    warehouse: Path
    remote: bool
    conn: sqlite3.Connection

    def resolve(self, stored: str | None) -> str | None: ...


def _scan_dirs(wh: Path) -> list[Path]:
    """The directories where writers put temporaries and artefacts (not inside artefacts)."""
    out = [wh, wh / "states", wh / "tables"]
    tables = wh / "tables"
    if tables.is_dir():
        for t in tables.iterdir():
            if t.is_dir() and not t.name.startswith("."):
                out += [t, t / "samples"]
    return [d for d in out if d.is_dir()]


def _stale_tmp(p: Path) -> bool:
    name = p.name
    if atomic.owner(name) is not None:
        return atomic.owner_gone(name)
    m = _SIBLING_TMP.search(name)
    if m is not None and p.parent.name == "samples":
        return atomic.pid_gone(int(m[2]))
    if name.startswith((".tmp-", ".staging-")) or name == ".advisor.db.tmp":
        try:
            return time.time() - p.stat().st_mtime > OLD_TMP_AGE
        except OSError:
            return False
    return False


def _key(path: str | Path) -> tuple[str, ...]:
    """A path's place inside its warehouse (from its last ``tables`` or ``states`` component): rows
    name absolute or relative paths, and a copied or moved warehouse keeps its files' places.

    >>> _key("/w/tables/crimes/v000001_base"), _key("rel/states/sketch_3.state")
    (('tables', 'crimes', 'v000001_base'), ('states', 'sketch_3.state'))
    """
    parts = Path(path).parts
    at = max((i for i, p in enumerate(parts) if p in ("tables", "states")), default=0)
    return parts[at:]


def _referenced(store: ReconcilableStore) -> set[tuple[str, ...]]:
    """The places (``_key``) of every path a store row names, with each one's parent (net blocks
    name files inside their directory)."""
    paths: list[str] = []
    q = store.conn.execute
    for r in q("SELECT base_path, ins_path, del_path FROM versions WHERE kind != 'delta'"):
        paths += [p for p in r if p]
    paths += [r[0] for r in q("SELECT path FROM layouts")]
    paths += [r[0] for r in q("SELECT path FROM samples")]
    paths += [r[0] for r in q("SELECT path FROM states WHERE path != ''")]
    for r in q("SELECT ins_path, del_path FROM net_deltas"):
        paths += [p for p in r if p]
    out = set()
    for p in paths:
        k = _key(p)
        out |= {k, k[:-1]}
    return out


def _dangling(store: ReconcilableStore, repair: bool = True) -> tuple[list[str], list[str]]:
    """Repair rows whose files are gone (``repair=False``: only find them); returns (what was or
    would be repaired, versions that cannot be)."""
    fixed, broken = [], []
    c = store.conn
    fix = c.execute if repair else (lambda *a: None)
    at = store.resolve  # rows name places below the warehouse root (``advisor.warehouse.stored_paths``)
    for r in c.execute("SELECT id, table_name, attr, path, manifest_json FROM layouts").fetchall():
        d = Path(at(r[3]))
        files = [d / m["path"] for m in json.loads(r[4])]  # each file's name in the copy's directory
        if not d.is_dir() or not all(f.exists() for f in files):
            fix("DELETE FROM layouts WHERE id=?", (r[0],))
            fixed.append(f"layout {r[0]} ({r[1]}.{r[2]})")
    for r in c.execute("SELECT id, table_name, path FROM samples").fetchall():
        if not Path(at(r[2])).exists():
            fix("DELETE FROM samples WHERE id=?", (r[0],))
            fixed.append(f"sample {r[0]} of {r[1]}")
    for r in c.execute("SELECT sketch_id, path FROM states WHERE path != ''").fetchall():
        if not Path(at(r[1])).is_file():
            fix("UPDATE states SET path='' WHERE sketch_id=?", (r[0],))
            fixed.append(f"state of sketch {r[0]}")
    nets = c.execute("SELECT table_name, from_version, to_version, ins_path, del_path "
                     "FROM net_deltas").fetchall()
    for r in nets:
        if not all(Path(at(p)).exists() for p in r[3:] if p):
            fix("DELETE FROM net_deltas WHERE table_name=? AND from_version=? AND to_version=?", r[:3])
            fixed.append(f"net delta {r[0]} {r[1]}-{r[2]}")
    for r in c.execute("SELECT table_name, version, base_path, ins_path, del_path FROM versions "
                       "WHERE kind != 'delta'").fetchall():
        if not all(Path(at(p)).exists() for p in r[2:] if p):
            broken.append(f"{r[0]} version {r[1]}")
    return fixed, broken


def _orphans(store: ReconcilableStore, dirs: list[Path]) -> list[Path]:
    """Artefacts in the warehouse's own directories that no row names (renamed into place by a
    command killed before its commit)."""
    refs = _referenced(store)
    out = []
    for d in dirs:
        for p in d.iterdir():
            name = p.name
            if name.startswith(".") or _SIBLING_TMP.search(name):
                continue
            own = (d.parent.name == "tables" and ARTEFACT.match(name)) or d.name == "samples" or (
                d.name == "states" and d.parent == store.warehouse and name.endswith(".state"))
            if own and _key(p) not in refs:
                out.append(p)
    return out


def _repairs_due(store: ReconcilableStore, dirs: list[Path]) -> bool:
    """Whether anything looks repairable, judged without the lock (``reconcile`` judges again
    holding it): a row whose files are gone, or a file no row names."""
    fixed, broken = _dangling(store, repair=False)
    return bool(fixed or broken) or bool(_orphans(store, dirs))


def reconcile(store: ReconcilableStore) -> list[str]:
    """Repair what an interrupted command left (module docstring); returns one phrase per kind of
    repair (empty when there was nothing to do)."""
    wh = store.warehouse
    if store.remote:
        return []  # module docstring
    dirs = _scan_dirs(wh)
    temps = [p for d in dirs for p in d.iterdir() if _stale_tmp(p)]
    for p in temps:
        atomic.remove(p)
        atomic.crash_point("reconcile.removed")
    notes = [f"removed {len(temps)} temporary file(s) of interrupted commands"] if temps else []
    if not _repairs_due(store, dirs):  # the common case: a read-only command leaves the lock alone
        return notes
    with try_writer_lock(wh) as got:
        if not got:
            return notes
        c = store.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            fixed, broken = _dangling(store)
        except BaseException:
            c.execute("ROLLBACK")
            raise
        c.execute("COMMIT")
        orphans = _orphans(store, dirs)  # after the rows: a dropped layout's remaining files go too
        for p in orphans:
            atomic.remove(p)
        if orphans:
            notes.append(f"removed {len(orphans)} file(s) no store row names")
        if fixed:
            notes.append(f"dropped {len(fixed)} store row(s) whose files were missing ({', '.join(fixed[:3])}"
                         f"{', ...' if len(fixed) > 3 else ''})")
        if broken:
            notes.append(f"files missing for {', '.join(broken[:3])}{', ...' if len(broken) > 3 else ''} "
                         "(restore them; these versions cannot be read)")
    return notes
