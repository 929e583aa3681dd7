"""A catalog's tables and their versions: the metadata in the store (schemas, where an imported
table lives, one row per version) and the commits other writers made to a Delta table since
(``sync``).  One of the three sides ``advisor.warehouse.catalog.Catalog`` combines, beside its
reads (``catalog_reads``) and writes (``catalog_writes``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from advisor.errors import BadInput
from advisor.warehouse import delta_source
from advisor.warehouse.store import Store


@dataclass(frozen=True)
class Version:
    table: str
    version: int
    kind: str
    base_path: str | None
    ins_path: str | None
    del_path: str | None
    rows: int
    bytes: int
    n_ins: int
    n_del: int


class TableVersions:
    """Tables, their schemas and sources, and their versions (as pinned for this catalog object)."""

    spark: object  # None for a catalog of the metadata only (``Catalog.offline``)
    store: Store
    pins: dict[str, int]
    _sources: dict  # ``source``: where an imported table lives

    def tables(self) -> list[str]:
        return [r["name"] for r in self.store.query("SELECT name FROM tables ORDER BY name")]

    def exists(self, name: str) -> bool:
        return self.store.one("SELECT 1 FROM tables WHERE name=?", (name.lower(),)) is not None

    def require(self, name: str) -> str:
        n = name.lower()
        if not self.exists(n):
            known = ", ".join(self.tables()) or "none loaded"
            raise BadInput(f"unknown table {name!r} (known: {known})")
        return n

    def schema(self, name: str) -> list[tuple[str, str]]:
        """User-visible columns as (name, spark simpleString type), without the row id."""
        r = self.store.one("SELECT schema_json FROM tables WHERE name=?", (self.require(name),))
        return [tuple(x) for x in json.loads(r["schema_json"])]

    def column_type(self, table: str, col: str) -> str:
        for c, t in self.schema(table):
            if c == col.lower():
                return t
        raise BadInput(f"unknown column {col!r} in table {table!r}")

    def source(self, name: str) -> dict | None:
        """Where an imported table lives (format, location, declared key), or None for a table
        the warehouse stores itself."""
        name = name.lower()
        if name not in self._sources:
            r = self.store.one("SELECT * FROM sources WHERE table_name=?", (name,))
            self._sources[name] = None if r is None else {
                "format": r["format"], "location": r["location"], "key": json.loads(r["key_json"] or "null"),
                "options": json.loads(r["options_json"] or "{}")}
        return self._sources[name]

    def is_delta(self, name: str) -> bool:
        """Whether ``name`` is a Delta table read in place (its versions are Delta versions)."""
        s = self.source(name)
        return s is not None and s["format"] == "delta"

    def key(self, name: str) -> list[str] | None:
        """The table's declared key columns, if any."""
        s = self.source(name)
        return None if s is None else s["key"]

    def sync(self, name: str) -> None:
        """Record the commits other writers made to a Delta table since the newest known version
        (a listing of its transaction log; a Spark job only when there are new commits)."""
        src = self.source(name)
        if src is None or src["format"] != "delta" or self.spark is None:
            return
        latest = delta_source.latest_version(src["location"])
        if latest is None:
            raise BadInput(f"table {name!r}: {src['location']} is no longer a Delta table")
        r = self.store.one("SELECT * FROM versions WHERE table_name=? ORDER BY version DESC LIMIT 1", (name,))
        if r is None or latest <= r["version"]:
            return
        new = delta_source.commits(src["location"], r["version"], latest)
        rows = delta_source.rows_at(self.spark, src["location"], latest)
        size = delta_source.size_at(self.spark, src["location"], latest)
        running = r["rows"]
        with self.store.tx() as c:
            for cm in new:
                running = rows if cm.version == latest else max(0, running + cm.n_ins - cm.n_del)
                c.execute("INSERT OR IGNORE INTO versions VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                          (name, cm.version, "delta", src["location"], None, None, running,
                           size if cm.version == latest else r["bytes"], cm.n_ins, cm.n_del, time.time()))

    def current_version(self, name: str) -> int:
        name = self.require(name)
        self.sync(name)
        r = self.store.one("SELECT max(version) v FROM versions WHERE table_name=?", (name,))
        return min(int(r["v"]), self.pins.get(name, int(r["v"])))

    def versions(self, name: str, after: int | None = None, upto: int | None = None) -> list[Version]:
        """Versions of ``name`` in order, optionally only those with ``after < version <= upto``
        (a range query: a long-lived table has one row per batch)."""
        name = self.require(name)
        self.sync(name)
        hi = self.pins.get(name, 1 << 62) if upto is None else min(upto, self.pins.get(name, 1 << 62))
        rows = self.store.query("SELECT * FROM versions WHERE table_name=? AND version>? AND version<=? "
                                "ORDER BY version", (name, -1 if after is None else after, hi))
        return [_version(r, self.store) for r in rows]

    def version(self, name: str, version: int | None = None) -> Version:
        name = self.require(name)
        self.sync(name)
        pin = self.pins.get(name, 1 << 62)
        if version is None:
            rows = self.store.query("SELECT * FROM versions WHERE table_name=? AND version<=? "
                                    "ORDER BY version DESC LIMIT 1", (name, pin))
        else:
            rows = self.store.query("SELECT * FROM versions WHERE table_name=? AND version=? AND version<=?",
                                    (name, version, pin))
        if rows:
            return _version(rows[0], self.store)
        latest = self.version(name) if version is not None else None
        raise BadInput(f"table {name!r} has no version {version} (latest is "
                       f"{latest.version if latest else 'none'})")


def _version(r, store: Store) -> Version:
    """A version row with its files' paths resolved against the warehouse root (rows record places
    below it: ``advisor.warehouse.stored_paths``)."""
    return Version(r["table_name"], r["version"], r["kind"], store.resolve(r["base_path"]),
                   store.resolve(r["ins_path"]), store.resolve(r["del_path"]), r["rows"], r["bytes"],
                   r["n_ins"], r["n_del"])
