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
    return {"id": r["id"], "table": r["table_name"], "attr": r["attr"], "table_version": r["table_version"],
            "path": r["path"], "manifest": json.loads(r["manifest_json"])}
