"""The finder's reuse verdicts (``advisor.sketch.lookup``): remembered per pair of SQL texts and data
context, they must still follow the bindings asked about."""

from __future__ import annotations

from advisor.sketch.lookup import _VERDICTS, usable_sketches
from advisor.plan.parse import parse_sql
from advisor.safety.reuse_check import check_reuse
from advisor.warehouse.column_stats import stats_for_query

from sketch_helpers import clustered_sketch

SQL = "SELECT g1, sum(v) AS a FROM facts GROUP BY g1 HAVING sum(v) < {c}"


def test_remembered_verdicts_follow_the_bindings(spark, tmp_path):
    cat, q, _, sk = clustered_sketch(spark, tmp_path, SQL.format(c=300))
    ask = lambda c: parse_sql(SQL.format(c=c), lambda t: cat.schema(t))  # noqa: E731
    # fewer groups pass sum < 200 than sum < 300: the sketch serves it; sum < 400 wants more groups
    for c, usable in [(200, True), (400, False), (200, True), (400, False)]:
        q2 = ask(c)
        direct = check_reuse(q.root, q2.root, stats_for_query(cat, q2, {"facts": 1}))
        good, bad = usable_sketches(cat, q2, {"facts": 1})
        assert direct.safe is usable
        assert ([s.id for s in good] == [sk.id]) is usable
        if not usable:
            assert any(s.id == sk.id and "reuse not proven" in why for s, why in bad)
    assert any(k[0] == sk.sql for k in _VERDICTS)  # the second round was answered from memory
