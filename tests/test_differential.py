"""Differential tests: for every generated supported query and every attribute the Z3 checker
accepts, the query run with the captured sketch returns exactly the rows it returns without one."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.capture import capture, sketch_attrs
from advisor.catalog import Catalog
from advisor.execute import plain_source, versions_now
from advisor.partitions import build_partition
from advisor.plan.parse import parse_sql
from advisor.plan.to_sql import query_sql
from advisor.safety import check_safety
from advisor.stats import stats_for_query
from advisor.store import Store
from advisor.use import sketch_source

from diffgen import FACT_ATTRS, make_dims, make_facts, queries

SEEDS = (1, 2)
FRAGS = (5, 40)


@pytest.fixture(scope="module")
def env(spark, tmp_path_factory):
    """One warehouse per data seed, with partitions on every candidate attribute."""
    envs = {}
    for seed in SEEDS:
        cat = Catalog(spark, Store(tmp_path_factory.mktemp(f"wh{seed}")))
        cat.create_table("facts", spark.createDataFrame(make_facts(seed, 400 + 150 * seed)))
        cat.create_table("dims", spark.createDataFrame(make_dims()))
        parts = {(a, n): build_partition(cat, "facts", a, n) for a in FACT_ATTRS for n in FRAGS}
        envs[seed] = (cat, parts)
    return envs


STATS = {"cases": 0, "safe": 0, "compared": 0}


def differs(spark, a_sql: str, b_sql: str) -> int:
    """Rows in the symmetric bag difference of two queries, computed in one Spark job."""
    return spark.sql(f"SELECT count(*) FROM (({a_sql}) EXCEPT ALL ({b_sql}) UNION ALL "
                     f"(({b_sql}) EXCEPT ALL ({a_sql})))").first()[0]


def check_case(spark, env, seed, sql, attr, n) -> bool:
    cat, parts = env[seed]
    q = parse_sql(sql, lambda t: cat.schema(t))
    versions = versions_now(cat, q)
    v = check_safety(q.root, sketch_attrs(q, {"facts": attr}), stats_for_query(cat, q, versions))
    STATS["cases"] += 1
    assert v.reason, "every verdict carries a reason"
    if not v.safe:
        return False
    STATS["safe"] += 1
    res = capture(cat, q, {"facts": attr}, n, versions, check=False, partitions={"facts": parts[(attr, n)]})
    plain = query_sql(q, plain_source(cat, versions))
    sketched = query_sql(q, sketch_source(cat, res.sketch, versions, use_layout=False))
    d = differs(spark, plain, sketched)
    STATS["compared"] += 1
    assert d == 0, f"{sql} sketched on {attr} ({n} fragments, {len(res.sketch.parts[0].fragments)} kept): {d} rows differ"
    return True


@settings(max_examples=230, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(sql=queries(), seed=st.sampled_from(SEEDS), attr=st.sampled_from(FACT_ATTRS), n=st.sampled_from(FRAGS))
def test_sketched_equals_plain(spark, env, sql, seed, attr, n):
    check_case(spark, env, seed, sql, attr, n)


def test_enough_cases_were_compared():
    # Runs after the property test in file order: the generator must exercise safe sketches a lot.
    assert STATS["cases"] >= 200, STATS
    assert STATS["compared"] >= 80, STATS


@pytest.mark.soak
@settings(max_examples=5000, deadline=None, suppress_health_check=list(HealthCheck))
@given(sql=queries(), seed=st.sampled_from(SEEDS), attr=st.sampled_from(FACT_ATTRS), n=st.sampled_from(FRAGS))
def test_soak_sketched_equals_plain(spark, env, sql, seed, attr, n):
    check_case(spark, env, seed, sql, attr, n)
