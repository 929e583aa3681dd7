"""Layouts registered in the store: which copy of a table serves an attribute.

A copy is either a full clustered layout (every column) or a narrow copy holding only some columns
(``columns``): it serves a reader only when it holds every column the reader needs.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Iterable, Optional

if TYPE_CHECKING:
    from advisor.warehouse.store import Store


def covers(layout: dict, columns: Optional[Iterable[str]]) -> bool:
    """Whether ``layout`` holds ``columns`` (None: every column of the table, so only a full one).

    >>> covers({"columns": None}, None), covers({"columns": ["a", "b"]}, ["a"]), covers({"columns": ["a"]}, None)
    (True, True, False)"""
    if layout.get("columns") is None:
        return True
    return columns is not None and set(columns) <= set(layout["columns"])


def find_layout(store: Store, table: str, attr: str, max_version: int | None = None,
                columns: Optional[Iterable[str]] = None) -> dict | None:
    """Newest layout of ``table`` clustered on ``attr`` at a version <= ``max_version`` that holds
    ``columns`` (None: a reader of every column; ``covers``)."""
    sql = "SELECT * FROM layouts WHERE table_name=? AND attr=?"
    args: tuple = (table, attr)
    if max_version is not None:
        sql += " AND table_version <= ?"
        args += (max_version,)
    for r in store.query(sql + " ORDER BY table_version DESC, id DESC", args):
        lay = layout_row(store, r)
        if covers(lay, columns):
            return lay
    return None


def layouts_of(store: Store, table: str, attr: str) -> list[dict]:
    """Every stored copy of ``table`` on ``attr``, newest first."""
    return [layout_row(store, r) for r in store.query(
        "SELECT * FROM layouts WHERE table_name=? AND attr=? ORDER BY table_version DESC, id DESC", (table, attr))]


def layout_row(store: Store, r) -> dict:
    """A stored layout row as a dict, with the copy's directory and each manifest entry's file
    resolved against the warehouse root (rows record the directory's place below it and each
    file's name in the directory: ``advisor.warehouse.stored_paths``); ``columns`` is None for a
    full layout, else the sorted columns a narrow copy holds."""
    path = store.resolve(r["path"])
    manifest = [dict(m, path=f"{path}/{m['path']}") for m in json.loads(r["manifest_json"])]
    cols = r["columns_json"] if "columns_json" in r.keys() else None
    return {"id": r["id"], "table": r["table_name"], "attr": r["attr"], "table_version": r["table_version"],
            "path": path, "manifest": manifest, "columns": json.loads(cols) if cols else None}
