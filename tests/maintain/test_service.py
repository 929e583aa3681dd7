"""Maintenance end to end on Spark: after every applied batch, the incrementally maintained sketch
equals a fresh capture on the new version (>= 30 generated batch sequences), bad batches leave
sketches and state untouched, and the lazy policy maintains before use."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.sketch.capture import capture, capture_batch, check_safe
from advisor.warehouse.catalog import Catalog
from advisor.errors import BadInput
from advisor.maintain.spark.service import maintain_sketch, stale_heads
from advisor.partition.range_partition import build_partition
from advisor.plan.parse import parse_sql
from advisor.warehouse.sketch_records import load_sketch
from advisor.warehouse.store import Store
from workloads.data.update_batches import batch_frames

from diffgen import make_dims, make_facts

QUERIES = [
    ("SELECT g1, sum(v) AS a FROM facts GROUP BY g1 HAVING sum(v) > 1500", "g1"),
    ("SELECT g2, count(*) AS a FROM facts WHERE v > 10 GROUP BY g2 HAVING count(*) >= 40", "k"),
    ("SELECT g1, avg(v) AS a FROM facts GROUP BY g1 HAVING avg(v) > 38", "g1"),
    ("SELECT g2, max(v) AS a FROM facts GROUP BY g2 ORDER BY a DESC LIMIT 2", "g2"),
    ("SELECT g1, min(m) AS a FROM facts GROUP BY g1 HAVING min(m) < 5", "g1"),
    ("SELECT dm.region, count(*) AS a FROM facts f JOIN dims dm ON f.g1 = dm.g1 GROUP BY dm.region "
     "ORDER BY a DESC LIMIT 2", "k"),
    ("SELECT DISTINCT g2, g1 FROM facts WHERE v > 90", "d"),
    ("SELECT k, v FROM facts WHERE w > 12", "v"),
    ("SELECT count(*) AS n FROM (SELECT g1, sum(v) AS s FROM facts GROUP BY g1 HAVING sum(v) > 1000) x", "g1"),
    ("SELECT d, count(*) AS a FROM facts GROUP BY d ORDER BY a DESC LIMIT 3", "d"),
]


@pytest.fixture(scope="module")
def cat(spark, tmp_path_factory):
    c = Catalog(spark, Store(tmp_path_factory.mktemp("mwh")))
    c.create_table("facts", spark.createDataFrame(make_facts(5, 500)))
    c.create_table("dims", spark.createDataFrame(make_dims()))
    c.parts = {(a, n): build_partition(c, "facts", a, n) for a in {a for _, a in QUERIES} for n in (6, 30)}
    return c


TALLY = {"steps": 0, "sequences": 0}


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(qi=st.integers(0, len(QUERIES) - 1), frags=st.sampled_from([6, 30]),
       batches=st.lists(st.tuples(st.integers(1, 40), st.integers(0, 30), st.integers(0, 10_000)),
                        min_size=1, max_size=2))
def test_maintained_equals_recaptured(cat, qi, frags, batches):
    sql, attr = QUERIES[qi]
    q = parse_sql(sql, lambda t: cat.schema(t))
    assert check_safe(cat, q, {"facts": attr}, {"facts": cat.current_version("facts"), "dims": 1}).safe
    parts = {"facts": cat.parts[(attr, frags)]}
    sk = capture(cat, q, {"facts": attr}, frags, check=False, partitions=parts).sketch
    TALLY["sequences"] += 1
    for n_ins, n_del, seed in batches:
        ins, dels = batch_frames(cat, "facts", n_ins, n_del, seed)
        cat.apply_frames("facts", ins, dels)
        res = maintain_sketch(cat, sk.id)
        sk = load_sketch(cat.store, res.new_id)
        v = cat.current_version("facts")
        assert sk.data_versions["facts"] == v
        (fresh,), _ = capture_batch(cat, [(q, {"facts": attr}, parts)], {"facts": v, "dims": 1})
        assert sk.parts[0].fragments == fresh.parts[0].fragments, (sql, res.how, n_ins, n_del)
        TALLY["steps"] += 1


def test_enough_sequences():
    assert TALLY["sequences"] >= 30 and TALLY["steps"] >= 30, TALLY


def test_bad_batch_leaves_sketch_and_state(cat, tmp_path):
    sql, attr = QUERIES[0]
    q = parse_sql(sql, lambda t: cat.schema(t))
    sk = capture(cat, q, {"facts": attr}, 6).sketch
    before = (cat.current_version("facts"), len(stale_heads(cat)))
    p = tmp_path / "bad.csv"
    p.write_text("op,_rid\ndelete,99999999\n")
    with pytest.raises(BadInput, match="not in"):
        cat.apply_batch("facts", str(p))
    assert (cat.current_version("facts"), len(stale_heads(cat))) == before
    assert load_sketch(cat.store, sk.id).parts == sk.parts


def test_superseded_and_retired_states_are_deleted_heads_keep_theirs(cat):
    """Each maintained version has its own state; once a newer version (or retirement) supersedes
    it, the state goes, the row stays (its initialisation record feeds rent), and the chain keeps
    maintaining from the head's file alone.  States are written behind: a head's file appears only
    when it is flushed or evicted, and a superseded head's never."""
    from advisor.maintain.spark import state_store as states
    from advisor.warehouse.sketch_records import retire

    sql, attr = QUERIES[0]
    q = parse_sql(sql, lambda t: cat.schema(t))
    parts = {"facts": cat.parts[(attr, 30)]}
    sk = capture(cat, q, {"facts": attr}, 30, check=False, partitions=parts).sketch
    chain = [sk.id]
    for seed in (1, 2, 3):
        ins, dels = batch_frames(cat, "facts", 20, 5, seed)
        cat.apply_frames("facts", ins, dels)
        states.evict_all()  # written, then dropped: the next step must read the head's file from disk
        res = maintain_sketch(cat, chain[-1], buy=True)
        assert res.how == "incremental", res.how
        chain.append(res.new_id)
        rows = {r["sketch_id"]: r for r in cat.store.query("SELECT * FROM states")}
        head = rows[chain[-1]]
        file = states.state_dir(cat.store) / f"sketch_{chain[-1]}.state"
        # kept in memory, not yet written: the row names no file until it is written
        assert head["path"] == "" and not file.exists()
        assert states.has(cat.store, chain[-1])
        for old in chain[1:-1]:  # versions that had state and were superseded
            assert rows[old]["path"] == ""
        assert not any((file.parent / f"sketch_{i}.state").exists() for i in chain[:-1])
        assert not states.has(cat.store, chain[-2])
        written, _ = states.flush()
        assert written == 1 and file.is_file()
        named = cat.store.one("SELECT path FROM states WHERE sketch_id=?", (chain[-1],))["path"]
        assert cat.store.resolve(named) == str(file.absolute()) and named == "states/" + file.name
    init = cat.store.one("SELECT meta_json FROM states WHERE sketch_id=?", (chain[1],))["meta_json"]
    assert '"init_seconds"' in init  # the purchase's record survives its file
    fresh = capture_batch(cat, [(q, {"facts": attr}, parts)], {"facts": cat.current_version("facts"), "dims": 1})
    assert load_sketch(cat.store, chain[-1]).parts[0].fragments == fresh[0][0].parts[0].fragments
    retire(cat.store, chain[-1], "test")
    assert states.prune(cat) == 1
    assert not states.has(cat.store, chain[-1]) and states.load(cat, chain[-1]) is None
