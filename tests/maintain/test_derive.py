"""Sketches for new bindings derived from a template's maintained operator state
(``advisor.maintain.spark.derive``) equal a capture, and their chains maintain to the recapture."""

from __future__ import annotations

import pytest

from advisor.sketch.capture import capture, capture_batch
from advisor.warehouse.catalog import Catalog
from advisor.maintain.spark.derive import derivable, derive_sketch
from advisor.maintain.spark.service import maintain_sketch
from advisor.partition.range_partition import build_partition
from advisor.plan.parse import parse_sql
from advisor.warehouse.sketch_records import load_sketch
from advisor.warehouse.column_stats import column_stats
from advisor.warehouse.store import Store
from workloads.data.update_batches import batch_frames

from diffgen import make_dims, make_facts

# (first binding, later bindings) of one template, sketched on attr
CASES = [
    ("SELECT g1, sum(v) AS a FROM facts GROUP BY g1 HAVING sum(v) > {}", "g1", [1500, 900, 2500]),
    ("SELECT d, count(*) AS a FROM facts GROUP BY d ORDER BY a DESC LIMIT {}", "d", [3, 8, 1]),
    ("SELECT g2, avg(v) AS a, count(*) AS n FROM facts GROUP BY g2 HAVING avg(v) > {}", "k", [45, 30, 60]),
]


@pytest.fixture(scope="module")
def cat(spark, tmp_path_factory):
    c = Catalog(spark, Store(tmp_path_factory.mktemp("derivewh")))
    c.create_table("facts", spark.createDataFrame(make_facts(9, 800)))
    c.create_table("dims", spark.createDataFrame(make_dims()))
    column_stats(c, "facts")  # the group-count gate reads the stored NDVs, as ANALYZE would keep them
    return c


def _q(cat, sql):
    return parse_sql(sql, lambda t: cat.schema(t))


def _fresh(cat, q, attr, part):
    (fresh,), _ = capture_batch(cat, [(q, {"facts": attr}, {"facts": part})], {"facts": cat.current_version("facts")})
    return fresh.parts[0].fragments


@pytest.mark.parametrize("sql,attr,bindings", CASES)
def test_derived_sketch_equals_capture_and_maintains(cat, sql, attr, bindings):
    part = build_partition(cat, "facts", attr, 12)
    first = _q(cat, sql.format(bindings[0]))
    capture(cat, first, {"facts": attr}, 12, check=False, partitions={"facts": part})
    derived = []
    for b in bindings[1:]:
        q = _q(cat, sql.format(b))
        got = derive_sketch(cat, q, {"facts": attr}, {"facts": part}, {"facts": cat.current_version("facts")})
        assert got is not None
        sk = got[0]
        assert sk.how == "derive" and sk.parts[0].fragments == _fresh(cat, q, attr, part), (sql, b)
        derived.append((q, sk))
    assert any(sk.parts[0].fragments for _, sk in derived)  # not trivially empty
    ins, dels = batch_frames(cat, "facts", 60, 40, seed=len(sql))
    cat.apply_frames("facts", ins, dels)
    for q, sk in derived:  # each derived chain starts with operator state: an incremental step
        res = maintain_sketch(cat, sk.id)
        assert res.how == "incremental"
        assert load_sketch(cat.store, res.new_id).parts[0].fragments == _fresh(cat, q, attr, part)
    # after the batch a new binding derives from a caught-up head
    q = _q(cat, sql.format(bindings[0]))
    sk = derive_sketch(cat, q, {"facts": attr}, {"facts": part}, {"facts": cat.current_version("facts")})[0]
    assert sk.parts[0].fragments == _fresh(cat, q, attr, part)


def test_instances_differing_below_the_aggregation_are_not_derived(cat):
    sql = "SELECT g2, count(*) AS a FROM facts WHERE v > {} GROUP BY g2 HAVING count(*) >= 5"
    part = build_partition(cat, "facts", "g2", 12)
    capture(cat, _q(cat, sql.format(10)), {"facts": "g2"}, 12, check=False, partitions={"facts": part})
    q = _q(cat, sql.format(50))
    assert derive_sketch(cat, q, {"facts": "g2"}, {"facts": part}, {"facts": cat.current_version("facts")}) is None
    assert derivable(q)


@pytest.mark.parametrize("table,attr", [("dims", "region"), ("facts", "g1")])
def test_join_below_the_aggregation_is_derived_with_its_bloom_filters(cat, table, attr):
    """Sketches on the joined dimension's group-by column and on the fact side: derived sketches equal
    captures, and their chains step incrementally to the recapture after a fact batch."""
    sql = ("SELECT dm.region, sum(f.v) AS a FROM facts f JOIN dims dm ON f.g1 = dm.g1 "
           "GROUP BY dm.region HAVING sum(f.v) > {}")
    column_stats(cat, "dims")
    part = build_partition(cat, table, attr, 12)
    versions = lambda: {"facts": cat.current_version("facts"), "dims": 1}  # noqa: E731

    def fresh(q):
        (f,), _ = capture_batch(cat, [(q, {table: attr}, {table: part})], versions())
        return f.parts[0].fragments

    assert derivable(_q(cat, sql.format(0)))
    capture(cat, _q(cat, sql.format(12_000)), {table: attr}, 12, check=False, partitions={table: part})
    derived = []
    for b in (6_000, 16_000):
        q = _q(cat, sql.format(b))
        got = derive_sketch(cat, q, {table: attr}, {table: part}, versions())
        assert got is not None and got[0].how == "derive"
        assert got[0].parts[0].fragments == fresh(q), b
        derived.append((q, got[0]))
    assert derived[0][1].parts[0].fragments != derived[1][1].parts[0].fragments  # the bindings matter
    ins, dels = batch_frames(cat, "facts", 80, 40, seed=7)
    cat.apply_frames("facts", ins, dels)
    for q, sk in derived:
        res = maintain_sketch(cat, sk.id)
        assert res.how == "incremental"
        assert load_sketch(cat.store, res.new_id).parts[0].fragments == fresh(q)


def test_large_aggregations_are_captured_not_derived(cat, monkeypatch):
    """Above DERIVE_MAX_GROUPS groups (by the stored NDVs) copying the state costs more than a capture."""
    import advisor.maintain.spark.derive as D

    sql = "SELECT g1, sum(v) AS a FROM facts GROUP BY g1 HAVING sum(v) > {}"
    part = build_partition(cat, "facts", "g1", 12)
    capture(cat, _q(cat, sql.format(1200)), {"facts": "g1"}, 12, check=False, partitions={"facts": part})
    q = _q(cat, sql.format(700))
    args = ({"facts": "g1"}, {"facts": part}, {"facts": cat.current_version("facts")})
    assert D._groups_estimate(cat, q, []) >= 2
    monkeypatch.setattr(D, "DERIVE_MAX_GROUPS", 1)
    assert derive_sketch(cat, q, *args) is None
    monkeypatch.setattr(D, "DERIVE_MAX_GROUPS", 200_000)
    assert derive_sketch(cat, q, *args) is not None


def test_the_gate_counts_a_head_states_groups_not_the_key_product(cat, monkeypatch):
    """Two correlated group keys: the NDV product overstates the groups, so with the gate at the
    true count a binding is captured while no head has state, and derived once one has (its state's
    recorded groups).  TPC-H SF1 (l_partkey, l_suppkey): 2e9 by the product, 800k held."""
    import advisor.maintain.spark.derive as D
    from advisor.maintain.spark import state_rental as rent
    from advisor.maintain.spark import state_store as states

    sql = "SELECT g1, g2, sum(v) AS a FROM facts GROUP BY g1, g2 HAVING sum(v) > {}"
    part = build_partition(cat, "facts", "g1", 12)
    v = lambda: {"facts": cat.current_version("facts")}  # noqa: E731
    head = capture(cat, _q(cat, sql.format(150)), {"facts": "g1"}, 12, check=False, partitions={"facts": part}).sketch
    frame = cat.read("facts", v()["facts"])
    held = frame.select("g1", "g2").distinct().count()
    product = frame.select("g1").distinct().count() * frame.select("g2").distinct().count()
    assert held < product  # skewed g1: some (g1, g2) pairs never occur
    monkeypatch.setattr(D, "DERIVE_MAX_GROUPS", held)
    q = _q(cat, sql.format(100))
    assert not states.has(cat.store, head.id) and D._groups_estimate(cat, q, [head]) > held
    assert derive_sketch(cat, q, {"facts": "g1"}, {"facts": part}, v()) is None
    monkeypatch.setattr(D, "DERIVE_MAX_GROUPS", 10 * product)  # the head's state initialised now
    first = derive_sketch(cat, q, {"facts": "g1"}, {"facts": part}, v())
    assert first is not None and first[2] == head.id
    assert states.groups(cat.store, first[0].id) == held
    assert cat.store.observed_groups(q.template) is None  # never ran plain: the state's count stands in
    assert rent.state_groups(cat.store, q.root, q.template) == held
    monkeypatch.setattr(D, "DERIVE_MAX_GROUPS", held)
    q2 = _q(cat, sql.format(60))
    got = derive_sketch(cat, q2, {"facts": "g1"}, {"facts": part}, v())
    assert got is not None and got[0].how == "derive"
    assert got[0].parts[0].fragments == _fresh(cat, q2, "g1", part)


def test_stale_stateless_heads_buy_state_by_ski_rental(cat, monkeypatch):
    """No head has state and none is current: the binding is captured (rent) while the template's
    spent rent plus this capture stays under the predicted initialisation, and once it reaches it,
    the binding's own state is initialised and its sketch derived from it; the next binding derives
    from that state."""
    import json

    import advisor.maintain.spark.state_rental as R

    sql = "SELECT g1, count(*) AS n, sum(v) AS a FROM facts GROUP BY g1 HAVING sum(v) > {}"
    part = build_partition(cat, "facts", "g1", 12)
    head = capture(cat, _q(cat, sql.format(1000)), {"facts": "g1"}, 12, check=False,
                   partitions={"facts": part}).sketch
    ins, dels = batch_frames(cat, "facts", 50, 30, seed=11)
    cat.apply_frames("facts", ins, dels)  # the head is stale and has no state
    v = {"facts": cat.current_version("facts")}
    q = _q(cat, sql.format(1400))
    monkeypatch.setattr(R, "GROUPS_PER_S", 1e-3)  # the state is predicted to cost far more than a capture
    monkeypatch.setattr(R, "DRIVER_GROUPS_PER_S", 1e-3)  # (on either path)
    assert derive_sketch(cat, q, {"facts": "g1"}, {"facts": part}, v) is None
    predicted = R.predict_init(cat.store, q.root, cat.version("facts", v["facts"]).rows, bulk=True)
    R.record_rent(cat.store, head.id, predicted, 1.0)  # the template's chains have spent that much
    got = derive_sketch(cat, q, {"facts": "g1"}, {"facts": part}, v)
    assert got is not None and got[2] is None  # its own state, bought now
    assert got[0].parts[0].fragments == _fresh(cat, q, "g1", part)
    meta = json.loads(cat.store.one("SELECT meta_json FROM states WHERE sketch_id=?", (got[0].id,))["meta_json"])
    assert meta["bought"]["spent"] >= meta["bought"]["predicted"] - meta["bought"]["next"]
    q2 = _q(cat, sql.format(700))
    nxt = derive_sketch(cat, q2, {"facts": "g1"}, {"facts": part}, v)
    assert nxt is not None and nxt[2] == got[0].id and nxt[0].parts[0].fragments == _fresh(cat, q2, "g1", part)
