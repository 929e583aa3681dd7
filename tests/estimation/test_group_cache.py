"""Group statistics reused across the bindings of one template (``advisor.estimation.size_estimates._GROUPS``).

Queries that differ only in their HAVING constant or LIMIT share the sample frame and the shrunk
group estimates.  Differential: every size estimated from a reused entry must equal the size
estimated with the cache emptied, and a query whose aggregation input differs (a WHERE constant,
another aggregate) must not reuse an entry.
"""

from __future__ import annotations

import pytest

import advisor.estimation.size_estimates as estimate_mod
from estimate_helpers import grouped_table_context
from advisor.estimation.size_estimates import analyze, estimate
from advisor.plan.parse import parse_sql

REUSED = "group estimates of this sample and aggregation reused"


@pytest.fixture(scope="module")
def ctx(spark, tmp_path_factory):
    return grouped_table_context(spark, tmp_path_factory.mktemp("gc"), seed=5, n=5000, groups=60, keys=4000)


def _run(ctx, sql):
    cat = ctx.catalog
    shape = analyze(parse_sql(sql, ctx.schema_lookup()), lambda t: cat.version(t).rows)
    said = []
    est = estimate(cat, shape, {"k": (40,), "g": (20,)}, 0.2, 0, progress=said.append)
    return est, REUSED in said


def _same(a, b):
    assert a.sizes.keys() == b.sizes.keys()
    for key in a.sizes:
        x, y = a.sizes[key], b.sizes[key]
        assert x.rows_expected == y.rows_expected and x.rows_point == y.rows_point
        assert x.point_fragments == y.point_fragments and (x.ci_lo, x.ci_hi) == (y.ci_lo, y.ci_hi)
    assert a.groups == b.groups and a.notes == b.notes


@pytest.mark.parametrize("first,second", [
    ("SELECT g, sum(v) FROM t GROUP BY g HAVING sum(v) > 1500",
     "SELECT g, sum(v) FROM t GROUP BY g HAVING sum(v) > 1700"),
    ("SELECT g, sum(v) AS s FROM t WHERE k < 3000 GROUP BY g ORDER BY s DESC LIMIT 5",
     "SELECT g, sum(v) AS s FROM t WHERE k < 3000 GROUP BY g ORDER BY s DESC LIMIT 12"),
    ("SELECT count(*) FROM (SELECT g, k, sum(v) AS s FROM t GROUP BY g, k HAVING sum(v) > 30) i "
     "GROUP BY g HAVING count(*) > 20",
     "SELECT count(*) FROM (SELECT g, k, sum(v) AS s FROM t GROUP BY g, k HAVING sum(v) > 45) i "
     "GROUP BY g HAVING count(*) > 10"),
])
def test_next_binding_reuses_groups_and_sizes_equal_a_fresh_estimate(ctx, first, second):
    estimate_mod._GROUPS.clear()
    _, reused = _run(ctx, first)
    assert not reused
    warm, reused = _run(ctx, second)
    assert reused
    estimate_mod._GROUPS.clear()
    cold, reused = _run(ctx, second)
    assert not reused
    _same(warm, cold)
    # the binding after a hit still sees unmodified statistics
    again, reused = _run(ctx, first)
    assert reused
    estimate_mod._GROUPS.clear()
    _same(again, _run(ctx, first)[0])


@pytest.mark.parametrize("other", [
    "SELECT g, sum(v) FROM t WHERE k < 2000 GROUP BY g HAVING sum(v) > 1500",   # another input
    "SELECT g, avg(v) FROM t WHERE k < 3000 GROUP BY g HAVING avg(v) > 20",     # another aggregate
])
def test_another_aggregation_input_is_not_reused(ctx, other):
    estimate_mod._GROUPS.clear()
    _run(ctx, "SELECT g, sum(v) FROM t WHERE k < 3000 GROUP BY g HAVING sum(v) > 1500")
    _, reused = _run(ctx, other)
    assert not reused


def test_entries_beyond_the_byte_bound_are_not_kept(ctx, monkeypatch):
    sql = "SELECT g, sum(v) FROM t GROUP BY g HAVING sum(v) > 1500"
    estimate_mod._GROUPS.clear()
    _run(ctx, sql)
    (entry,) = estimate_mod._GROUPS.values()
    size = entry[-1]
    assert size > 0
    estimate_mod._GROUPS.clear()
    monkeypatch.setattr(estimate_mod, "_GROUPS_BYTES", size - 1)
    _run(ctx, sql)
    assert not estimate_mod._GROUPS and not _run(ctx, sql)[1]
