"""Operator-state persistence: one file per sketch head, behind an in-process write-behind cache.

Writing a state is the costly part of a maintenance step: for TPC-H SF1's 1.5M-group HAVING state,
pickling and zlib take 0.55-0.7 s against 14 ms of engine work (BENCHMARKS.md).  And a
head's state is usually superseded by the chain's next step before anyone reads its file.  So
``save`` records the state's row (its initialisation record, no file yet) in SQLite and keeps the
state in memory, marked dirty.  The file is written (temp file + rename, then the row's path is
set, under the writer lock) when:
- the entry is evicted (the LRU budget or the memory valve);
- someone calls ``flush``, including the ``atexit`` hook at the end of every process;
- never, for a head superseded first (``prune`` drops its entry).
A row without a file and whose state is not cached (a process killed before its flush) reads as no
state, so the chain re-initialises or recaptures: that costs time, never answers.  A row names a
file only once the file is complete, so a killed process leaves no row naming a missing file.
"""

from __future__ import annotations

import atexit
import copy
import json
import pickle
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from advisor import memory
from advisor.caches import BoundedMemo
from advisor.maintain.engine import MaintState
from advisor.maintain.spark.bulk_init import plain_agg_op
from advisor.warehouse import atomic, stored_paths
from advisor.warehouse.lock import writer_lock
from advisor.warehouse.sketch_records import latest_versions

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog
    from advisor.warehouse.store import Store

CACHE_BYTES = 1 << 30  # in-process budget for operator state kept unpickled (LRU, by ``memory_bytes``)


def _write(key: tuple[str, int], path: Path, state: MaintState) -> int:
    """Write the state's file atomically (temp name, then rename) and then name it in its row,
    under the writer lock; returns its size.  A scratch store deleted meanwhile is skipped."""
    db = Path(key[0])
    if not db.exists():
        return 0
    data = state.to_bytes()
    with writer_lock(db.parent):
        atomic.write_bytes(path, data)
        atomic.crash_point("state.renamed")
        _set_path(key, str(path))
    return len(data)


def _set_path(key: tuple[str, int], path: str) -> None:
    """Name ``path`` in the state row of ``key``: through the open store if there is one (joining
    its transaction if one is open), else through a connection of its own."""
    store = _open_stores.get(key[0])
    place = stored_paths.to_stored(str(Path(key[0]).parent.absolute()), path)  # below the warehouse root
    sql, args = "UPDATE states SET path=? WHERE sketch_id=?", (place, key[1])
    if store is not None:
        try:
            store.conn.execute(sql, args)
            return
        except sqlite3.ProgrammingError:  # closed since
            pass
    conn = sqlite3.connect(key[0], timeout=30, isolation_level=None)
    try:
        conn.execute(sql, args)
    finally:
        conn.close()


def _write_if_dirty(key, entry) -> None:
    """An evicted entry's file is written first if it is dirty."""
    state, _, pending = entry
    if pending is not None:
        _write(key, pending, state)


_open_stores: dict = {}  # store path -> the Store that saved states there (for ``_set_path``)

# (store path, sketch id) -> [state, bytes, file still to write or None]; used every maintenance
# step, so the memory valve drops it last
_cache = BoundedMemo("operator states", max_bytes=CACHE_BYTES, size_of=lambda e: e[1], rank=9,
                     on_evict=_write_if_dirty)


def _drop_oldest() -> bool:
    """Evict the least recently used entry, writing its file first if it is dirty (False once the
    cache is empty)."""
    return _cache.shrink()


def _put(key: tuple[str, int], state, size: int, pending: Path | None = None) -> None:
    """Keep ``state`` in memory (``pending``: its file, not yet written); evict least recently
    used entries beyond the budget, and relieve the memory valve."""
    _cache.put(key, [state, size, pending])
    memory.relieve()


def state_dir(store: Store) -> Path:
    d = store.warehouse / "states"
    d.mkdir(parents=True, exist_ok=True)
    return d


def save(catalog: Catalog, sketch_id: int, state: MaintState, init: dict | None = None) -> int:
    """Record the state of head ``sketch_id`` (its row now, its file later: module docstring);
    ``init`` = {init_seconds, init_rows, init_groups} when it was just initialised (the rate feeds
    ``rent.init_rate``).  Returns the state's in-memory size estimate in bytes."""
    store = catalog.store
    path = state_dir(store) / f"sketch_{sketch_id}.state"
    size = state.memory_bytes()
    meta = {"bytes": size, "groups": _groups(state)} | (init or {})
    with store.tx() as c:
        c.execute("INSERT OR REPLACE INTO states(sketch_id, path, meta_json, created) VALUES (?,?,?,?)",
                  (sketch_id, "", json.dumps(meta), time.time()))
    _open_stores[str(store.path)] = store
    _put((str(store.path), sketch_id), state, size, path)
    return size


def _groups(state: MaintState) -> int | None:
    """Groups held by the state's lowest aggregation (what a derivation copies), or None."""
    op = plain_agg_op(state)
    return len(op.index) if op is not None else None


def groups(store: Store, sketch_id: int) -> int | None:
    """Groups the sketch's live state held when it was saved (its ``states`` row), or None when
    it has no state or none was recorded."""
    if not has(store, sketch_id):
        return None
    r = store.one("SELECT meta_json FROM states WHERE sketch_id=?", (sketch_id,))
    g = json.loads(r["meta_json"]).get("groups") if r is not None else None
    return int(g) if g is not None else None


def template_groups(store: Store, template: str | None) -> int | None:
    """Groups the newest recorded state of any sketch of ``template`` held, or None."""
    if template is None:
        return None
    r = store.one("SELECT json_extract(st.meta_json, '$.groups') AS g FROM states st JOIN sketches s "
                  "ON s.id = st.sketch_id WHERE s.template=? AND json_extract(st.meta_json, '$.groups') "
                  "IS NOT NULL ORDER BY st.sketch_id DESC LIMIT 1", (template,))
    return int(r["g"]) if r is not None else None


def load(catalog: Catalog, sketch_id: int) -> MaintState | None:
    """The sketch's operator state, taken out of the cache (the caller mutates it and saves the
    result under the next head's id) or read from its file; None if it has none."""
    hit = _cache.pop((str(catalog.store.path), sketch_id), None)
    if hit is not None:
        return hit[0]
    path = _file(catalog.store, sketch_id)
    if path is None:
        return None
    try:
        return MaintState.from_bytes(path.read_bytes())
    except (ValueError, pickle.UnpicklingError, EOFError):
        return None  # damaged state: fall back to re-initialisation


def peek(catalog: Catalog, sketch_id: int) -> MaintState | None:
    """The sketch's state to read, not to change (the cached object itself, or read from its
    file), or None.  A caller that keeps parts of it copies them (``fresh``)."""
    hit = _cache.get((str(catalog.store.path), sketch_id))
    if hit is not None:
        _cache.move_to_end((str(catalog.store.path), sketch_id))
        return hit[0]
    path = _file(catalog.store, sketch_id)
    return MaintState.from_bytes(path.read_bytes()) if path is not None else None


_IMMUTABLE = (int, float, str, bytes, bool, tuple, frozenset, type(None), np.generic)


def fresh(x):
    """An independent copy of a piece of operator state: arrays copied (object arrays hold
    immutable ints and frozensets, so a shallow copy is a full one), containers and plain objects
    rebuilt, immutable values shared.  For SF1 ``GROUP BY l_orderkey`` (1.5M groups) the lowest
    aggregation's arrays copy in milliseconds, where pickling the whole state took 0.17 s.

    >>> import numpy as np
    >>> a = {"c": np.arange(3), "m": [{1: {2: 3}}]}
    >>> b = fresh(a); b["c"][0] = 9; b["m"][0][1][2] = 0
    >>> a["c"].tolist(), a["m"]
    ([0, 1, 2], [{1: {2: 3}}])
    """
    if isinstance(x, np.ndarray):
        return x.copy()
    if isinstance(x, _IMMUTABLE):
        return x
    if isinstance(x, list):
        return list(x) if all(isinstance(v, _IMMUTABLE) for v in x) else [fresh(v) for v in x]
    if isinstance(x, dict):
        return dict(x) if all(isinstance(v, _IMMUTABLE) for v in x.values()) else {k: fresh(v) for k, v in x.items()}
    if isinstance(x, set):
        return set(x)
    if hasattr(x, "__dict__"):
        y = copy.copy(x)
        y.__dict__.update({k: fresh(v) for k, v in x.__dict__.items()})
        return y
    return copy.deepcopy(x)


def _file(store: Store, sketch_id: int) -> Path | None:
    """The sketch's state file, if it is on disk (a pruned state's row has an empty path)."""
    r = store.one("SELECT path FROM states WHERE sketch_id=?", (sketch_id,))
    if r is None or not r["path"]:
        return None
    path = Path(store.resolve_local(r["path"]))
    return path if path.is_file() else None


def has(store: Store, sketch_id: int) -> bool:
    """Whether the sketch has operator state: cached in this process, or on disk."""
    return (str(store.path), sketch_id) in _cache or _file(store, sketch_id) is not None


def flush() -> tuple[int, float]:
    """Write every dirty cached state to its file (entries stay cached, now clean); returns
    (files written, seconds)."""
    t0, n = time.perf_counter(), 0
    for key, entry in list(_cache.items()):
        if entry[2] is not None:
            _write(key, entry[2], entry[0])
            entry[2] = None
            n += 1
    return n, time.perf_counter() - t0


atexit.register(flush)


def evict_all() -> tuple[int, float]:
    """Write what is dirty and empty the cache (the next step reads its state from disk); returns
    (files written, seconds)."""
    t0, n = time.perf_counter(), sum(1 for e in _cache.values() if e[2] is not None)
    while _cache:
        _drop_oldest()
    return n, time.perf_counter() - t0


def discard(store: Store) -> int:
    """Drop every cached state of ``store`` unwritten (a scratch store about to be deleted);
    returns how many were dropped."""
    keys = [k for k in _cache if k[0] == str(store.path)]
    for k in keys:
        del _cache[k]
    return len(keys)


def prune(catalog: Catalog) -> int:
    """Drop the states of sketches that are no longer live heads (superseded by a newer version of
    their chain, or retired): state is only ever read at a head, and each version has its own
    (tens of MB at SF1), so without this the states directory grows with every batch.  Rows stay,
    path emptied, for their initialisation records (``rent.init_rate``); a dirty cached state is
    dropped unwritten.  Returns the number of states dropped."""

    store = catalog.store
    live = {s.id for s in latest_versions(store)}
    dead = [r for r in store.query("SELECT sketch_id, path FROM states WHERE path != ''") if r["sketch_id"] not in live]
    if not dead:
        return 0
    with store.tx() as c:  # rows first: a crash before the unlink leaves an orphan file, never a dangling row
        c.executemany("UPDATE states SET path='' WHERE sketch_id=?", [(r["sketch_id"],) for r in dead])
    for r in dead:
        _cache.pop((str(store.path), r["sketch_id"]), None)
        Path(store.resolve_local(r["path"])).unlink(missing_ok=True)
    return len(dead)
