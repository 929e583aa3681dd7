"""Provenance sketches as stored values: per sketched table an attribute, a partition and a fragment set.

Sketch rows are immutable: maintenance writes a new row pointing at its parent. A sketch is tied
to the data version of every table it covers; it is correct for exactly that version.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from advisor.warehouse.store import Store


@dataclass(frozen=True)
class SketchPart:
    table: str
    attr: str
    partition_id: int
    fragments: frozenset

    def to_json(self) -> dict:
        return {"table": self.table, "attr": self.attr, "partition_id": self.partition_id,
                "fragments": sorted(self.fragments)}


@dataclass
class Sketch:
    id: int
    template: str
    bindings: tuple
    sql: str
    parts: list[SketchPart]
    data_versions: dict[str, int]
    parent_id: int | None = None
    how: str = "capture"
    created: float = field(default_factory=time.time)

    def part(self, table: str) -> SketchPart | None:
        return next((p for p in self.parts if p.table == table), None)

    def to_json(self) -> dict:
        return {"id": self.id, "template": self.template, "bindings": list(self.bindings), "sql": self.sql,
                "parts": [p.to_json() for p in self.parts], "data_versions": self.data_versions,
                "parent_id": self.parent_id, "how": self.how}


def save_sketch(store: Store, s: Sketch) -> Sketch:
    with store.tx() as c:
        cur = c.execute(
            "INSERT INTO sketches(template, bindings_json, sql, parts_json, data_versions_json, parent_id, how,"
            " created) VALUES (?,?,?,?,?,?,?,?)",
            (s.template, json.dumps(list(s.bindings), default=str), s.sql,
             json.dumps([p.to_json() for p in s.parts]), json.dumps(s.data_versions), s.parent_id, s.how,
             s.created))
        s.id = cur.lastrowid
    return s


def _from_row(r) -> Sketch:
    parts = [SketchPart(p["table"], p["attr"], p["partition_id"], frozenset(p["fragments"]))
             for p in json.loads(r["parts_json"])]
    return Sketch(r["id"], r["template"], tuple(json.loads(r["bindings_json"])), r["sql"], parts,
                  json.loads(r["data_versions_json"]), r["parent_id"], r["how"], r["created"])


def load_sketch(store: Store, sid: int) -> Sketch | None:
    r = store.one("SELECT * FROM sketches WHERE id=?", (sid,))
    return _from_row(r) if r else None


def sketches_for_template(store: Store, template: str) -> list[Sketch]:
    return [_from_row(r) for r in store.query("SELECT * FROM sketches WHERE template=? ORDER BY id", (template,))]


def all_sketches(store: Store) -> list[Sketch]:
    return [_from_row(r) for r in store.query("SELECT * FROM sketches ORDER BY id")]


def latest_versions(store: Store) -> list[Sketch]:
    """Sketches that no other sketch supersedes (the heads of maintenance chains), except retired ones."""
    return [_from_row(r) for r in store.query(
        "SELECT * FROM sketches s WHERE NOT EXISTS (SELECT 1 FROM sketches c WHERE c.parent_id = s.id) "
        "AND s.id NOT IN (SELECT sketch_id FROM retired) ORDER BY id")]


def retire(store: Store, sketch_id: int, reason: str) -> None:
    """Take a chain head out of use and maintenance for good (e.g. it covers nearly everything)."""
    with store.tx() as c:
        c.execute("INSERT OR IGNORE INTO retired(sketch_id, reason, created) VALUES (?,?,?)",
                  (sketch_id, reason, time.time()))


def retire_extra_heads(store: Store, template: str, keep: int = 2) -> list[int]:
    """Keep the `keep` newest live chains of a template; retire the rest (no longer used or maintained).

    Every binding that defeats the reuse test captures a new sketch; without a bound, each update
    batch would maintain all of them."""

    heads = [s.id for s in latest_versions(store) if s.template == template]
    old = sorted(heads, reverse=True)[keep:]
    if old:
        with store.tx() as c:
            c.executemany("INSERT OR IGNORE INTO retired(sketch_id, reason, created) VALUES (?,?,?)",
                          [(i, f"more than {keep} live sketches for its template", time.time()) for i in old])
    return old


def decode_bitmap(b) -> frozenset:
    """Spark bitmap bytes -> positions (byte i, bit j, LSB first = position 8i+j)."""
    if b is None:
        return frozenset()
    out = []
    for i, byte in enumerate(bytes(b)):
        if byte:
            for j in range(8):
                if byte >> j & 1:
                    out.append(8 * i + j)
    return frozenset(out)
