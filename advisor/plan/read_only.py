"""Queries may only read: every function a query calls must be one of Spark's built-in functions
(``spark_functions.txt``) other than those that run code or read files, and a table function in
FROM must be one that generates rows.  A workload file or query log from someone else must not be
able to call Java methods (``reflect``), user functions or file readers on the driver or executors.

>>> import sqlglot
>>> check_read_only(sqlglot.parse_one("SELECT upper(a), count(*) FROM t GROUP BY 1", read="spark"))
>>> check_read_only(sqlglot.parse_one("SELECT reflect('java.lang.System', 'exit', '0')", read="spark"))
Traceback (most recent call last):
advisor.errors.BadInput: reflect() is not allowed: it calls Java methods; queries may only read (allowed functions: Spark's built-in functions except reflect, java_method, try_reflect)
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import sqlglot
from sqlglot import exp

from advisor.errors import BadInput

# Built-in functions a read-only query may not call, with the reason shown to the user.
DENIED = {
    "reflect": "it calls Java methods",
    "java_method": "it calls Java methods",
    "try_reflect": "it calls Java methods",
}
# sqlglot functions that read files (DuckDB's readers, parsed from any dialect).
FILE_READERS = (exp.ReadCSV, exp.ReadParquet)
# Table functions in FROM that only generate rows from their arguments.
TABLE_FUNCTIONS = frozenset({"range", "explode", "explode_outer", "posexplode", "posexplode_outer", "inline",
                             "inline_outer", "stack", "json_tuple"})
ALLOWED_NOTE = f"allowed functions: Spark's built-in functions except {', '.join(DENIED)}"


@lru_cache(maxsize=1)
def spark_builtins() -> frozenset[str]:
    """Spark's built-in function names (``SHOW SYSTEM FUNCTIONS`` of the pinned pyspark)."""
    text = Path(__file__).with_name("spark_functions.txt").read_text()
    return frozenset(ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#"))


def check_read_only(tree: exp.Expression) -> None:
    """Raise BadInput naming the first function or table function a read-only query may not call."""
    for node in tree.find_all(exp.Func):
        name = _name(node)
        if isinstance(node.parent, exp.Table) and node.parent.this is node:
            if name not in TABLE_FUNCTIONS:
                raise BadInput(f"table function {name}() is not allowed: queries may only read tables "
                               f"(allowed in FROM: {', '.join(sorted(TABLE_FUNCTIONS))})")
            continue
        if isinstance(node, FILE_READERS):
            raise BadInput(f"{name}() is not allowed: it reads files; queries may only read tables")
        if name in DENIED:
            raise BadInput(f"{name}() is not allowed: {DENIED[name]}; queries may only read ({ALLOWED_NOTE})")
        if isinstance(node, exp.Anonymous) and name not in spark_builtins():
            raise BadInput(f"unknown function {name}(): queries may only call Spark's built-in functions "
                           f"({ALLOWED_NOTE})")


def check_query_text(sql: str, what: str = "the query") -> None:
    """``check_read_only`` for SQL text that goes to Spark without the planner (one SELECT)."""
    try:
        trees = [t for t in sqlglot.parse(sql, read="spark") if t is not None]
    except sqlglot.errors.SqlglotError as e:
        raise BadInput(f"malformed SQL in {what}: {str(e).splitlines()[0]}") from None
    if len(trees) != 1 or not isinstance(trees[0], exp.Query):
        raise BadInput(f"{what} must be one SELECT query")
    check_read_only(trees[0])


def _name(node: exp.Func) -> str:
    return (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
