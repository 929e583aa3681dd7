"""Rent or buy operator state (advisor.maintain.spark.state_rental): the ski-rental rule, and a chain on Spark that
is recaptured while state does not pay, then buys state and continues incrementally -- equal to a
fresh capture after every batch either way."""

from __future__ import annotations

import pytest

from advisor.sketch.capture import capture, capture_batch
from advisor.warehouse.catalog import Catalog
from advisor.sketch.run import run_query
from advisor.maintain.spark import state_rental as rent
from advisor.maintain.spark.service import maintain_sketch
from advisor.partition.range_partition import build_partition
from advisor.plan.parse import parse_sql
from advisor.warehouse.sketch_records import load_sketch
from advisor.warehouse.store import Store
from workloads.data.update_batches import batch_frames

from diffgen import make_facts
from advisor.serve.decision_record import digest


@pytest.mark.parametrize("spent,nxt,init,want", [
    (0.0, 1.0, 5.0, True),     # first maintenance of a big table: rent
    (3.5, 1.0, 5.0, True),     # 4.5 <= 5: still rent
    (4.5, 1.0, 5.0, False),    # 5.5 > 5: buy
    (0.0, 0.1, 1.0, False),    # initialisation under MIN_INIT_SECONDS: buy at once
    (0.0, 6.0, 5.0, False),    # one recapture costs more than the state: buy
])
def test_ski_rental_rule(spent, nxt, init, want):
    assert rent.should_rent(spent, nxt, init) is want


def test_an_answering_recapture_is_rent_only_beyond_the_sketched_run(tmp_path):
    """The owner of state runs the query too: an answering recapture's rent is its seconds less
    the template's median sketched run (all of it while no sketched run is logged)."""
    store = Store(tmp_path)
    assert rent.answered_rent(store, "t", 2.9) == 2.9
    for secs in (0.4, 0.5, 0.9):
        store.log_run("run", "SELECT 1", {"template": "t", "sketch": 3, "seconds": secs})
    store.log_run("run", "SELECT 1", {"template": "t", "seconds": 2.0})   # plain: not an owner's run
    store.log_run("run", "SELECT 1", {"template": "u", "sketch": 4, "seconds": 0.1})
    assert rent.answered_rent(store, "t", 2.9) == pytest.approx(2.4)
    assert rent.answered_rent(store, "t", 0.3) == 0.0
    assert rent.answered_rent(store, None, 2.9) == 2.9


def test_a_plan_the_driver_cannot_initialise_is_priced_by_spark_initialisations(tmp_path):
    """Driver initialisations (``bulk_arrow``) are fast; they price plans of their own shape, never
    one that needs Spark (a double below the aggregation)."""
    import json
    import time

    store = Store(tmp_path)
    with store.tx() as c:
        c.execute("INSERT INTO states(sketch_id, path, meta_json, created) VALUES (?,?,?,?)",
                  (1, "", json.dumps({"init_seconds": 0.3, "init_rows": 6_000_000, "bulk": True,
                                      "driver": True}), time.time()))
    schema = lambda t: [("g", "int"), ("v", "int"), ("x", "double")]  # noqa: E731
    plain = parse_sql("SELECT g, count(*) AS n FROM t WHERE v > 2 GROUP BY g HAVING count(*) > 3", schema).root
    doubles = parse_sql("SELECT g, count(*) AS n FROM t WHERE x > 2 GROUP BY g HAVING count(*) > 3", schema).root
    assert rent.predict_init(store, plain, 6_000_000, True) == pytest.approx(0.3)
    assert rent.predict_init(store, doubles, 6_000_000, True) == pytest.approx(6_000_000 / rent.BULK_INIT_ROWS_PER_S)


def test_a_driver_shaped_plan_is_priced_by_driver_initialisations_and_their_group_rate(tmp_path, monkeypatch):
    """The driver groups without a transfer: its groups cost ``DRIVER_GROUPS_PER_S``, and its own
    records price it, not the Spark ones (about three times slower for the same rows)."""
    import json
    import time

    store = Store(tmp_path)
    with store.tx() as c:
        for sid, meta in [(1, {"init_seconds": 0.5, "init_rows": 6_000_000, "init_groups": 0, "bulk": True,
                               "driver": True}),
                          (2, {"init_seconds": 6.0, "init_rows": 6_000_000, "init_groups": 0, "bulk": True})]:
            c.execute("INSERT INTO states(sketch_id, path, meta_json, created) VALUES (?,?,?,?)",
                      (sid, "", json.dumps(meta), time.time()))
    monkeypatch.setattr(rent, "state_groups", lambda *a, **k: 1_500_000)
    schema = lambda t: [("g", "int"), ("v", "int"), ("x", "double")]  # noqa: E731
    driver = parse_sql("SELECT g, sum(v) AS n FROM t WHERE v > 2 GROUP BY g HAVING sum(v) > 3", schema).root
    spark = parse_sql("SELECT g, sum(x) AS n FROM t GROUP BY g HAVING sum(x) > 3", schema).root
    assert rent.predict_init(store, driver, 6_000_000, True) == pytest.approx(0.5 + 1.5)
    assert rent.predict_init(store, spark, 6_000_000, True) == pytest.approx(6.0 + 1_500_000 / rent.GROUPS_PER_S)


def test_rent_spend_is_recorded_per_sketch_version(tmp_path):
    store = Store(tmp_path)
    assert rent.rent_of(store, 7) == (0.0, 0.0)
    rent.record_rent(store, 7, 2.5, 1.25)
    assert rent.rent_of(store, 7) == (2.5, 1.25) and rent.rent_of(store, 8) == (0.0, 0.0)
    assert rent.init_rate(store) == rent.INIT_ROWS_PER_S  # no initialisation observed yet
    assert rent.init_rate(store, bulk=True) == rent.BULK_INIT_ROWS_PER_S


def test_init_rate_is_measured_per_kind(tmp_path):
    import json
    import time

    store = Store(tmp_path)
    with store.tx() as c:
        for sid, meta in [(1, {"init_seconds": 2.0, "init_rows": 6_000_000, "bulk": True}),
                          (2, {"init_seconds": 10.0, "init_rows": 1_000_000})]:
            c.execute("INSERT INTO states(sketch_id, path, meta_json, created) VALUES (?,?,?,?)",
                      (sid, "x", json.dumps(meta), time.time()))
    assert rent.init_rate(store, bulk=True) == 3_000_000
    assert rent.init_rate(store) == 100_000


def test_without_measured_costs_the_purchase_is_priced_by_priors(tmp_path):
    """A slow initialisation measured in the store (a loaded machine) makes a 30,000-row chain rent
    when costs are measured, but not without them: the same data then rent or buy alike anywhere."""
    import json
    import time

    store = Store(tmp_path)
    with store.tx() as c:
        c.execute("INSERT INTO states(sketch_id, path, meta_json, created) VALUES (?,?,?,?)",
                  (1, "", json.dumps({"init_seconds": 3.6, "init_rows": 30_000, "bulk": True}), time.time()))
    root = parse_sql("SELECT g, count(*) AS n FROM t GROUP BY g HAVING count(*) > 3",
                     lambda t: [("g", "int"), ("v", "int")]).root
    slow = rent.predict_init(store, root, 30_000, True)
    prior = rent.predict_init(store, root, 30_000, True, measured=False)
    assert slow == pytest.approx(3.6) and prior == pytest.approx(30_000 / rent.BULK_INIT_ROWS_PER_S)
    nxt = 30_000 / rent.RECAPTURE_ROWS_PER_S
    assert rent.should_rent(0.0, nxt, slow) and not rent.should_rent(0.0, nxt, prior)


def _init_row(c, sid, meta, created):
    import json

    c.execute("INSERT INTO states(sketch_id, path, meta_json, created) VALUES (?,?,?,?)",
              (sid, "x", json.dumps(meta), created))


def test_init_rate_reads_initialisations_past_many_incremental_steps(tmp_path):
    """Every incremental step writes a states row too; 60 of them after the only initialisation
    must not hide it (the rate fell back to the prior before)."""
    store = Store(tmp_path)
    with store.tx() as c:
        _init_row(c, 1, {"init_seconds": 3.0, "init_rows": 6_000_000, "bulk": True}, 1.0)
        for sid in range(2, 62):
            _init_row(c, sid, {"bytes": 1000}, 2.0 + sid)
    assert rent.init_rate(store, bulk=True) == 2_000_000


def test_init_rate_takes_the_groups_time_out_but_at_most_half(tmp_path):
    a, b = Store(tmp_path / "a"), Store(tmp_path / "b")
    with a.tx() as c:  # 3 s, of which 300k groups take 1 s: 6M rows in 2 s
        _init_row(c, 1, {"init_seconds": 3.0, "init_rows": 6_000_000, "bulk": True,
                         "init_groups": rent.GROUPS_PER_S}, 1.0)
    with b.tx() as c:  # 2 s, "groups" of 3 s: only half is taken out
        _init_row(c, 1, {"init_seconds": 2.0, "init_rows": 6_000_000, "bulk": True,
                         "init_groups": 3 * rent.GROUPS_PER_S}, 1.0)
    assert rent.init_rate(a, bulk=True) == 3_000_000
    assert rent.init_rate(b, bulk=True) == 6_000_000


def test_initialisations_dominated_by_their_groups_do_not_set_the_row_rate(tmp_path):
    """A 1.5M-group state (6 s, 5 s of it groups at the prior) beside a 2 s initialisation of few
    groups over the same 6M rows: the rate is the latter's 3M rows/s, not the median with the
    first clamped at half (6M / 3 s = 2M, median 2.5M)."""
    store = Store(tmp_path)
    with store.tx() as c:
        _init_row(c, 1, {"init_seconds": 6.0, "init_rows": 6_000_000, "bulk": True,
                         "init_groups": 5 * rent.GROUPS_PER_S}, 1.0)
        _init_row(c, 2, {"init_seconds": 2.0, "init_rows": 6_000_000, "bulk": True, "init_groups": 0}, 2.0)
    assert rent.init_rate(store, bulk=True) == 3_000_000


def test_state_groups_come_from_the_keys_statistics(spark, tmp_path):
    """The groups a state will hold: the product of the group keys' distinct counts, capped by the
    rows under the aggregation; a top-k over an aggregation holds the aggregation's groups.  The
    predicted initialisation grows by groups / DRIVER_GROUPS_PER_S over the same rows (plans the
    driver initialises; GROUPS_PER_S on Spark)."""
    import pandas as pd

    from advisor.warehouse.column_stats import column_stats
    from diffgen import make_dims

    cat = Catalog(spark, Store(tmp_path))
    facts = make_facts(3, 500)
    cat.create_table("facts", spark.createDataFrame(facts))
    cat.create_table("dims", spark.createDataFrame(make_dims()))
    column_stats(cat, "facts")
    column_stats(cat, "dims")
    groups = lambda sql: rent.state_groups(cat.store, parse_sql(sql, cat.schema).root)  # noqa: E731
    g1, g2 = facts["g1"].nunique(), facts["g2"].nunique()
    assert groups("SELECT g1, g2, sum(v) AS s FROM facts GROUP BY g1, g2 HAVING sum(v) > 3") == g1 * g2
    assert groups("SELECT g1, sum(v) AS s FROM facts GROUP BY g1 ORDER BY s DESC LIMIT 3") == g1
    by_key = groups("SELECT k, sum(v) AS s FROM facts GROUP BY k HAVING sum(v) > 3")
    assert 0.95 * len(facts) <= by_key <= len(facts)                     # ~500 keys, never above 500 rows
    assert groups("SELECT k, g1, g2, sum(v) AS s FROM facts GROUP BY k, g1, g2 HAVING sum(v) > 3") == len(facts)
    regions = pd.DataFrame(make_dims())["region"].nunique()
    assert groups("SELECT region, sum(v) AS s FROM facts JOIN dims ON facts.g1 = dims.g1 "
                  "GROUP BY region HAVING sum(v) > 3") == regions
    assert groups("SELECT k, v FROM facts WHERE v > 3") == 0            # no aggregation, no groups
    small = parse_sql("SELECT g1, sum(v) AS s FROM facts GROUP BY g1 HAVING sum(v) > 3", cat.schema).root
    big = parse_sql("SELECT k, sum(v) AS s FROM facts GROUP BY k HAVING sum(v) > 3", cat.schema).root
    diff = rent.predict_init(cat.store, big, 1e6, True) - rent.predict_init(cat.store, small, 1e6, True)
    assert abs(diff - (by_key - g1) / rent.DRIVER_GROUPS_PER_S) < 1e-9


def test_chain_rents_then_buys_and_stays_correct(spark, tmp_path, monkeypatch):
    cat = Catalog(spark, Store(tmp_path))
    cat.create_table("facts", spark.createDataFrame(make_facts(5, 500)))
    rows = cat.version("facts").rows
    # make initialisation look like 2.5 recaptures: rent (0+1 <= 2.5), rent (1+1), then buy (2+1 > 2.5)
    monkeypatch.setattr(rent, "MIN_INIT_SECONDS", 0.0)
    monkeypatch.setattr(rent, "INIT_ROWS_PER_S", rows / 2.5)
    monkeypatch.setattr(rent, "RECAPTURE_ROWS_PER_S", rows / 1.0)
    monkeypatch.setattr(rent, "init_rate", lambda store, bulk=False, spark_only=False, driver_only=False: rent.INIT_ROWS_PER_S)
    sql = "SELECT g1, sum(v) AS a FROM facts GROUP BY g1 HAVING sum(v) > 1500"
    q = parse_sql(sql, lambda t: cat.schema(t))
    parts = {"facts": build_partition(cat, "facts", "g1", 6)}
    sk = capture(cat, q, {"facts": "g1"}, 6, check=False, partitions=parts).sketch
    hows, answered = [], 0
    for seed in range(5):
        ins, dels = batch_frames(cat, "facts", 20, 10, seed)
        cat.apply_frames("facts", ins, dels)
        # recaptures here take far less than the 1 s/recapture the prior assumes: book exactly 1 s each
        spent, _ = rent.rent_of(cat.store, sk.id)
        res = maintain_sketch(cat, sk.id, answer=seed % 2 == 0)
        # a rented step asked to answer does so at the new version, as a plain run would
        assert (res.answer is not None) == (res.how == "recapture" and seed % 2 == 0)
        if res.answer is not None:
            assert digest(res.answer.rows) == digest(run_query(cat, q).rows)
            answered += 1
        if res.how == "recapture":
            rent.record_rent(cat.store, res.new_id, spent + 1.0, 1.0)
        hows.append(res.how)
        sk = load_sketch(cat.store, res.new_id)
        v = cat.current_version("facts")
        (fresh,), _ = capture_batch(cat, [(q, {"facts": "g1"}, parts)], {"facts": v})
        assert sk.data_versions["facts"] == v and sk.parts[0].fragments == fresh.parts[0].fragments
        assert res.delta_rows == 30
    assert hows == ["recapture", "recapture", "incremental", "incremental", "incremental"], hows
    assert answered == 1


def test_a_purchase_skips_the_rent_and_stays_correct(spark, tmp_path, monkeypatch):
    """``maintain_sketch(buy=True)`` (the worth rule found that only operator state pays) initialises
    state at the first stale use, where the ski-rental rule alone would recapture; the maintained
    sketch equals a fresh capture after every batch."""
    cat = Catalog(spark, Store(tmp_path))
    cat.create_table("facts", spark.createDataFrame(make_facts(6, 400)))
    rows = cat.version("facts").rows
    monkeypatch.setattr(rent, "MIN_INIT_SECONDS", 0.0)
    monkeypatch.setattr(rent, "RECAPTURE_ROWS_PER_S", rows / 1.0)
    monkeypatch.setattr(rent, "init_rate", lambda store, bulk=False, spark_only=False, driver_only=False: rows / 50.0)  # state: 50 recaptures
    sql = "SELECT g1, sum(v) AS a FROM facts GROUP BY g1 HAVING sum(v) > 1500"
    q = parse_sql(sql, lambda t: cat.schema(t))
    parts = {"facts": build_partition(cat, "facts", "g1", 6)}
    sk = capture(cat, q, {"facts": "g1"}, 6, check=False, partitions=parts).sketch
    hows = []
    for seed, buy in ((0, False), (1, True), (2, False)):
        ins, dels = batch_frames(cat, "facts", 20, 10, seed)
        cat.apply_frames("facts", ins, dels)
        res = maintain_sketch(cat, sk.id, buy=buy)
        hows.append(res.how)
        sk = load_sketch(cat.store, res.new_id)
        (fresh,), _ = capture_batch(cat, [(q, {"facts": "g1"}, parts)], {"facts": cat.current_version("facts")})
        assert sk.parts[0].fragments == fresh.parts[0].fragments
    assert hows == ["recapture", "incremental", "incremental"], hows


def test_state_too_big_for_the_driver_is_never_bought(spark, tmp_path, monkeypatch):
    """A plan whose state would hold more than ``MAX_STATE_GROUPS`` groups is recaptured even when the
    worth rule asks for a purchase (``buy=True``): no state is written, and the sketch stays exact."""
    cat = Catalog(spark, Store(tmp_path))
    cat.create_table("facts", spark.createDataFrame(make_facts(6, 400)))
    monkeypatch.setattr(rent, "MAX_STATE_GROUPS", 5.0)
    monkeypatch.setattr(rent, "state_groups", lambda store, root, template=None: 6.0)
    sql = "SELECT g1, sum(v) AS a FROM facts GROUP BY g1 HAVING sum(v) > 1500"
    q = parse_sql(sql, lambda t: cat.schema(t))
    parts = {"facts": build_partition(cat, "facts", "g1", 6)}
    sk = capture(cat, q, {"facts": "g1"}, 6, check=False, partitions=parts).sketch
    ins, dels = batch_frames(cat, "facts", 20, 10, 0)
    cat.apply_frames("facts", ins, dels)
    res = maintain_sketch(cat, sk.id, buy=True)
    assert res.how == "recapture" and cat.store.one("SELECT 1 FROM states") is None
    (fresh,), _ = capture_batch(cat, [(q, {"facts": "g1"}, parts)], {"facts": cat.current_version("facts")})
    assert load_sketch(cat.store, res.new_id).parts[0].fragments == fresh.parts[0].fragments
    monkeypatch.setattr(rent, "MAX_STATE_GROUPS", 6.0)  # at the cap, the purchase goes ahead
    ins, dels = batch_frames(cat, "facts", 20, 10, 1)
    cat.apply_frames("facts", ins, dels)
    assert maintain_sketch(cat, res.new_id, buy=True).how == "incremental"


def test_groups_a_plain_run_formed_replace_the_product_of_key_counts(spark, tmp_path):
    """Two correlated group-by keys: the product of their distinct counts (capped by the rows)
    overstates the groups.  A plain run's final aggregation counts them (``ScanMetrics.groups``, the
    groups before HAVING), the run log keeps them per template, and the state prediction uses them;
    a sketched run, which forms only the groups its filter keeps, does not overwrite them."""
    import pandas as pd

    from advisor.warehouse.column_stats import column_stats

    pdf = pd.DataFrame({"k": [i % 500 for i in range(6000)], "v": [float(i % 7) for i in range(6000)]})
    pdf["j"] = pdf["k"] // 5 + 1000 * ((pdf.index // 500) % 2)  # 200 values, two per k: 1,000 pairs
    cat = Catalog(spark, Store(tmp_path))
    cat.create_table("corr", spark.createDataFrame(pdf))
    column_stats(cat, "corr", cat.current_version("corr"))
    sql = "SELECT k, j, sum(v) AS a FROM corr GROUP BY k, j HAVING sum(v) > 25"
    q = parse_sql(sql, lambda t: cat.schema(t))
    want = len(pdf.groupby(["k", "j"]))
    assert want == 1000 and rent.state_groups(cat.store, q.root, q.template) == 6000.0  # 500 * 200 > rows
    res = run_query(cat, q)
    assert res.metrics.groups == want
    cat.store.log_run("run", sql, res.to_json() | {"template": q.template})
    assert rent.state_groups(cat.store, q.root, q.template) == float(want)
    assert rent.state_groups(cat.store, q.root) == 6000.0  # no template: the product as before
    cat.store.log_run("run", sql, {"template": q.template, "sketch": {"id": 1}, "metrics": {"groups": 10}})
    assert cat.store.observed_groups(q.template) == want


def test_with_priors_only_rent_and_purchase_ignore_measured_seconds(tmp_path):
    """A replay with ``measured_costs: false`` must choose between recapture and state from the data
    alone: a slow initialisation measured on a busy machine must not tip it."""
    store = Store(tmp_path)
    with store.tx() as c:
        _init_row(c, 1, {"init_seconds": 30.0, "init_rows": 30_000, "bulk": False}, 1.0)  # 1,000 rows/s
    assert rent.init_rate(store) == 1_000
    assert rent.recapture_seconds(store, 30_000, last=9.0) == 9.0
    assert rent.booked(store, 30_000, 9.0) == 9.0
    rent.set_measured(store, False)
    assert rent.init_rate(store) == rent.INIT_ROWS_PER_S
    assert rent.recapture_seconds(store, 30_000, last=9.0) == 30_000 / rent.RECAPTURE_ROWS_PER_S
    assert rent.booked(store, 30_000, 9.0) == 30_000 / rent.RECAPTURE_ROWS_PER_S
    rent.set_measured(store, True)
    assert rent.init_rate(store) == 1_000
