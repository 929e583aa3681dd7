"""Which store owns a warehouse on a Hadoop file system URI.

The store of such a warehouse lives on the driver's disk (``advisor.warehouse.store``), so the
store's writer lock guards nothing a driver on another machine shares: two stores writing below one
URI would name and replace the same table files.  The first store to open the warehouse with Spark
writes a claim at its root, ``_advisor_store.json`` (its id, host and directory), with a create
that fails when the file exists; any other store is then refused with one line (exit code 2).  A
copy of the owning store (the same id) is the same owner, so a store moved with its warehouse keeps
working; ``advisor --warehouse URI data init --force`` starts a new store and takes the warehouse
over (when the owning store is lost).  Local warehouses hold their store, and need no claim.
"""

from __future__ import annotations

import json
import socket
import uuid

from advisor.errors import BadInput
from advisor.warehouse import filesystem

CLAIM = "_advisor_store.json"


def store_id(store) -> str:
    """The store's own id, made on first use and kept in its settings (a copy of the store keeps it)."""
    sid = store.setting("store_id")
    if sid is None:
        sid = uuid.uuid4().hex
        store.set_setting("store_id", sid)
    return sid


def _doc(store) -> bytes:
    return json.dumps({"store_id": store_id(store), "host": socket.gethostname(),
                       "store": str(store.warehouse)}).encode()


def claim(store, spark=None) -> None:
    """Make ``store`` the owner of its warehouse URI, or refuse (``BadInput``) when another store
    owns it.  Nothing to do for a local warehouse."""
    if not store.remote:
        return
    fs = filesystem.for_path(store.root, spark)
    path = f"{store.root}/{CLAIM}"
    fs.mkdirs(store.root)
    if fs.create_new(path, _doc(store)):
        return
    try:
        owner = json.loads(fs.read_bytes(path))
    except (OSError, ValueError):
        owner = {}
    if owner.get("store_id") == store_id(store):
        return
    raise BadInput(f"warehouse {store.root} belongs to another store ({owner.get('store', '?')} on "
                   f"{owner.get('host', '?')}): run its commands where that store is, point ADVISOR_STORE_DIR "
                   f"at a copy of it, or take the warehouse over with "
                   f"`advisor --warehouse {store.root} data init --force`")


def take_over(store, spark=None) -> None:
    """Make ``store`` the owner of its warehouse URI whatever store owned it before."""
    if store.remote:
        fs = filesystem.for_path(store.root, spark)
        fs.mkdirs(store.root)
        fs.write_bytes(f"{store.root}/{CLAIM}", _doc(store))
