"""The typer app and helpers every command module shares: the output console, global state and the context."""

from __future__ import annotations

import sys
from rich.console import Console


out = Console(width=None if sys.stdout.isatty() else 160)


STATE: dict = {}


def ctx():
    from advisor.context import Context

    if "ctx" not in STATE:
        STATE["ctx"] = Context(STATE.get("warehouse"), STATE.get("master"), STATE.get("conf"))
    return STATE["ctx"]
