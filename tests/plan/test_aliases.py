"""Alias forms Spark SQL accepts: a HAVING on a SELECT alias, and a derived table's column-alias
list.  Both plan as their spelled-out equivalents and return Spark's answer for the same SQL."""

from __future__ import annotations

import pandas as pd
import pytest

from advisor.errors import BadInput
from advisor.plan.parse import parse_sql
from advisor.plan.show import tree_lines
from advisor.sketch.run import run_query
from advisor.warehouse.catalog import Catalog
from advisor.warehouse.store import Store

SCHEMA = {"t": [("a", "int"), ("b", "int")]}


def test_having_on_a_select_alias_plans_as_the_aggregate_it_names():
    alias = parse_sql("SELECT a, sum(b) AS revenue FROM t GROUP BY a HAVING revenue > 10", SCHEMA.get)
    spelled = parse_sql("SELECT a, sum(b) AS revenue FROM t GROUP BY a HAVING sum(b) > 10", SCHEMA.get)
    assert tree_lines(alias.root) == tree_lines(spelled.root)
    assert alias.bindings == (10,)


def test_a_column_alias_list_renames_the_derived_tables_columns():
    q = parse_sql("SELECT n, count(*) AS c FROM (SELECT a, count(*) FROM t GROUP BY a) AS d (k, n) GROUP BY n",
                  SCHEMA.get)
    assert q.output_names == ["n", "c"]
    with pytest.raises(BadInput, match="names 3 columns but its query has 2"):
        parse_sql("SELECT x FROM (SELECT a, b FROM t) AS d (x, y, z)", SCHEMA.get)


@pytest.fixture(scope="module")
def cat(spark, tmp_path_factory):
    pdf = pd.DataFrame({"a": [i % 7 for i in range(140)], "b": [(i * 37) % 101 for i in range(140)]})
    c = Catalog(spark, Store(tmp_path_factory.mktemp("aliaswh")))
    c.create_table("at", spark.createDataFrame(pdf))
    spark.createDataFrame(pdf).createOrReplaceTempView("at_direct")
    return c


@pytest.mark.parametrize("sql", [
    "SELECT a, sum(b) AS revenue FROM at GROUP BY a HAVING revenue > 1000 ORDER BY a",
    "SELECT n, count(*) AS c FROM (SELECT a, count(*) FROM at WHERE b > 20 GROUP BY a) AS d (k, n) "
    "GROUP BY n ORDER BY n",
])
def test_both_forms_return_sparks_answer(spark, cat, sql):
    got = run_query(cat, parse_sql(sql, lambda t: cat.schema(t))).rows
    want = [tuple(r) for r in spark.sql(sql.replace("FROM at", "FROM at_direct")).collect()]
    assert got == want and got
