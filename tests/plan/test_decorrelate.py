"""Subqueries outside FROM become semi-joins, anti-joins and joins before planning."""

from __future__ import annotations

import pytest

from advisor.plan import ir
from advisor.plan.parse import parse_sql
from advisor.plan.show import tree_lines

SCHEMA = {"t": [("a", "int"), ("b", "int")], "u": [("c", "int"), ("d", "int")]}


def _ops(sql: str) -> list[str]:
    return [type(n).__name__ for n in parse_sql(sql, SCHEMA.get).root.walk()]


@pytest.mark.parametrize("sql, op", [
    ("SELECT a FROM t WHERE a IN (SELECT c FROM u)", "SemiJoin"),
    ("SELECT a FROM t WHERE a IN (SELECT c FROM u WHERE u.d = t.b)", "SemiJoin"),
    ("SELECT a FROM t WHERE EXISTS (SELECT * FROM u WHERE u.c = t.a AND u.d <> t.b)", "SemiJoin"),
    ("SELECT a FROM t WHERE NOT EXISTS (SELECT * FROM u WHERE u.c = t.a)", "AntiJoin"),
    ("SELECT a FROM t WHERE a NOT IN (SELECT c FROM u)", "AntiJoin"),
    ("SELECT a FROM t LEFT JOIN u ON a = c", "LeftJoin"),
])
def test_predicate_subqueries_become_partial_joins(sql, op):
    assert op in _ops(sql)


def test_semi_join_keeps_only_the_outer_columns():
    q = parse_sql("SELECT * FROM t WHERE a IN (SELECT c FROM u)", SCHEMA.get)
    assert q.output_names == ["a", "b"]
    semi = next(n for n in q.root.walk() if isinstance(n, ir.SemiJoin))
    assert [c.source for c in semi.cols] == ["a", "b"]


def test_not_in_keeps_its_null_rule():
    """NOT IN is unknown when either side is NULL: the anti-join counts that as a match."""
    q = parse_sql("SELECT a FROM t WHERE a NOT IN (SELECT c FROM u)", SCHEMA.get)
    anti = next(n for n in q.root.walk() if isinstance(n, ir.AntiJoin))
    assert "IS NULL" in anti.cond.sql()


def test_correlated_scalar_subquery_becomes_an_inner_join_on_a_grouped_table():
    lines = tree_lines(parse_sql("SELECT a FROM t WHERE b < (SELECT avg(d) FROM u WHERE u.c = t.a)",
                                 SCHEMA.get).root)
    text = "\n".join(lines)
    assert "LeftOuterJoin" not in text and "Join " in text and "Aggregate group by [u_c" in text


def test_uncorrelated_scalar_subquery_is_a_cross_product():
    assert "Join" in _ops("SELECT a FROM t WHERE b > (SELECT max(d) FROM u)")


def test_output_names_survive_the_rewrite():
    q = parse_sql("SELECT a, sum(b) FROM t WHERE a IN (SELECT c FROM u) GROUP BY a", SCHEMA.get)
    assert q.output_names == ["a", "sum(b)"]
