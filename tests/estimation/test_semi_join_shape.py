"""Which semi- and anti-join shapes the estimators size, and which they refuse with a reason.

A semi-join subquery holding the aggregation (TPC-H Q18 as written) is sized as that subquery when
every other read of its table is joined on the subquery's key; a semi- or anti-join below the
aggregation is evaluated in full against the sample when its right side reads only smaller tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.estimation.query_shape import CannotEstimate, analyze
from advisor.plan.parse import parse_sql

SCHEMA = {
    "lineitem": [("l_orderkey", "bigint"), ("l_partkey", "bigint"), ("l_suppkey", "bigint"),
                 ("l_quantity", "decimal(15,2)"), ("l_shipdate", "date")],
    "orders": [("o_orderkey", "bigint"), ("o_custkey", "bigint"), ("o_totalprice", "decimal(15,2)"),
               ("o_orderdate", "date")],
    "customer": [("c_custkey", "bigint"), ("c_name", "string")],
    "partsupp": [("ps_partkey", "bigint"), ("ps_suppkey", "bigint"), ("ps_availqty", "int")],
    "supplier": [("s_suppkey", "bigint"), ("s_comment", "string")],
}
ROWS = {"lineitem": 6_000_000, "orders": 1_500_000, "customer": 150_000, "partsupp": 800_000, "supplier": 10_000}
Q18 = "\n".join(line for line in (Path(__file__).resolve().parents[2] / "workloads" / "tpch_queries" / "q18.sql")
                .read_text().splitlines() if not line.startswith("--"))
SUB = "SELECT l_orderkey FROM lineitem {where}GROUP BY l_orderkey HAVING sum(l_quantity) > 300"
OUTER = ("SELECT o_orderkey, o_totalprice, sum(l_quantity) AS q FROM orders, lineitem WHERE o_orderkey {op} ({sub}) "
         "AND {join} GROUP BY o_orderkey, o_totalprice ORDER BY o_totalprice DESC LIMIT 100")


def shape_of(sql):
    return analyze(parse_sql(sql, SCHEMA.__getitem__), ROWS.__getitem__)


def test_q18_as_written_is_sized_as_its_in_subquery():
    s = shape_of(Q18)
    assert (s.kind, s.fact.table, s.strata) == ("having", "lineitem", ["l_orderkey"])
    assert s.bound and "upper bounds" in s.bound
    assert [n.table for n in s.inner.child.walk() if hasattr(n, "table")] == ["lineitem"]


@pytest.mark.parametrize("sql, why", [
    # the outer lineitem is joined on another column: its rows are not those of passing groups
    (OUTER.format(op="IN", sub=SUB.format(where=""), join="o_orderkey = l_suppkey"), "not joined on l_orderkey"),
    # NOT IN keeps the orders the subquery rejects
    (OUTER.format(op="NOT IN", sub=SUB.format(where=""), join="o_orderkey = l_orderkey"), "AntiJoin"),
    # a filtered subquery's groups hold fewer rows than the outer query reads of their keys
    (OUTER.format(op="IN", sub=SUB.format(where="WHERE l_shipdate > DATE '1995-01-01' "),
                  join="o_orderkey = l_orderkey"), "filters or joins"),
])
def test_semi_join_subqueries_that_do_not_bound_the_query_are_refused(sql, why):
    with pytest.raises(CannotEstimate, match=why):
        shape_of(sql)


def test_the_same_query_joined_on_the_key_is_sized():
    s = shape_of(OUTER.format(op="IN", sub=SUB.format(where=""), join="o_orderkey = l_orderkey"))
    assert (s.kind, s.fact.table) == ("having", "lineitem") and s.bound


@pytest.mark.parametrize("op", ["NOT IN", "IN"])
def test_a_filter_subquery_over_a_smaller_table_is_evaluated_in_full(op):
    s = shape_of(f"SELECT ps_partkey, sum(ps_availqty) AS q FROM partsupp WHERE ps_suppkey {op} "
                 "(SELECT s_suppkey FROM supplier WHERE s_comment LIKE '%Complaints%') "
                 "GROUP BY ps_partkey HAVING sum(ps_availqty) > 5000")
    assert (s.kind, s.fact.table, s.strata, s.bound) == ("having", "partsupp", ["ps_partkey"], None)
    assert "ps_suppkey" in s.read_columns()  # the sample carries the semi-join's column


def test_a_filter_subquery_reading_the_sampled_table_is_refused():
    with pytest.raises(CannotEstimate, match="reads lineitem, the sampled table"):
        shape_of("SELECT l_suppkey, sum(l_quantity) AS q FROM lineitem WHERE l_partkey IN "
                 "(SELECT l_partkey FROM lineitem WHERE l_quantity > 49) GROUP BY l_suppkey")
