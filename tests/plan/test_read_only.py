"""Read-only SQL: Java reflection, unknown (user) functions, file readers and file-reading table
functions are bad input naming the function; every query of the shipped workloads and query files
passes the same check."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlglot

from advisor.errors import BadInput
from advisor.plan.parse import parse_sql
from advisor.plan.read_only import check_query_text, check_read_only, spark_builtins

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = {"t": [("a", "int"), ("b", "string")]}.get


@pytest.mark.parametrize("sql, name", [
    ("SELECT reflect('java.lang.System', 'setProperty', 'k', 'v') FROM t", "reflect()"),
    ("SELECT java_method('java.lang.System', 'exit', 0)", "java_method()"),
    ("SELECT try_reflect('java.lang.Runtime', 'getRuntime') AS r", "try_reflect()"),
    ("SELECT a FROM t WHERE a > length(reflect('java.lang.System', 'getenv', 'HOME'))", "reflect()"),
    ("SELECT a FROM t GROUP BY a HAVING count(*) > (SELECT count(java_method('x', 'y')) FROM t)", "java_method()"),
    ("SELECT my_udf(a) FROM t", "unknown function my_udf()"),
    ("SELECT * FROM read_files('/etc/passwd')", "table function read_files()"),
    ("SELECT * FROM read_csv('/etc/passwd')", "read_csv"),
    ("SELECT * FROM read_parquet('/tmp/x.parquet')", "read_parquet"),
    ("WITH s AS (SELECT REFLECT('java.lang.System', 'exit', '1') AS x) SELECT x FROM s", "reflect()"),
])
def test_forbidden_functions_are_bad_input(sql, name):
    with pytest.raises(BadInput) as e:
        parse_sql(sql, SCHEMA)
    assert name in str(e.value).lower().replace("read_csv()", "read_csv").replace("read_parquet()", "read_parquet")
    assert "\n" not in str(e.value)


def test_quantile_sql_of_a_workload_is_checked_too():
    with pytest.raises(BadInput, match="reflect"):
        check_query_text("SELECT reflect('java.lang.System', 'exit', '0') AS v", "the quantile sql")
    check_query_text("SELECT a FROM t WHERE a > 3")


@pytest.mark.parametrize("sql", [
    "SELECT upper(b), count(*), approx_count_distinct(a), percentile_approx(a, 0.5) FROM t GROUP BY 1",
    "SELECT * FROM range(10)",
    "SELECT x FROM t LATERAL VIEW explode(array(1, 2)) v AS x",
    "SELECT date_add(current_date(), 1), unix_date(DATE '2020-01-01'), nvl(a, 0), coalesce(a, 1) FROM t",
    "SELECT transform(array(a), x -> x + 1) FROM t",
])
def test_ordinary_functions_pass(sql):
    check_read_only(sqlglot.parse_one(sql, read="spark"))


def _shipped_queries():
    for f in sorted((ROOT / "workloads").glob("*.yaml")):
        text = f.read_text()
        for m in re.finditer(r"^\s*sql:\s*[|>]?-?\s*\n((?:\s{6,}.*\n)+)|^\s*sql:\s*\"?(.+?)\"?\s*$", text, re.M):
            yield f.name, (m.group(1) or m.group(2)).strip()
    for f in sorted((ROOT / "workloads").glob("*.sql")):
        for stmt in f.read_text().split(";"):
            body = "\n".join(ln for ln in stmt.splitlines() if not ln.strip().startswith("--")).strip()
            if body:
                yield f.name, body


def test_every_shipped_query_calls_only_allowed_functions():
    checked = 0
    for name, sql in _shipped_queries():
        sql = re.sub(r"\{\{?\s*\w+\s*\}?\}|:\w+|\$\w+", "1", sql)  # template parameters
        try:
            tree = sqlglot.parse_one(sql, read="spark")
        except sqlglot.errors.SqlglotError:
            continue
        check_read_only(tree)
        checked += 1
    assert checked >= 20


def test_the_allow_list_is_spark_s_builtins():
    names = spark_builtins()
    assert {"sum", "count", "upper", "date_add", "percentile_approx", "reflect"} <= names
    assert len(names) > 300


def test_the_allow_list_matches_the_running_spark(spark):
    running = {r[0] for r in spark.sql("SHOW SYSTEM FUNCTIONS").collect()}
    assert spark_builtins() == frozenset(running)


def test_recursive_queries_are_checked_before_they_run():
    from advisor.recursive.shape import recognise

    with pytest.raises(BadInput, match="reflect"):
        recognise("WITH RECURSIVE r(src, dst) AS (SELECT src, dst FROM link UNION SELECT r.src, l.dst FROM r "
                  "JOIN link l ON r.dst = l.src) SELECT src, dst, reflect('java.lang.System', 'exit', '0') FROM r")
