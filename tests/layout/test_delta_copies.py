"""Narrow copies of a Delta table read in place: the copy lives in the advisor's warehouse, the
user's table is never written, and reads at a later version apply that version's net change
(the change feed, keyed by the table's declared key) on top, so a copy is never served stale.

Differential: after any sequence of INSERT / DELETE / UPDATE commits by plain Spark, a sketched
query served from the copy returns exactly the rows of a plain run of the Delta table.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.context import Context
from advisor.layout.clustered_copy import build_layout
from advisor.layout.skip_prediction import read_units
from advisor.plan.parse import parse_sql
from advisor.sketch.capture import capture
from advisor.sketch.run import run_query
from advisor.warehouse import delta_source

ROWS = 20_000
SQL = "SELECT g, sum(v) AS s FROM d GROUP BY g HAVING sum(v) > {x}"


def _table(spark, path: str) -> None:
    """id (the key), g (2,000 groups; groups below 40 heavy), v, w; written by plain Spark in id order."""
    (spark.range(ROWS).selectExpr("id", "CAST((id * 7919) % 2000 AS BIGINT) AS g",
                                  "CAST(CASE WHEN (id * 7919) % 2000 < 40 THEN 40 ELSE 1 END AS BIGINT) AS v",
                                  "CAST(id % 9 AS BIGINT) AS w")
     .repartition(2).write.format("delta").option("delta.enableChangeDataFeed", "true")
     .option("delta.enableDeletionVectors", "true").save(path))


def _ctx(spark, root):
    path = str(root / "user_table")
    _table(spark, path)
    c = Context(root / "w", spark=spark)
    c.catalog.register_delta("d", path, 0, key=["id"])
    return c, path


def _served_equal(c, x: int) -> tuple:
    cat = c.catalog
    q = parse_sql(SQL.format(x=x), c.schema_lookup())
    sk = capture(cat, q, {"d": "g"}, 200).sketch
    got, plain = run_query(cat, q, sketch=sk), run_query(cat, q)
    assert sorted(got.rows) == sorted(plain.rows)
    return got, plain


def test_a_copy_of_a_delta_table_lives_in_the_warehouse_and_serves_sketches(spark, tmp_path):
    c, path = _ctx(spark, tmp_path)
    before = delta_source.latest_version(path)
    lay = build_layout(c.catalog, "d", "g", columns=["v"])
    assert lay["columns"] == ["g", "v"] and str(tmp_path / "w") in lay["path"]
    assert delta_source.latest_version(path) == before  # the user's table is not written
    v = c.catalog.current_version("d")
    assert read_units(c.catalog, "d", "g", v, columns={"g", "v"}).source.startswith("layout")
    got, plain = _served_equal(c, 300)
    assert len(plain.rows) > 5 and got.metrics.rows_read < ROWS / 5 <= plain.metrics.rows_read


def test_a_delta_copy_is_never_served_stale(spark, tmp_path):
    """A commit after the copy makes a new group pass the HAVING: the sketched answer read from the
    copy holds it (the net change is read on top); one that deletes a passing group's rows drops it."""
    c, path = _ctx(spark, tmp_path)
    build_layout(c.catalog, "d", "g", columns=["v"])
    spark.sql(f"INSERT INTO delta.`{path}` SELECT id + 1000000, 1999, 500, 0 FROM range(3)")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE g = 0")
    c.catalog.sync("d")
    v = c.catalog.current_version("d")
    assert read_units(c.catalog, "d", "g", v, columns={"g", "v"}).source.startswith("layout")
    got, _ = _served_equal(c, 300)
    groups = {r[0] for r in got.rows}
    assert 1999 in groups and 0 not in groups


commits = st.lists(st.sampled_from([
    "INSERT INTO {t} SELECT id + {n}, (id * 13) % 2000, 40, 1 FROM range(50)",
    "DELETE FROM {t} WHERE id % 97 = {k}",
    "UPDATE {t} SET v = v + 30 WHERE g = {k}",
    "MERGE INTO {t} t USING (SELECT {k} AS id, 5 AS g, 900 AS v, 2 AS w) u ON t.id = u.id "
    "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
]), min_size=1, max_size=2)


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seq=commits, x=st.sampled_from([300, 500, 800]), k=st.integers(0, 39))
def test_copy_served_equals_plain_under_outside_commits(spark, tmp_path_factory, seq, x, k):
    c, path = _ctx(spark, tmp_path_factory.mktemp("delta_copy_seq"))
    build_layout(c.catalog, "d", "g", columns=["v"])
    for i, stmt in enumerate(seq):
        spark.sql(stmt.format(t=f"delta.`{path}`", n=2_000_000 + 1000 * i, k=k + i))
        c.catalog.sync("d")
        _served_equal(c, x)


def test_the_advice_copies_a_keyed_delta_table_and_says_why_not_without_a_key(spark, tmp_path):
    """``g`` is scattered over the Delta table's files: the decision prices and builds a narrow
    copy in the warehouse for the keyed table; registered without a key, it names the key."""
    from advisor.serve.query_path import serve_query
    from advisor.serve.settings import AdviseSettings

    c, path = _ctx(spark, tmp_path)
    s = AdviseSettings(uses=20, measured_costs=False)
    sql = SQL.format(x=300)
    got = serve_query(c, sql, s)
    d = got.record["decision"]
    assert d["layout"] and d["layout"]["built"] and d["layout"]["columns"] == ["g", "v"], d["reason"]
    plain = serve_query(c, sql, AdviseSettings(use=False))
    assert got.record["result"] == plain.record["result"]
    again = serve_query(c, sql, s)
    assert again.record["decision"]["action"] == "reuse" and again.record["result"] == plain.record["result"]
    assert again.record["scan"]["rows"] < ROWS / 5
    c.catalog.register_delta("d", path, 0)  # the same table without a declared key
    no_key = serve_query(c, sql.replace("300", "301"), s).record["decision"]
    assert no_key["action"] == "no-go" and "declared key" in no_key["reason"]
