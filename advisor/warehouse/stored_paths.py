"""Paths as the store records them: relative to the warehouse root, so a warehouse moves or copies.

Every artefact the warehouse writes (table bases and batches, net deltas, layouts and their
manifests, samples, operator states) lives under the warehouse root, and its store row names it by
its place below that root (``tables/crimes/v000001_base-…``).  Reading a row joins the place to the
root the store was opened with, so a warehouse copied to another directory, or to another file
system, reads its own files.  Paths outside the root (a Delta table read in place, imported files)
are kept as given: they are the user's, not the warehouse's.

Stores written before this rule named artefacts by absolute path; ``legacy_place`` recovers an
artefact's place from such a path (its last ``tables`` or ``states`` component on), which also
holds for a warehouse that was moved before its store was migrated (``advisor.warehouse.store``).
"""

from __future__ import annotations

import json
import posixpath
from pathlib import Path, PurePosixPath

PLACES = ("tables", "states")  # the top-level directories that hold a warehouse's artefacts


def has_scheme(path: str) -> bool:
    """Whether ``path`` is a URI with a scheme (``hdfs://``, ``s3a://``, ``file:/``), not a local path.

    >>> has_scheme("hdfs://nn:8020/w"), has_scheme("file:/tmp/w"), has_scheme("/tmp/w"), has_scheme("C:x")
    (True, True, False, False)
    """
    head, sep, _ = path.partition(":")
    return bool(sep) and len(head) > 1 and head.replace("+", "").replace("-", "").replace(".", "").isalnum() \
        and head[0].isalpha()


def is_relative(stored: str) -> bool:
    """Whether a stored path is a place below the warehouse root (neither absolute nor a URI).

    >>> is_relative("tables/t/v000001_base"), is_relative("/w/tables/t"), is_relative("s3a://b/w")
    (True, False, False)
    """
    return not (stored.startswith("/") or has_scheme(stored))


def join(root: str, place: str) -> str:
    """The path of ``place`` below ``root`` (a local directory or a URI).

    >>> join("/w/", "tables/t"), join("hdfs://nn:8020/w", "states/s.state")
    ('/w/tables/t', 'hdfs://nn:8020/w/states/s.state')
    """
    return f"{root.rstrip('/')}/{place}" if root not in ("", "/") else f"/{place}"


def _norm(path: str) -> str:
    """``path`` without a trailing slash, ``.`` or ``..`` parts (a local path made absolute)."""
    if has_scheme(path):
        scheme, rest = path.split(":", 1)
        return f"{scheme}:{posixpath.normpath(rest) if rest.startswith('/') else rest.rstrip('/')}"
    return str(Path(path).absolute()).rstrip("/") if path else path


def to_stored(root: str, path: str | Path | None) -> str | None:
    """What the store records for ``path``: its place below ``root`` if it lies there, else ``path``
    unchanged (None stays None).

    >>> to_stored("/w", "/w/tables/t/v1"), to_stored("/w", "/elsewhere/x"), to_stored("/w", None)
    ('tables/t/v1', '/elsewhere/x', None)
    >>> to_stored("hdfs://nn:8020/w", "hdfs://nn:8020/w/tables/t")
    'tables/t'

    A relative local ``path`` is taken relative to the working directory, like ``root``.
    """
    if path is None:
        return None
    p = str(path)
    r, q = _norm(str(root)), _norm(p)
    if q.startswith(r + "/"):
        return q[len(r) + 1:]
    return q if not has_scheme(p) else p


def resolve(root: str, stored: str | None) -> str | None:
    """The path a stored value names: a place joined to ``root``, anything else unchanged.

    >>> resolve("/new/w", "tables/t/v1"), resolve("/new/w", "/ext/delta"), resolve("/w", None)
    ('/new/w/tables/t/v1', '/ext/delta', None)
    """
    if stored is None or stored == "":
        return stored
    return join(str(root), stored) if is_relative(stored) else stored


def legacy_place(path: str) -> str | None:
    """The place of an artefact named by an absolute path in an older store: the path from its last
    ``tables`` or ``states`` component on (None if it has neither).

    >>> legacy_place("/old/w/tables/crimes/v000001_base"), legacy_place("/x/states/sketch_3.state")
    ('tables/crimes/v000001_base', 'states/sketch_3.state')
    >>> legacy_place("/data/delta/orders") is None
    True
    """
    rest = path.split(":", 1)[1] if has_scheme(path) else path
    parts = PurePosixPath(rest).parts
    at = max((i for i, p in enumerate(parts) if p in PLACES), default=None)
    return None if at is None else "/".join(parts[at:])


# (table, key columns, path columns, condition): every store column that names a warehouse artefact
_COLUMNS = (
    ("versions", ("table_name", "version"), ("base_path", "ins_path", "del_path"), "kind != 'delta'"),
    ("net_deltas", ("table_name", "from_version", "to_version"), ("ins_path", "del_path"), "1"),
    ("layouts", ("id",), ("path",), "1"),
    ("samples", ("id",), ("path",), "1"),
    ("states", ("sketch_id",), ("path",), "path != ''"),
)
SETTING = "stored_paths"


def _place(root: str, path: str | None) -> str | None:
    """The place of an artefact an older row names by ``path`` (unchanged if it is one already, or
    if it lies neither below ``root`` nor in a ``tables``/``states`` directory)."""
    if path is None or path == "" or is_relative(path):
        return path
    inside = to_stored(root, path)
    if is_relative(inside):
        return inside
    return legacy_place(path) or path


def _rewrite(conn, fn) -> int:
    """Apply ``fn`` to every artefact path column of the store (inside the caller's transaction);
    returns the rows changed."""
    changed = 0
    for table, keys, cols, cond in _COLUMNS:
        for r in conn.execute(f"SELECT {', '.join(keys + cols)} FROM {table} WHERE {cond}").fetchall():
            key, old = tuple(r[:len(keys)]), tuple(r[len(keys):])
            new = tuple(fn(p) for p in old)
            if new != old:
                sets = ", ".join(f"{c}=?" for c in cols)
                where = " AND ".join(f"{k}=?" for k in keys)
                conn.execute(f"UPDATE {table} SET {sets} WHERE {where}", new + key)
                changed += 1
    return changed


def migrate(conn, root: str) -> int:
    """Rewrite the artefact paths of a store written before places were recorded (module
    docstring) to places below ``root``, in one transaction, once; returns the rows changed."""
    done = conn.execute("SELECT value FROM settings WHERE key=?", (SETTING,)).fetchone()
    if done is not None and done[0] == "relative":
        return 0
    changed = 0
    conn.execute("BEGIN IMMEDIATE")
    try:
        changed += _rewrite(conn, lambda p: _place(root, p))
        for lid, manifest in conn.execute("SELECT id, manifest_json FROM layouts").fetchall():
            entries = json.loads(manifest)
            new = [dict(m, path=m["path"].rstrip("/").rsplit("/", 1)[-1]) for m in entries]
            if new != entries:
                conn.execute("UPDATE layouts SET manifest_json=? WHERE id=?", (json.dumps(new), lid))
                changed += 1
        conn.execute("INSERT OR REPLACE INTO settings(key, value) VALUES (?, 'relative')", (SETTING,))
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return changed


def anchor(conn, root: str) -> int:
    """Rewrite every place in a copied store to the path it names below ``root``, in one
    transaction; returns the rows changed.  For a store cloned beside its warehouse (a replay's
    per-strategy store): the clone keeps reading the original's files, and what it writes itself
    is recorded relative to its own directory.

    >>> import sqlite3
    >>> c = sqlite3.connect(":memory:", isolation_level=None)
    >>> _ = c.execute("CREATE TABLE layouts (id INTEGER, path TEXT)")
    >>> for t, _k, _c, _w in _COLUMNS[:2] + _COLUMNS[3:]:
    ...     _ = c.execute(f"CREATE TABLE {t} (table_name, version, from_version, to_version, id, sketch_id, "
    ...                   "kind, base_path, ins_path, del_path, path)")
    >>> _ = c.execute("INSERT INTO layouts VALUES (1, 'tables/t/layout_a')")
    >>> anchor(c, "/run/warehouse"), c.execute("SELECT path FROM layouts").fetchone()[0]
    (1, '/run/warehouse/tables/t/layout_a')
    """
    changed = 0
    conn.execute("BEGIN IMMEDIATE")
    try:
        changed += _rewrite(conn, lambda p: resolve(root, p))
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return changed
