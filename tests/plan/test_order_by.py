"""ORDER BY on columns and aggregates the SELECT list does not show, with and without LIMIT: the
product's plain run returns the rows Spark returns for the same SQL, in the same order.  The sort
keys are unique (a row id, distinct random doubles, their per-group sums), so the order is total."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from advisor.plan.parse import parse_sql
from advisor.sketch.run import run_query
from advisor.warehouse.catalog import Catalog
from advisor.warehouse.store import Store

ROWS = 300


@pytest.fixture(scope="module")
def cat(spark, tmp_path_factory):
    rng = np.random.default_rng(5)
    pdf = pd.DataFrame({"k": np.arange(ROWS), "g": rng.integers(0, 12, ROWS),
                        "v": rng.random(ROWS) * 1000, "s": [f"s{i:03d}" for i in rng.permutation(ROWS)]})
    c = Catalog(spark, Store(tmp_path_factory.mktemp("orderwh")))
    c.create_table("ot", spark.createDataFrame(pdf))
    spark.createDataFrame(pdf).createOrReplaceTempView("ot_direct")
    return c


ROW_QUERIES = st.tuples(st.sampled_from(["s", "g", "s, g", "g, s"]),
                        st.sampled_from(["k", "v", "k * -1", "v + k"]),
                        st.sampled_from(["", " WHERE g > 3", " WHERE v < 700"]))
GROUP_QUERIES = st.tuples(st.sampled_from(["g", "g, count(*) AS n", "count(*) AS n, g"]),
                          st.sampled_from(["sum(v)", "max(v)", "min(v) + sum(v)", "sum(v), g"]),
                          st.sampled_from(["", " WHERE k % 3 > 0"]))


@st.composite
def queries(draw):
    if draw(st.booleans()):
        cols, key, where = draw(ROW_QUERIES)
        sql = f"SELECT {cols} FROM ot{where} ORDER BY {key}"
    else:
        cols, key, where = draw(GROUP_QUERIES)  # (Spark itself cannot sort a HAVING's groups by an
        sql = f"SELECT {cols} FROM ot{where} GROUP BY g ORDER BY {key}"  # aggregate it does not select)
    if draw(st.booleans()):
        sql += " DESC" if "," not in sql.rsplit("ORDER BY", 1)[1] else ""
    if draw(st.booleans()):
        sql += f" LIMIT {draw(st.integers(1, 15))}"
    return sql


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sql=queries())
def test_rows_come_in_sparks_order(spark, cat, sql):
    q = parse_sql(sql, lambda t: cat.schema(t))
    got = run_query(cat, q).rows
    want = [tuple(r) for r in spark.sql(sql.replace("FROM ot", "FROM ot_direct")).collect()]
    assert got == want, sql


def test_the_reported_shapes(spark, cat):
    """An unselected aggregate (TPC-H Q1 ordered by a sum it does not show) and an unselected key."""
    for sql in ("SELECT g FROM ot GROUP BY g ORDER BY sum(v)",
                "SELECT s FROM ot WHERE g < 6 ORDER BY k DESC"):
        q = parse_sql(sql, lambda t: cat.schema(t))
        want = [tuple(r) for r in spark.sql(sql.replace("FROM ot", "FROM ot_direct")).collect()]
        assert run_query(cat, q).rows == want
        assert q.output_names == [sql.split()[1]]  # the sort key is not part of the answer
