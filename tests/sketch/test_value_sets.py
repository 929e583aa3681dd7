"""Captures that carry value sets past an aggregation dropping the sketched attribute (``to_sql``
kind SET) give exactly the fragment-id capture's sketch, NULL values included."""

from __future__ import annotations

import pytest

from advisor.engine.execute import versions_now
from advisor.plan.parse import parse_sql
from advisor.sketch.capture import capture, carried_tables

from sketch_helpers import nullable_facts, partitioned_facts


def _facts():
    return nullable_facts(11, 90, x_values=20, groups=5, null_share=0.2)


@pytest.fixture(scope="module")
def env(spark, tmp_path_factory):
    return partitioned_facts(spark, tmp_path_factory.mktemp("sets"), _facts(), 8)


CASES = {
    # x grouped, then counted: the NULL group's sum passes (checked below on the data itself)
    "nested": ("SELECT count(*) AS n FROM (SELECT x, sum(y) AS s FROM t GROUP BY x HAVING sum(y) > 40) z",
               lambda df: bool(df[df.x.isna()].y.sum() > 40)),
    # values grouped by (x, g), gathered into sets by g, sets unioned by the global max
    "two_levels": ("SELECT max(n) AS m FROM (SELECT g, count(*) AS n FROM (SELECT x, g, sum(y) AS s FROM t "
                   "GROUP BY x, g HAVING sum(y) > 12) a GROUP BY g) b", None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_value_sets_equal_fragment_ids(env, name):
    cat, part, df = env
    sql, null_in_provenance = CASES[name]
    q = parse_sql(sql, lambda t: cat.schema(t))
    versions = versions_now(cat, q)
    on, parts = {"t": "x"}, {"t": part}
    kinds, to_set = carried_tables(q, on, parts)
    assert kinds == {"t": "set"} and len(to_set) == 1
    sets = capture(cat, q, on, 8, versions, check=False, partitions=parts).sketch.parts[0].fragments
    ids = capture(cat, q, on, 8, versions, check=False, partitions=parts, by_value=False).sketch.parts[0].fragments
    assert sets == ids
    assert 0 < len(sets) <= part.n_fragments
    if null_in_provenance is not None:
        assert null_in_provenance(df), "the data must put a NULL x in the provenance"
        assert part.null_id in sets


BY_XY = "SELECT x, y, count(*) AS c FROM t GROUP BY x, y"


@pytest.mark.parametrize("sql,expect", [
    # groups keyed by y, which the top-k outputs: sets, equal to the fragment-id capture
    (f"SELECT y, count(*) AS n FROM ({BY_XY}) z GROUP BY y ORDER BY n DESC LIMIT 1", {"t": "set"}),
    # y projected away: equal counts would be equal rows with different sets -> fragment ids
    (f"SELECT n FROM (SELECT y, count(*) AS n FROM ({BY_XY}) z GROUP BY y) w ORDER BY n DESC LIMIT 1", {}),
])
def test_value_sets_under_a_top_k(env, sql, expect):
    cat, part, _ = env
    q = parse_sql(sql, lambda t: cat.schema(t))
    versions = versions_now(cat, q)
    on, parts = {"t": "x"}, {"t": part}
    assert carried_tables(q, on, parts)[0] == expect
    sets = capture(cat, q, on, 8, versions, check=False, partitions=parts).sketch.parts[0].fragments
    ids = capture(cat, q, on, 8, versions, check=False, partitions=parts, by_value=False).sketch.parts[0].fragments
    assert sets == ids and 0 < len(sets) < part.n_fragments
