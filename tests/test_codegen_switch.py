"""Sketched queries with big range filters run without whole-stage codegen (``use.WSCG_MAX_RANGES``):
same rows as the plain query, the session's setting restored after, and the plan really without
whole-stage stages while it is off."""

from __future__ import annotations

import pytest

from advisor import use
from advisor.capture import capture
from advisor.catalog import Catalog
from advisor.execute import WSCG, _codegen, run_query
from advisor.partitions import build_partition
from advisor.plan.parse import parse_sql
from advisor.store import Store

from diffgen import make_facts

SQL = "SELECT k, v FROM facts WHERE w > 9"


@pytest.fixture(scope="module")
def env(spark, tmp_path_factory):
    cat = Catalog(spark, Store(tmp_path_factory.mktemp("cg")))
    cat.create_table("facts", spark.createDataFrame(make_facts(3, 700)))
    part = build_partition(cat, "facts", "k", 200)
    q = parse_sql(SQL, lambda t: cat.schema(t))
    sk = capture(cat, q, {"facts": "k"}, 200, check=False, partitions={"facts": part}).sketch
    return cat, q, sk


def test_a_big_filter_runs_without_whole_stage_codegen_and_returns_the_same_rows(env, spark, monkeypatch):
    cat, q, sk = env
    n = use.ranged_terms(cat, sk)
    assert n > use.WSCG_MAX_RANGES, n  # the scattered sketch needs many ranges
    before = spark.conf.get(WSCG)
    plain = run_query(cat, q)
    big = run_query(cat, q, sketch=sk)
    assert plain.whole_stage and not big.whole_stage
    assert sorted(big.rows) == sorted(plain.rows) and len(plain.rows) > 50
    assert spark.conf.get(WSCG) == before
    monkeypatch.setattr(use, "WSCG_MAX_RANGES", n)
    small = run_query(cat, q, sketch=sk)
    assert small.whole_stage and sorted(small.rows) == sorted(plain.rows)


def _stages(spark, sql: str) -> str:
    df = spark.sql(sql)
    df.collect()
    return df._jdf.queryExecution().executedPlan().toString()


def test_switch_removes_whole_stage_stages_and_restores_the_setting(env, spark):
    cat, _, _ = env
    view = cat.view_name("facts", cat.current_version("facts"))
    cat.read("facts").createOrReplaceTempView(view)
    sql = f"SELECT g1, sum(v) FROM {view} WHERE w > 0 GROUP BY g1"
    assert "*(" in _stages(spark, sql)  # whole-stage stages are marked *(n)
    before = spark.conf.get(WSCG)
    with _codegen(spark, False):
        assert spark.conf.get(WSCG) == "false"
        assert "*(" not in _stages(spark, sql)
    assert spark.conf.get(WSCG) == before
    with pytest.raises(ZeroDivisionError):
        with _codegen(spark, False):
            raise ZeroDivisionError
    assert spark.conf.get(WSCG) == before
