"""The typer app and helpers every command module shares: the output console, global state and the context."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich.console import Console

out = Console(width=None if sys.stdout.isatty() else 160)


STATE: dict = {}


def emit_json(obj) -> None:
    sys.stdout.write(json.dumps(obj, default=str, indent=2) + "\n")


def ctx():
    # start-up time: the context brings Spark; opened when a command first needs it
    from advisor.context import Context

    if "ctx" not in STATE:
        STATE["ctx"] = Context(STATE.get("warehouse"), STATE.get("master"), STATE.get("conf"),
                               log_file=None if STATE.get("verbose") else log_path())
    return STATE["ctx"]


def log_path():
    """The command log: the Spark JVM's output and tracebacks of unexpected errors (``--verbose``
    shows them on the terminal instead)."""
    # start-up time: the store and the file systems bring pyarrow
    from advisor.context import default_warehouse
    from advisor.warehouse import filesystem
    from advisor.warehouse.store import store_dir

    wh = str(STATE.get("warehouse") or default_warehouse())
    local = Path(filesystem.local_path(wh)) if filesystem.is_local(wh) else store_dir(wh)  # beside the store
    return local / "logs" / "advisor.log"
