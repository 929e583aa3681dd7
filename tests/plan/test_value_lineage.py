"""Which scans a capture can carry by value or by value sets (``value_lineage.carried_kinds``),
on plans alone: no Spark."""

from __future__ import annotations

import pytest

from advisor.plan.parse import parse_sql
from advisor.plan.value_lineage import carried_kinds

SCHEMAS = {
    "o": [("ok", "bigint"), ("ck", "bigint"), ("od", "date"), ("price", "double"), ("code", "string")],
    "l": [("lok", "bigint"), ("qty", "int"), ("lprice", "double"), ("lcode", "int")],
}


def kinds(sql: str, table: str, attr: str) -> dict:
    q = parse_sql(sql, lambda t: SCHEMAS[t])
    names = {s.scan_id: c.name for s in q.scans() if s.table == table for c in s.cols if c.source == attr}
    got, points = carried_kinds(q.root, names)
    return {"kinds": sorted(got.values()), "points": len(points)}


@pytest.mark.parametrize("sql,attr,expect", [
    # grouped by the join partner's key: o.ok equals l.lok on every joined row
    ("SELECT lok, sum(qty) AS s FROM l JOIN o ON lok = ok GROUP BY lok", "ok", ["val"]),
    ("SELECT lok, sum(qty) AS s FROM l, o WHERE lok = ok AND qty > 3 GROUP BY lok", "ok", ["val"]),
    # a chain of equalities: both scans of o reach the grouped key through l
    ("SELECT o2.ok, count(*) AS n FROM o JOIN l ON o.ok = lok JOIN o o2 ON lok = o2.ok GROUP BY o2.ok", "ok",
     ["val", "val"]),
    # no equality, another type, floating point, or an equality under OR: not by value
    ("SELECT lok, sum(qty) AS s FROM l JOIN o ON lok > ok GROUP BY lok", "ok", []),
    ("SELECT lcode, count(*) AS n FROM l JOIN o ON lcode = code GROUP BY lcode", "code", []),
    ("SELECT lprice, count(*) AS n FROM l JOIN o ON lprice = price GROUP BY lprice", "price", []),
    ("SELECT lok, sum(qty) AS s FROM l JOIN o ON lok = ok OR qty = 1 GROUP BY lok", "ok", []),
])
def test_join_equalities_name_the_attribute(sql, attr, expect):
    assert kinds(sql, "o", attr)["kinds"] == expect


def test_value_sets_need_a_grouped_value():
    nested = ("SELECT count(*) AS n FROM (SELECT ok, max(od) AS d FROM o GROUP BY ok "
              "HAVING max(od) > DATE '2020-01-01') x")
    assert kinds(nested, "o", "ok") == {"kinds": ["set"], "points": 1}
    # raw rows grouped by another attribute: fragment ids
    raw = "SELECT ck, count(*) AS n FROM o GROUP BY ck HAVING count(*) > 3"
    assert kinds(raw, "o", "ok") == {"kinds": [], "points": 0}


def test_value_sets_under_a_top_k_only_over_distinct_rows():
    # the top-k's rows are groups keyed by ck, which the output keeps: ties never pick between sets
    inner = "SELECT ok, ck, count(*) AS c FROM o GROUP BY ok, ck"
    topk = f"SELECT ck, count(*) AS n FROM ({inner}) x GROUP BY ck ORDER BY n DESC LIMIT 3"
    assert kinds(topk, "o", "ok") == {"kinds": ["set"], "points": 1}
    # the key projected away: two groups with the same count are equal rows with different sets
    dropped = f"SELECT n FROM (SELECT ck, count(*) AS n FROM ({inner}) x GROUP BY ck) y ORDER BY n DESC LIMIT 3"
    assert kinds(dropped, "o", "ok")["kinds"] == []
    # a top-k that keeps the grouped attribute below the set is fine
    kept = ("SELECT count(*) AS n FROM (SELECT ok, count(*) AS c FROM o GROUP BY ok "
            "ORDER BY c DESC LIMIT 5) x")
    assert kinds(kept, "o", "ok")["kinds"] == ["set"]


def test_no_value_set_under_a_union():
    union = ("SELECT count(*) AS n FROM (SELECT ok, count(*) AS c FROM o GROUP BY ok UNION ALL "
             "SELECT ok, count(*) AS c FROM o GROUP BY ok) x")
    assert kinds(union, "o", "ok")["kinds"] == []
