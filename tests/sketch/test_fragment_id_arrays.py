"""Captures by fragment ids carry each group's ids as an array (``to_sql`` kind IDS): the sketch
equals the fragments of the provenance rows, found here with pandas on the data itself."""

from __future__ import annotations

import pandas as pd
import pytest

from advisor.engine.execute import versions_now
from advisor.partition.assign_pandas import assign
from advisor.plan.parse import parse_sql
from advisor.plan.to_sql import capture_sql
from advisor.sketch.capture import _capture_views, capture, carried_tables

from sketch_helpers import nullable_facts, partitioned_facts


def _facts():
    return nullable_facts(5, 400, x_values=1000, groups=40, null_share=0.1)


@pytest.fixture(scope="module")
def env(spark, tmp_path_factory):
    return partitioned_facts(spark, tmp_path_factory.mktemp("ids"), _facts(), 50)


def _passing(df: pd.DataFrame, keep) -> pd.DataFrame:
    """Rows of the groups (by g) that ``keep`` (a per-group frame -> bool) keeps."""
    return df[df.g.isin([g for g, rows in df.groupby("g") if keep(rows)])]


def _top_group(df: pd.DataFrame) -> pd.DataFrame:
    s = df.groupby("g").y.sum().reset_index().sort_values(["y", "g"], ascending=[False, True])
    return df[df.g == s.g.iloc[0]]


CASES = {
    # raw rows grouped by another attribute, HAVING on the groups
    "having": ("SELECT g, count(*) AS n FROM t GROUP BY g HAVING count(*) > 14",
               lambda df: _passing(df, lambda r: len(r) > 14)),
    # the first group of a top-k
    "top_k": ("SELECT g, sum(y) AS s FROM t GROUP BY g ORDER BY s DESC LIMIT 1", _top_group),
    # two levels of aggregation over raw rows: arrays of ids unioned
    "two_levels": ("SELECT count(*) AS n FROM (SELECT g, min(y) AS m FROM t GROUP BY g HAVING min(y) >= 3) z",
                   lambda df: _passing(df, lambda r: r.y.min() >= 3)),
    # a UNION ALL whose sides both group: each side's arrays, the other's NULL
    "union": ("SELECT g, n FROM (SELECT g, count(*) AS n FROM t WHERE y > 9 GROUP BY g HAVING count(*) > 2 "
              "UNION ALL SELECT g, count(*) AS n FROM t WHERE y < 2 GROUP BY g HAVING count(*) > 2) u",
              lambda df: pd.concat([_passing(df[df.y > 9], lambda r: len(r) > 2),
                                    _passing(df[df.y < 2], lambda r: len(r) > 2)])),
}


@pytest.mark.parametrize("name", list(CASES))
def test_fragment_id_arrays_are_the_provenance_fragments(env, name):
    cat, part, df = env
    sql, provenance = CASES[name]
    q = parse_sql(sql, lambda t: cat.schema(t))
    versions = versions_now(cat, q)
    on, parts = {"t": "x"}, {"t": part}
    assert carried_tables(q, on, parts)[0] == {}  # no value lineage: fragment ids
    text, _ = capture_sql(q, _capture_views(cat, on, parts, versions))
    assert "collect_set" in text and "bitmap" not in text
    got = capture(cat, q, on, 50, versions, check=False, partitions=parts).sketch.parts[0].fragments
    rows = provenance(df)
    expect = {int(f) for f in assign(rows.x, part)}
    assert len(rows) > 0 and got == expect
    assert 0 < len(got) < part.n_fragments
    if name == "having":
        assert part.null_id in got  # NULL x's among the passing groups' rows
