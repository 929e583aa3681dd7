"""Reading `advisor run --file`: SQL statements separated by ``;``, or a query log with one JSON
object per line (``{"sql": ..., "at": "2026-01-31T08:00:00"}``, ``at`` optional).

>>> [s["sql"] for s in split_text("SELECT 1; SELECT ';' AS x;\\n-- done\\n")]
['SELECT 1', "SELECT ';' AS x"]
>>> split_text('{"sql": "SELECT 2", "at": "2026-01-01T00:00:00"}')[0]["at"]
'2026-01-01T00:00:00'
"""

from __future__ import annotations

import json
from pathlib import Path

from sqlglot.tokens import Tokenizer, TokenType

from advisor.errors import BadInput


def read_queries(path: Path) -> list[dict]:
    """The file's queries in order, as [{"sql", "at"}]; BadInput for a missing or empty file."""
    p = Path(path)
    if not p.is_file():
        raise BadInput(f"--file {p}: no such file")
    got = split_text(p.read_text(), str(p))
    if not got:
        raise BadInput(f"--file {p}: no statement in it")
    return got


def split_text(text: str, where: str = "--file") -> list[dict]:
    """Statements of a SQL script, or the entries of a JSON-lines query log."""
    if text.lstrip().startswith("{"):
        return _json_lines(text, where)
    try:
        tokens = Tokenizer().tokenize(text)
    except Exception as e:  # noqa: BLE001 - sqlglot's TokenError: an unterminated quote or comment
        raise BadInput(f"{where}: cannot split into statements ({str(e).splitlines()[0][:160]})") from None
    out, start = [], 0
    for tok in tokens + [None]:
        if tok is None or tok.token_type == TokenType.SEMICOLON:
            end = len(text) if tok is None else tok.start
            sql = _strip_comments(text[start:end])
            if sql:
                out.append({"sql": sql, "at": None})
            start = end + 1
    return out


def _strip_comments(chunk: str) -> str:
    """The statement without leading/trailing blank lines and whole-line ``--`` comments."""
    lines = [ln for ln in chunk.strip().splitlines() if not ln.strip().startswith("--")]
    return "\n".join(lines).strip()


def _json_lines(text: str, where: str) -> list[dict]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            raise BadInput(f"{where}, line {n}: not a JSON object") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("sql"), str) or not obj["sql"].strip():
            raise BadInput(f"{where}, line {n}: expected an object with a non-empty \"sql\"")
        out.append({"sql": obj["sql"].strip().rstrip(";"), "at": obj.get("at")})
    return out
