"""Clustered layouts registered in the store: which layout copy of a table serves an attribute."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from advisor.warehouse.store import Store


def find_layout(store: Store, table: str, attr: str, max_version: int | None = None) -> dict | None:
    """Newest layout of table clustered on attr at a version <= max_version."""
    sql = "SELECT * FROM layouts WHERE table_name=? AND attr=?"
    args: tuple = (table, attr)
    if max_version is not None:
        sql += " AND table_version <= ?"
        args += (max_version,)
    r = store.one(sql + " ORDER BY table_version DESC, id DESC LIMIT 1", args)
    if r is None:
        return None
    return layout_row(store, r)


def layout_row(store: Store, r) -> dict:
    """A stored layout row as a dict, with the copy's directory and each manifest entry's file
    resolved against the warehouse root (rows record the directory's place below it and each
    file's name in the directory: ``advisor.warehouse.stored_paths``)."""
    path = store.resolve(r["path"])
    manifest = [dict(m, path=f"{path}/{m['path']}") for m in json.loads(r["manifest_json"])]
    return {"id": r["id"], "table": r["table_name"], "attr": r["attr"], "table_version": r["table_version"],
            "path": path, "manifest": manifest}
