"""Unsupported query shapes are named for what they are, so a user knows which rewrite helps."""

from __future__ import annotations

import pytest

from advisor.errors import Unsupported
from advisor.plan.parse import parse_sql

SCHEMA = {"t": [("a", "int"), ("b", "int")]}


@pytest.mark.parametrize("sql, says", [
    ("SELECT a FROM t WHERE a IN (SELECT b FROM t)", "IN (subquery) is not supported"),
    ("SELECT a FROM t WHERE a NOT IN (SELECT b FROM t)", "NOT IN (subquery) is not supported"),
    ("SELECT a FROM t WHERE a > (SELECT max(b) FROM t)", "subqueries outside FROM (scalar or correlated)"),
    ("SELECT a FROM t WHERE EXISTS (SELECT 1 FROM t)", "EXISTS / NOT EXISTS"),
])
def test_each_shape_gets_its_own_reason(sql, says):
    with pytest.raises(Unsupported) as e:
        parse_sql(sql, SCHEMA.get)
    assert str(e.value).startswith(says)
