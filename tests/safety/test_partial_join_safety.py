"""Safety verdicts for semi-joins, anti-joins and left outer joins (pure: no Spark)."""

from __future__ import annotations

import pytest

from advisor.plan.parse import parse_sql
from advisor.safety.static_check import check_safety

SCHEMA = {"o": [("ok", "int"), ("ck", "int"), ("price", "int")],
          "l": [("ok", "int"), ("qty", "int"), ("sk", "int")],
          "c": [("ck", "int"), ("name", "string")]}.get

Q18 = ("SELECT o.ok, o.price, sum(l.qty) AS q FROM o, l WHERE o.ok = l.ok AND o.ok IN "
       "(SELECT ok FROM l GROUP BY ok HAVING sum(qty) > 300) GROUP BY o.ok, o.price")
Q4 = "SELECT o.ck, count(*) AS n FROM o WHERE EXISTS (SELECT * FROM l WHERE l.ok = o.ok AND l.qty > 5) GROUP BY o.ck"
Q21 = "SELECT o.ck, count(*) AS n FROM o WHERE EXISTS (SELECT * FROM l WHERE l.ok = o.ok AND l.sk <> o.ck) GROUP BY o.ck"
ANTI = "SELECT o.ck, count(*) AS n FROM o WHERE NOT EXISTS (SELECT * FROM l WHERE l.ok = o.ok) GROUP BY o.ck"
NOT_IN = "SELECT o.ok FROM o WHERE o.ok NOT IN (SELECT ok FROM l WHERE qty > 40)"
LEFT = ("SELECT cnt, count(*) AS n FROM (SELECT c.ck, count(o.ok) AS cnt FROM c LEFT JOIN o ON c.ck = o.ck "
        "GROUP BY c.ck) x GROUP BY cnt")
LEFT_ON_SUM = ("SELECT x.s, y.name FROM (SELECT ck, sum(price) AS s FROM o GROUP BY ck) x "
               "LEFT JOIN c y ON x.s = y.ck")


def verdict(sql: str, table: str, attr: str):
    q = parse_sql(sql, SCHEMA)
    X = {c.name for s in q.scans() if s.table == table for c in s.cols if c.source == attr}
    return check_safety(q.root, X, {})


@pytest.mark.parametrize("sql, table, attr, safe, says", [
    # semi-join: the inner HAVING is safe on its group-by attribute, and the outer groups stay whole
    (Q18, "l", "ok", True, "groups are kept whole"),
    (Q18, "o", "ok", True, ""),
    (Q18, "l", "qty", False, "HAVING"),
    # EXISTS on an equality: the inner side is distinct on the key, so its provenance is captured
    (Q4, "l", "ok", True, ""),
    (Q4, "o", "ck", True, "group-by attribute"),
    # EXISTS correlated by <> as well: the inner side is not unique on the join keys
    (Q21, "l", "ok", False, "not unique on the join keys"),
    (Q21, "o", "ck", True, ""),
    # anti-join: never on the inner side, the outer side acts as a selection
    (ANTI, "l", "ok", False, "not monotone"),
    (ANTI, "o", "ck", True, "group-by attribute"),
    (ANTI, "o", "price", True, ""),
    (NOT_IN, "l", "ok", False, "let more outer rows through"),
    (NOT_IN, "o", "ok", True, ""),
    # left outer join: the preserved side is safe, the NULL-padded side is not
    (LEFT, "c", "ck", True, "groups are kept whole"),
    (LEFT, "o", "ck", False, "NULL-padded"),
    # an outer attribute in the condition that the sketch may change: unsafe
    (LEFT_ON_SUM, "o", "price", False, "may differ on the sketched data"),
])
def test_verdicts(sql, table, attr, safe, says):
    v = verdict(sql, table, attr)
    assert v.safe is safe, v.reason
    assert says in v.reason


def test_every_verdict_has_a_reason():
    for sql in (Q18, Q4, Q21, ANTI, NOT_IN, LEFT):
        q = parse_sql(sql, SCHEMA)
        for s in q.scans():
            for c in s.cols:
                assert check_safety(q.root, {c.name}, {}).reason


def test_semi_join_conditions_are_part_of_the_cache_key():
    a = parse_sql("SELECT o.ok FROM o WHERE o.ok IN (SELECT ok FROM l)", SCHEMA)
    b = parse_sql("SELECT o.ok FROM o WHERE o.ck IN (SELECT ok FROM l)", SCHEMA)
    from advisor.safety.static_check import fingerprint
    assert fingerprint(a.root) != fingerprint(b.root)
