"""Bulk (one Spark aggregation) initialisation of operator state builds the same state as feeding
the tables through the operators row by row, and maintains to the same sketch as a recapture."""

from __future__ import annotations

import math

import pytest

from advisor.sketch.capture import capture, capture_batch
from advisor.warehouse.catalog import Catalog
from advisor.maintain.spark import bulk_init as bulk
from advisor.maintain.spark.service import sketched_scans, init_state, maintain_sketch
from advisor.partition.range_partition import build_partition
from advisor.plan.parse import parse_sql
from advisor.warehouse.sketch_records import load_sketch
from advisor.warehouse.store import Store
from workloads.data.update_batches import batch_frames

from diffgen import make_dims, make_facts

SUPPORTED = [
    ("SELECT g1, sum(v) AS a FROM facts GROUP BY g1 HAVING sum(v) > 1500", "g1"),
    ("SELECT g2, count(*) AS a FROM facts WHERE v > 10 GROUP BY g2 HAVING count(*) >= 40", "k"),
    ("SELECT g1, avg(v) AS a, count(v) AS c FROM facts GROUP BY g1 HAVING avg(v) > 38", "d"),
    ("SELECT dm.region, count(*) AS a FROM facts f JOIN dims dm ON f.g1 = dm.g1 GROUP BY dm.region "
     "ORDER BY a DESC LIMIT 2", "k"),
    ("SELECT d, count(*) AS a FROM facts GROUP BY d ORDER BY a DESC LIMIT 3", "d"),
    ("SELECT count(*) AS n FROM (SELECT g1, sum(v) AS s FROM facts GROUP BY g1 HAVING sum(v) > 1000) x", "g1"),
    ("SELECT DISTINCT g2, g1 FROM facts WHERE v > 90", "d"),
    ("SELECT count(*) AS n, sum(v) AS s FROM facts WHERE w > 3", "k"),
]
UNSUPPORTED = [
    "SELECT g1, min(m) AS a FROM facts GROUP BY g1 HAVING min(m) < 5",
    "SELECT g2, max(v) AS a FROM facts GROUP BY g2 ORDER BY a DESC LIMIT 2",
    "SELECT g1, count(DISTINCT g2) AS a FROM facts GROUP BY g1 HAVING count(DISTINCT g2) > 2",
    "SELECT k, v FROM facts WHERE w > 12",
]


@pytest.fixture(scope="module")
def cat(spark, tmp_path_factory):
    c = Catalog(spark, Store(tmp_path_factory.mktemp("bulkwh")))
    c.create_table("facts", spark.createDataFrame(make_facts(7, 700)))
    c.create_table("dims", spark.createDataFrame(make_dims()))
    return c


def _q(cat, sql):
    return parse_sql(sql, lambda t: cat.schema(t))


def _bulk_state(cat, q, table, attr, n):
    """Capture ``q`` sketched on ``table.attr`` at ``n`` fragments and bulk-initialise its state."""
    part = build_partition(cat, table, attr, n)
    sk = capture(cat, q, {table: attr}, n, check=False, partitions={table: part}).sketch
    return sk, init_state(cat, sk, q, sketched_scans(cat, q, sk), use_bulk=True)


def test_supports_the_aggregation_shapes_only(cat):
    assert all(bulk.supports(_q(cat, s).root) for s, _ in SUPPORTED)
    assert not any(bulk.supports(_q(cat, s).root) for s in UNSUPPORTED)


@pytest.mark.parametrize("sql,attr", SUPPORTED)
def test_bulk_state_equals_row_state(cat, sql, attr):
    q = _q(cat, sql)
    part = build_partition(cat, "facts", attr, 8)
    sk = capture(cat, q, {"facts": attr}, 8, check=False, partitions={"facts": part}).sketch
    sketched = sketched_scans(cat, q, sk)
    fast = init_state(cat, sk, q, sketched, use_bulk=True)
    slow = init_state(cat, sk, q, sketched, use_bulk=False)
    assert fast.snapshot() == slow.snapshot()
    assert fast.sketch() == slow.sketch()
    captured = sk.parts[0].fragments
    assert set().union(*fast.sketch().values()) == set(captured)


def test_bulk_sum_of_decimals_matches_within_rounding(cat):
    q = _q(cat, "SELECT g1, sum(m) AS a FROM facts GROUP BY g1 HAVING sum(m) > 2000")
    part = build_partition(cat, "facts", "g1", 8)
    sk = capture(cat, q, {"facts": "g1"}, 8, check=False, partitions={"facts": part}).sketch
    sketched = sketched_scans(cat, q, sk)
    fast = init_state(cat, sk, q, sketched, use_bulk=True)
    slow = init_state(cat, sk, q, sketched, use_bulk=False)
    (fa,) = [s for k, s in fast.snapshot()["ops"].items() if "Aggregate" in k]
    (sa,) = [s for k, s in slow.snapshot()["ops"].items() if "Aggregate" in k]
    assert fa.keys() == sa.keys()
    for key in fa:
        assert fa[key][0] == sa[key][0] and fa[key][4] == sa[key][4]
        assert math.isclose(fa[key][2][0], sa[key][2][0], rel_tol=1e-12)
    assert fast.sketch() == slow.sketch()


def test_join_blooms_hold_every_key(cat):
    q = _q(cat, SUPPORTED[3][0])
    part = build_partition(cat, "facts", "k", 8)
    sk = capture(cat, q, {"facts": "k"}, 8, check=False, partitions={"facts": part}).sketch
    st = init_state(cat, sk, q, sketched_scans(cat, q, sk), use_bulk=True)
    (join,) = [op for op in st.root_op.walk() if type(op).__name__ == "JoinOp"]
    assert join.use_bloom
    keys = [(int(g),) for g in cat.read_pandas("facts", cat.current_version("facts"))["g1"].unique()]
    assert join.bloom_l.might_contain(keys).all()
    assert join.bloom_r.might_contain([(g,) for g in range(12)]).all()


def test_bulk_initialised_chain_maintains_to_the_recapture(cat):
    sql, attr = SUPPORTED[0]
    q = _q(cat, sql)
    part = build_partition(cat, "facts", attr, 8)
    sk = capture(cat, q, {"facts": attr}, 8, check=False, partitions={"facts": part}).sketch
    for n_ins, n_del, seed in [(40, 30, 1), (5, 60, 2), (80, 0, 3)]:
        ins, dels = batch_frames(cat, "facts", n_ins, n_del, seed)
        cat.apply_frames("facts", ins, dels)
        res = maintain_sketch(cat, sk.id)
        assert res.how == "incremental"
        sk = load_sketch(cat.store, res.new_id)
        v = cat.current_version("facts")
        (fresh,), _ = capture_batch(cat, [(q, {"facts": attr}, {"facts": part})], {"facts": v})
        assert sk.parts[0].fragments == fresh.parts[0].fragments
    meta = [r["meta_json"] for r in cat.store.query("SELECT meta_json FROM states")]
    assert any('"bulk": true' in m for m in meta)


def _maintained_join_batches(cat, seeds):
    """Maintain the join query's sketch over one 30+10-row batch per seed, checking each step
    against a recapture; yields after each batch (dims is never updated)."""
    from advisor.maintain.spark import spark_side as spark_base

    sql, attr = SUPPORTED[3]
    q = _q(cat, sql)
    part = build_partition(cat, "facts", attr, 8)
    sk = capture(cat, q, {"facts": attr}, 8, check=False, partitions={"facts": part}).sketch
    spark_base._sides.clear()
    spark_base._seen.clear()
    for i, seed in enumerate(seeds):
        ins, dels = batch_frames(cat, "facts", 30, 10, seed)
        cat.apply_frames("facts", ins, dels)
        res = maintain_sketch(cat, sk.id)
        sk = load_sketch(cat.store, res.new_id)
        v = cat.current_version("facts")
        (fresh,), _ = capture_batch(cat, [(q, {"facts": attr}, {"facts": part})], {"facts": v, "dims": 1})
        assert sk.parts[0].fragments == fresh.parts[0].fragments
        yield i


def test_unchanged_join_side_is_cached_at_initialisation_and_served_from_memory(cat):
    from advisor.maintain.spark import spark_side as spark_base

    steps = 0
    for i in _maintained_join_batches(cat, [11, 12, 13]):
        # dims never changes: state initialisation read it whole, so no batch sent Spark an
        # IN-list query for it (`_seen` counts those)
        assert len(spark_base._sides) == 1
        assert not spark_base._seen
        steps += 1
    assert steps == 3


def test_join_side_over_large_tables_is_never_read_whole(cat, monkeypatch):
    from advisor.maintain.spark import spark_side as spark_base

    monkeypatch.setattr(spark_base, "SIDE_MAX_ROWS", 5)  # dims has 12 rows: too large now
    assert len(list(_maintained_join_batches(cat, [21, 22, 23]))) == 3
    assert not spark_base._sides


def test_decimal_sums_arrive_exact_through_their_unscaled_text(spark, tmp_path):
    """Sums come back as BIGINT unscaled values; beyond BIGINT (group 3), as text Spark writes in
    scientific notation (scale 10, group 4) or for groups of NULLs only (group 5) the exact path
    takes over.  Expected sums are computed here with Python's Decimal."""
    from decimal import Decimal

    c = Catalog(spark, Store(tmp_path / "decwh"))
    rows = [(1, Decimal("12.34"), Decimal("0.0000000100")), (1, Decimal("-0.05"), Decimal("1.5")),
            (2, Decimal("0.01"), None), (2, Decimal("-7.00"), Decimal("-0.0000000003")),
            (3, Decimal("60000000000000000.00"), Decimal("2")), (3, Decimal("60000000000000000.00"), Decimal("1")),
            (4, Decimal("0.00"), Decimal("0.0000000001")), (5, None, None), (5, None, Decimal("3"))]
    c.create_table("dec", spark.createDataFrame(rows, "g int, d decimal(38,2), e decimal(20,10)"))
    q = _q(c, "SELECT g, sum(d) AS sd, sum(e) AS se FROM dec GROUP BY g HAVING count(*) > 0")
    sk, st = _bulk_state(c, q, "dec", "g", 2)
    op = bulk.plain_agg_op(st)
    got = {op.index.key(int(code))[0]: [op.sums[j][code] if op.nn[j][code] else None for j in (0, 1)]
           for code in op.index.live()}
    want = {}
    for g, d, e in rows:
        w = want.setdefault(g, [None, None])
        for j, (v, scale) in enumerate(((d, 2), (e, 10))):
            if v is not None:
                w[j] = (w[j] or 0) + int(v.scaleb(scale))
    assert got == want
    assert got[3][0] > 2 ** 63   # beyond BIGINT, still exact
    # both paths ran: BIGINT text for most groups, the Decimal where the text is no BIGINT
    c.read("dec").createOrReplaceTempView("dec_now")
    u, s = bulk._sum_items(0, "sum(d)", 2)
    paths = {r["g"]: (r["__u0"], r["__s0"]) for r in spark.sql(f"SELECT g, {u}, {s} FROM dec_now GROUP BY g").collect()}
    assert paths[1] == (1229, None) and paths[3][0] == 0 and paths[3][1] == Decimal("120000000000000000.00")
    assert bulk._unscaled_sums(spark, op, {0: "sum(d)", 1: "sum(e)"}, " FROM dec_now GROUP BY g") == {0, 1}
    slow = init_state(c, sk, q, sketched_scans(c, q, sk), use_bulk=False)
    assert st.sketch() == slow.sketch()


@pytest.mark.parametrize("sql,attr", SUPPORTED + [
    ("SELECT g1, sum(v) AS a, count(*) AS n FROM facts GROUP BY g1 HAVING sum(v) > 1500", "k"),
    ("SELECT d, g1, sum(m) AS a FROM facts GROUP BY d, g1 HAVING sum(m) > 50", "d"),
    ("SELECT x, count(v) AS c FROM (SELECT g2 AS x, v FROM facts) s GROUP BY x HAVING count(v) > 30", "g2"),
])
def test_driver_state_equals_spark_state(cat, monkeypatch, sql, attr):
    """The pyarrow initialisation (``bulk_arrow``) builds exactly the Spark aggregation's state."""
    q = _q(cat, sql)
    part = build_partition(cat, "facts", attr, 8)
    sk = capture(cat, q, {"facts": attr}, 8, check=False, partitions={"facts": part}).sketch
    sketched = sketched_scans(cat, q, sk)
    driver = init_state(cat, sk, q, sketched, use_bulk=True)
    monkeypatch.setattr(bulk, "initialise_on_driver", lambda op, base: False)
    on_spark = init_state(cat, sk, q, sketched, use_bulk=True)
    assert driver.snapshot() == on_spark.snapshot()
    assert driver.sketch() == on_spark.sketch()


def test_driver_takes_the_plain_shapes_and_leaves_the_rest_to_spark(cat, monkeypatch):
    from advisor.maintain.spark import bulk_arrow

    took = {}
    real = bulk_arrow.initialise_on_driver
    monkeypatch.setattr(bulk, "initialise_on_driver",
                        lambda op, base: took.setdefault(len(took), real(op, base)))
    cases = [("SELECT g1, sum(v) AS a FROM facts GROUP BY g1 HAVING sum(v) > 1500", "g1", True),
             ("SELECT g2, count(*) AS a FROM facts WHERE v > 10 GROUP BY g2 HAVING count(*) >= 40", "k", True),
             ("SELECT g2, count(*) AS a FROM facts WHERE w > 3 GROUP BY g2 HAVING count(*) >= 40", "k", False),
             ("SELECT g1, sum(v * w) AS a FROM facts GROUP BY g1 HAVING sum(v * w) > 0", "k", False),
             ("SELECT count(*) AS n, sum(v) AS s FROM facts WHERE w > 3", "k", False)]
    for sql, attr, want in cases:
        took.clear()
        _bulk_state(cat, _q(cat, sql), "facts", attr, 8)
        assert took == {0: want}, sql
    monkeypatch.setattr(bulk_arrow, "DRIVER_MAX_ROWS", 10)   # facts has 700 rows
    took.clear()
    _bulk_state(cat, _q(cat, cases[0][0]), "facts", "g1", 8)
    assert took == {0: False}


def test_driver_decimal_sums_beyond_bigint_are_exact(spark, tmp_path):
    """18-digit decimals whose sums pass 2**63 unscaled: the driver's sums equal Python's."""
    from decimal import Decimal

    from advisor.maintain.spark import bulk_arrow

    c = Catalog(spark, Store(tmp_path / "decdrv"))
    rows = [(g, Decimal("9000000000000000.25") * (1 if i % 5 else -1) if (g, i) != (2, 0) else None)
            for g in (1, 2, 3) for i in range(25)]
    c.create_table("dd", spark.createDataFrame(rows, "g int, d decimal(18,2)"))
    q = _q(c, "SELECT g, sum(d) AS s FROM dd GROUP BY g HAVING count(*) > 0")
    _, st = _bulk_state(c, q, "dd", "g", 2)
    op = bulk.plain_agg_op(st)
    got = {op.index.key(int(code))[0]: op.sums[0][code] for code in op.index.live()}
    want = {}
    for g, d in rows:
        if d is not None:
            want[g] = want.get(g, 0) + int(d.scaleb(2))
    assert got == want and max(abs(v) for v in got.values()) > 2 ** 63
    assert bulk_arrow.shape_on_driver(bulk.lowest_aggregate(q.root))   # the driver path is the one tested


FILTERED = [
    ("SELECT g1, sum(v * 2 - k) AS a FROM facts WHERE v > 10 GROUP BY g1 HAVING sum(v * 2 - k) > 0", "k"),
    ("SELECT g2, count(*) AS a FROM facts WHERE d >= DATE '2020-06-01' AND NOT (g1 = 0) GROUP BY g2 "
     "HAVING count(*) > 3", "d"),
    ("SELECT g1, count(v) AS a FROM facts WHERE g2 IN ('c1', 'c2', 'c3') OR v BETWEEN 0 AND 50 GROUP BY g1 "
     "HAVING count(v) > 3", "g1"),
    ("SELECT g1, sum(v) AS a FROM facts WHERE NOT (v > 20) GROUP BY g1 HAVING sum(v) > 0", "k"),
    ("SELECT g1, count(*) AS a FROM facts WHERE v IS NULL OR g2 < 'c2' GROUP BY g1 HAVING count(*) > 2", "g1"),
    ("SELECT ok, sum(p * (1 - disc)) AS r FROM li WHERE sd > DATE '1995-03-15' GROUP BY ok "
     "ORDER BY r DESC LIMIT 5", "ok"),
    ("SELECT ok, sum(p * (1 - disc) + 0.5) AS r, avg(q) AS a FROM li WHERE disc BETWEEN 0.02 AND 0.07 "
     "AND q >= 3 GROUP BY ok HAVING sum(p * (1 - disc) + 0.5) > 100", "sd"),
]


@pytest.fixture(scope="module")
def li(cat, spark):
    """A small lineitem-like table: decimal(15,2) prices and discounts, dates, NULLs among them."""
    import datetime as dt
    from decimal import Decimal

    import numpy as np

    rng = np.random.default_rng(11)
    rows = []
    for i in range(600):
        price = None if i % 37 == 0 else Decimal(int(rng.integers(100, 10_000_000))) / 100
        disc = None if i % 41 == 0 else Decimal(int(rng.integers(0, 11))) / 100
        rows.append((int(rng.integers(0, 60)), price, disc, dt.date(1995, 1, 1) + dt.timedelta(days=int(rng.integers(0, 200))),
                     int(rng.integers(1, 50))))
    cat.create_table("li", spark.createDataFrame(rows, "ok bigint, p decimal(15,2), disc decimal(15,2), sd date, q int"))
    return cat


@pytest.mark.parametrize("sql,attr", FILTERED)
def test_driver_evaluates_filters_and_arithmetic_as_spark(li, monkeypatch, sql, attr):
    """Filters (three-valued, NULLs included) and exact integer/DECIMAL arithmetic below the
    aggregation: the driver builds the Spark aggregation's state, and it did take them."""
    from advisor.maintain.spark import bulk_arrow

    cat, table = li, ("li" if "FROM li" in sql else "facts")
    q = _q(cat, sql)
    part = build_partition(cat, table, attr, 8)
    sk = capture(cat, q, {table: attr}, 8, check=False, partitions={table: part}).sketch
    sketched = sketched_scans(cat, q, sk)
    took = []
    real = bulk_arrow.initialise_on_driver
    monkeypatch.setattr(bulk, "initialise_on_driver", lambda op, base: took.append(real(op, base)) or took[-1])
    driver = init_state(cat, sk, q, sketched, use_bulk=True)
    assert took == [True]
    monkeypatch.setattr(bulk, "initialise_on_driver", lambda op, base: False)
    on_spark = init_state(cat, sk, q, sketched, use_bulk=True)
    assert driver.snapshot() == on_spark.snapshot()
    assert driver.sketch() == on_spark.sketch()


JOINS = [
    ("SELECT dm.region, count(*) AS a FROM facts f JOIN dims dm ON f.g1 = dm.g1 GROUP BY dm.region "
     "ORDER BY a DESC LIMIT 2", "k"),
    ("SELECT f.g1, sum(f.v) AS s FROM facts f JOIN dims dm ON f.g1 = dm.g1 WHERE dm.weight < 4 "
     "GROUP BY f.g1 HAVING sum(f.v) > 900", "g1"),
    ("SELECT dm.region, sum(f.m) AS s, count(f.v) AS c FROM facts f JOIN dims dm ON f.g1 = dm.g1 "
     "WHERE f.v > 10 GROUP BY dm.region HAVING sum(f.m) > 5", "d"),
    # NULL keys (v) never match; an int and a bigint key are joined as int64
    ("SELECT dm.region, count(*) AS a FROM facts f JOIN dims dm ON f.v = dm.g1 GROUP BY dm.region "
     "HAVING count(*) > 1", "k"),
]


@pytest.mark.parametrize("sql,attr", JOINS)
def test_driver_join_state_equals_spark_state(cat, monkeypatch, sql, attr):
    """An aggregation over an equi-join of two scans is initialised on the driver (pyarrow's hash
    join) with exactly the Spark aggregation's state and bloom filters."""
    from advisor.maintain.operators.join import JoinOp
    from advisor.maintain.spark import bulk_arrow

    q = _q(cat, sql)
    part = build_partition(cat, "facts", attr, 8)
    sk = capture(cat, q, {"facts": attr}, 8, check=False, partitions={"facts": part}).sketch
    sketched = sketched_scans(cat, q, sk)
    took = []
    real = bulk_arrow.initialise_on_driver
    monkeypatch.setattr(bulk, "initialise_on_driver", lambda op, base: took.append(real(op, base)) or took[-1])
    driver = init_state(cat, sk, q, sketched, use_bulk=True)
    assert took == [True], sql
    monkeypatch.setattr(bulk, "initialise_on_driver", lambda op, base: False)
    on_spark = init_state(cat, sk, q, sketched, use_bulk=True)
    assert driver.snapshot() == on_spark.snapshot()
    assert driver.sketch() == on_spark.sketch()
    joins = [[o for o in s.root_op.walk() if isinstance(o, JoinOp)] for s in (driver, on_spark)]
    assert len(joins[0]) == 1
    for a, b in zip(*joins):
        assert a.use_bloom == b.use_bloom
        for x, y in ((a.bloom_l, b.bloom_l), (a.bloom_r, b.bloom_r)):
            assert x.n_added == y.n_added and x.nbits == y.nbits and bytes(x.bits) == bytes(y.bits)
