"""Query logs: users' statements replayed as written (one per line, ``;``-ended over several lines,
or JSON lines with ``sql`` and ``at``), each with the parser's template.  Apart from the workload
file's other checks: a log is a format of its own, read by ``query_log:`` and on its own.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import sqlglot
from sqlglot import exp
from sqlglot.tokens import Tokenizer, TokenType

from advisor.errors import BadInput
from advisor.plan.parse import templatize


def read_query_log(path: str | Path) -> list[dict]:
    """The statements of the query log at ``path`` (``parse_query_log``)."""
    p = Path(path)
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"cannot read query log {p}: {getattr(e, 'strerror', None) or e}") from None
    return parse_query_log(text, str(p))


def parse_query_log(text: str, where: str) -> list[dict]:
    """A query log's statements in the order written, as [{sql, at, line, template}]: JSON lines
    when the first entry starts with ``{``, else SQL.  BadInput ``where:LINE: problem`` on a bad
    entry or an empty log."""
    lines = text.splitlines()
    first = next((ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("--")), None)
    if first is None:
        raise BadInput(f"{where}:1: the query log holds no statement")
    got = _json_entries(lines, where) if first.startswith("{") else _sql_entries(text, lines, where)
    for e in got:
        e["template"] = _statement_template(e["sql"], where, e["line"])
    return got


def _json_entries(lines: list[str], where: str) -> list[dict]:
    """One JSON object per line with "sql" and optional "at" (blank and ``--`` lines skipped)."""
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.strip().startswith("--"):
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise BadInput(f"{where}:{n}: invalid JSON ({getattr(e, 'msg', e)} at column "
                           f"{getattr(e, 'colno', '?')})") from None
        if not isinstance(obj, dict):
            raise BadInput(f"{where}:{n}: expected a JSON object with \"sql\", got {type(obj).__name__}")
        if "sql" not in obj:
            raise BadInput(f"{where}:{n}: missing \"sql\" (keys: {', '.join(map(str, obj)) or 'none'})")
        if not isinstance(obj["sql"], str) or not obj["sql"].strip():
            raise BadInput(f"{where}:{n}: \"sql\" must be a non-empty string")
        at = obj.get("at")
        if at is not None and not _valid_at(at):
            raise BadInput(f"{where}:{n}: \"at\" must be an ISO timestamp or a number, got {at!r}")
        out.append({"sql": obj["sql"].strip().rstrip(";").strip(), "at": at, "line": n})
    return out


def _valid_at(at) -> bool:
    if isinstance(at, bool):
        return False
    if isinstance(at, (int, float)):
        return True
    if isinstance(at, str):
        try:
            dt.datetime.fromisoformat(at)
            return True
        except ValueError:
            return False
    return False


def _sql_entries(text: str, lines: list[str], where: str) -> list[dict]:
    """SQL statements: one per line, or ended by ``;`` (and then over any number of lines) when
    the file ends its statements so; whole-line ``--`` comments and blank lines are skipped."""
    try:
        tokens = Tokenizer().tokenize(text)
    except Exception:  # noqa: BLE001 - sqlglot's TokenError: an unterminated quote or comment
        for n, line in enumerate(lines, 1):
            try:
                Tokenizer().tokenize(line)
            except Exception:  # noqa: BLE001
                raise BadInput(f"{where}:{n}: cannot read the statement (an unterminated quote or comment)") from None
        raise BadInput(f"{where}:1: cannot split into statements (an unterminated quote or comment)") from None
    if not any(t.token_type == TokenType.SEMICOLON for t in tokens):
        return [{"sql": ln.strip(), "at": None, "line": n} for n, ln in enumerate(lines, 1)
                if ln.strip() and not ln.strip().startswith("--")]
    out, chunk = [], []
    for tok in tokens + [None]:
        if tok is None or tok.token_type == TokenType.SEMICOLON:
            if chunk:
                start, end = chunk[0].start, chunk[-1].end + 1
                body = [ln for ln in text[start:end].splitlines() if not ln.strip().startswith("--")]
                out.append({"sql": "\n".join(body).strip(), "at": None, "line": chunk[0].line})
            chunk = []
        else:
            chunk.append(tok)
    return out


def _statement_template(sql: str, where: str, line: int) -> str:
    """The statement's template as the parser derives it (literals of WHERE/HAVING/LIMIT as ``?``);
    BadInput ``where:line`` when it is not one SELECT statement (positions made the file's)."""
    hint = " (a missing ';'?)" if "\n" in sql else ""  # only ';'-ended statements span lines
    try:
        trees = [t for t in sqlglot.parse(sql, read="spark") if t is not None]
    except sqlglot.errors.SqlglotError as e:
        msg = str(e).splitlines()[0][:200]
        pos = re.search(r"\.? Line (\d+), Col: (\d+)\.?", msg)
        if pos:
            msg = msg[:pos.start()] + f" at line {line + int(pos.group(1)) - 1}, column {pos.group(2)}"
        raise BadInput(f"{where}:{line}: malformed SQL: {msg}{hint}") from None
    if len(trees) != 1:
        raise BadInput(f"{where}:{line}: expected one SQL statement, got {len(trees)} "
                       "(write one per line, or end each with ';')")
    if not isinstance(trees[0], exp.Query):
        raise BadInput(f"{where}:{line}: only SELECT queries are replayed, got {trees[0].key.upper()}")
    return templatize(trees[0])[0]
