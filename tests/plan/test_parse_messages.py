"""Unsupported query shapes are named for what they are, so a user knows which rewrite helps."""

from __future__ import annotations

import pytest

from advisor.errors import Unsupported
from advisor.plan.parse import parse_sql

SCHEMA = {"t": [("a", "int"), ("b", "int")], "u": [("c", "int"), ("d", "int")]}


@pytest.mark.parametrize("sql, says", [
    ("SELECT a, (SELECT max(c) FROM u) AS m FROM t", "subqueries outside FROM that cannot be turned into joins"),
    ("SELECT a FROM t WHERE a NOT IN (SELECT c FROM u WHERE u.d = t.b)",
     "NOT IN (subquery) is not supported"),
    ("SELECT a FROM t RIGHT JOIN u ON a = c", "RIGHT OUTER JOIN is not supported"),
    ("SELECT a FROM t INTERSECT SELECT c FROM u", "INTERSECT is not supported"),
])
def test_each_shape_gets_its_own_reason(sql, says):
    with pytest.raises(Unsupported) as e:
        parse_sql(sql, SCHEMA.get)
    assert str(e.value).startswith(says)
