"""The digest's concrete test cases T1-T15 for IMP (shared/notes/seed-000-digest.md §7.3).

Ranges: phi_price rho1..rho4 are fragment ids 0..3 (`RHO`); R's f1/f2 are 0/1, S's g1/g2 are 0/1.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.maintain import reference as ref
from advisor.maintain.base_side import PandasBase
from advisor.maintain.engine import Maintainer, Merge
from maintain_helpers import (PRICE_PART, R_PART, RHO, S8, S_PART, agg, apply_delta, emitted, ex51, fs, ops_of,
                              part, project, q_top, record, rows, rs_tables, sales_rows, sales_table, scan, select,
                              topk)

SK = {1: ("price", PRICE_PART)}
SK2 = {1: ("a", R_PART), 2: ("c", S_PART)}
r1, r2, r3, r4 = RHO[1], RHO[2], RHO[3], RHO[4]
f1, f2, g1, g2 = 0, 1, 0, 1
S4 = tuple(sales_table().iloc[3])
S5 = tuple(sales_table().iloc[4])


def step(state, tables, delta, sk=SK):
    new = apply_delta(tables, delta)
    before = state.sketch()
    after = state.apply(delta, PandasBase(tables, new, sk))
    return new, before, after


def agg_state(state):
    return ops_of(state, "Aggregate")[0].snapshot()


def merge_counts(state, sid=1):
    return dict(state.merge.counts[sid])


def t1_state():
    t = {"sales": sales_table()}
    return Maintainer.init(q_top(), SK, t), t


def test_t1_initial_capture():
    st, _ = t1_state()
    assert agg_state(st) == {
        ("Lenovo",): (2, (2,), (1247,), (None,), ({r1: 2},)),
        ("Apple",): (2, (2,), (5074,), (None,), ({r3: 1, r4: 1},)),
        ("Dell",): (1, (1,), (1345,), (None,), ({r3: 1},)),
        ("HP",): (2, (2,), (4895,), (None,), ({r2: 2},)),
    }
    assert merge_counts(st) == {r3: 1, r4: 1}
    assert st.sketch() == {1: fs(r3, r4)}
    assert st.last_change == {1: (fs(r3, r4), fs())}


def test_t2_insert_s8():
    st, t = t1_state()
    rec = record(st)
    step(st, t, {"sales": (sales_rows(S8), None)})
    # the scan emits only what the query reads (sid is pruned: nothing above uses it)
    assert "sid" not in rec[ops_of(st, "Scan")[0]].columns
    scan_out = emitted(rec[ops_of(st, "Scan")[0]], ["brand", "price"])
    assert scan_out == {(("HP", 1299), (fs(r3),), 1)}
    assert emitted(rec[ops_of(st, "Aggregate")[0]]) == {(("HP", 4895), (fs(r2),), -1),
                                                        (("HP", 6194), (fs(r2, r3),), 1)}
    assert agg_state(st)[("HP",)] == (3, (3,), (6194,), (None,), ({r2: 2, r3: 1},))
    assert emitted(rec[ops_of(st, "Select")[0]]) == {(("HP", 6194), (fs(r2, r3),), 1)}
    assert merge_counts(st) == {r2: 1, r3: 2, r4: 1}
    assert st.last_change == {1: (fs(r2), fs())}
    assert st.sketch() == {1: fs(r2, r3, r4)}


def test_t3_then_delete_s4():
    st, t = t1_state()
    t, _, _ = step(st, t, {"sales": (sales_rows(S8), None)})
    rec = record(st)
    t, _, after = step(st, t, {"sales": (None, sales_rows(S4))})
    assert emitted(rec[ops_of(st, "Aggregate")[0]]) == {(("Apple", 5074), (fs(r3, r4),), -1),
                                                        (("Apple", 1199), (fs(r3),), 1)}
    assert emitted(rec[ops_of(st, "Select")[0]]) == {(("Apple", 5074), (fs(r3, r4),), -1)}
    assert merge_counts(st) == {r2: 1, r3: 1}
    assert st.last_change == {1: (fs(), fs(r4))}
    assert after == {1: fs(r2, r3)} == ref.sketch(q_top(), t, SK)


def test_t4_one_batch_insert_and_delete():
    st, t = t1_state()
    rec = record(st)
    t, _, after = step(st, t, {"sales": (sales_rows(S8), sales_rows(S4))})
    assert emitted(rec[ops_of(st, "Select")[0]]) == {(("HP", 6194), (fs(r2, r3),), 1),
                                                     (("Apple", 5074), (fs(r3, r4),), -1)}
    assert st.last_change == {1: (fs(r2), fs(r4))}  # no spurious rho3 change
    assert after == {1: fs(r2, r3)}


def test_t5_group_deletion_without_sketch_change():
    st, t = t1_state()
    rec = record(st)
    step(st, t, {"sales": (None, sales_rows(S5))})
    assert emitted(rec[ops_of(st, "Aggregate")[0]]) == {(("Dell", 1345), (fs(r3),), -1)}
    assert ("Dell",) not in agg_state(st)
    assert emitted(rec[ops_of(st, "Select")[0]]) == set()
    assert st.last_change == {1: (fs(), fs())}
    assert st.sketch() == {1: fs(r3, r4)}


def t6_state():
    t = rs_tables()
    return Maintainer.init(ex51(), SK2, t), t


def test_t6_example_5_1_join_aggregate_having():
    st, t = t6_state()
    assert agg_state(st) == {(9,): (1, (1,), (6,), (None,), ({f2: 1}, {g1: 1}))}
    assert st.sketch() == {1: fs(f2), 2: fs(g1)}
    rec = record(st)
    step(st, t, {"R": (rows(["a", "b"], (5, 8)), None)}, SK2)
    assert emitted(rec[ops_of(st, "Join")[0]]) == {((5, 8, 7, 8), (fs(f1), fs(g2)), 1)}
    assert agg_state(st) == {(9,): (1, (1,), (6,), (None,), ({f2: 1}, {g1: 1})),
                             (5,): (1, (1,), (7,), (None,), ({f1: 1}, {g2: 1}))}
    assert emitted(rec[ops_of(st, "Aggregate")[0]]) == {((5, 7), (fs(f1), fs(g2)), 1)}
    assert st.last_change == {1: (fs(f1), fs()), 2: (fs(g2), fs())}
    assert st.sketch() == {1: fs(f1, f2), 2: fs(g1, g2)}


def test_t7_join_insert_insert():
    st, t = t6_state()
    rec = record(st)
    step(st, t, {"R": (rows(["a", "b"], (5, 8)), None), "S": (rows(["c", "d"], (3, 8)), None)}, SK2)
    assert emitted(rec[ops_of(st, "Join")[0]]) == {((5, 8, 7, 8), (fs(f1), fs(g2)), 1),
                                                   ((5, 8, 3, 8), (fs(f1), fs(g1)), 1)}
    assert agg_state(st)[(5,)] == (2, (2,), (10,), (None,), ({f1: 2}, {g1: 1, g2: 1}))
    assert emitted(rec[ops_of(st, "Aggregate")[0]]) == {((5, 10), (fs(f1), fs(g1, g2)), 1)}
    assert dict(st.merge.counts[1]) == {f1: 1, f2: 1} and dict(st.merge.counts[2]) == {g1: 2, g2: 1}
    assert st.last_change == {1: (fs(f1), fs()), 2: (fs(g2), fs())}


def test_t8_join_delete_delete_nets_minus_one():
    st, t = t6_state()
    rec = record(st)
    step(st, t, {"R": (None, rows(["a", "b"], (9, 9))), "S": (None, rows(["c", "d"], (6, 9)))}, SK2)
    assert emitted(rec[ops_of(st, "Join")[0]]) == {((9, 9, 6, 9), (fs(f2), fs(g1)), -1)}
    assert agg_state(st) == {}
    assert emitted(rec[ops_of(st, "Aggregate")[0]]) == {((9, 6), (fs(f2), fs(g1)), -1)}
    assert st.last_change == {1: (fs(), fs(f2)), 2: (fs(), fs(g1))}
    assert st.sketch() == {1: fs(), 2: fs()}


def test_t9_merge_only():
    m = Merge([1], [1])
    m.counts[1] = {0: 1, 1: 3}  # p1 = 0, p2 = 1
    from advisor.maintain.frames import frame_from_rows
    change = m.absorb(frame_from_rows(["t"], [("t3",)], [-1], [1], [(fs(0, 1),)]))
    assert m.counts[1] == {1: 2}
    assert change == {1: (fs(), fs(0))}


def t10_query():
    s = scan("sales", [("sid", "bigint"), ("brand", "string"), ("price", "bigint"), ("numsold", "bigint")], 1)
    g = agg(project(s, ["brand", ("price * numsold", "pn")]), ["brand"], [("sum", "pn", "rev")])
    return topk(g, [("rev", False)], 2)


def net(frame) -> dict:
    out = {}
    for r, a, m in emitted(frame):
        out[(r, a)] = out.get((r, a), 0) + m
    return {k: v for k, v in out.items() if v}


def test_t10_topk_over_aggregation():
    t = {"sales": sales_table()}
    q = t10_query()
    st = Maintainer.init(q, SK, t)
    assert st.sketch() == {1: fs(r2, r3, r4)} and merge_counts(st) == {r2: 1, r3: 1, r4: 1}
    rec = record(st)
    t, _, after = step(st, t, {"sales": (sales_rows(S8), None)})
    digest_emits = {(("Apple", 5074), (fs(r3, r4),)): 0, (("HP", 4895), (fs(r2),)): -1,
                    (("HP", 6194), (fs(r2, r3),)): 1}  # -Apple +Apple cancel
    assert net(rec[ops_of(st, "TopK")[0]]) == {k: v for k, v in digest_emits.items() if v}
    assert merge_counts(st) == {r2: 1, r3: 2, r4: 1} and st.last_change == {1: (fs(), fs())}
    assert after == {1: fs(r2, r3, r4)}
    t, _, after = step(st, t, {"sales": (None, sales_rows(S4))})
    assert net(rec[ops_of(st, "TopK")[0]]) == {(("Apple", 5074), (fs(r3, r4),)): -1,
                                              (("Dell", 1345), (fs(r3),)): 1}
    assert merge_counts(st) == {r2: 1, r3: 2} and st.last_change == {1: (fs(), fs(r4))}
    assert after == {1: fs(r2, r3)} == ref.sketch(q, t, SK)


def test_t11_topk_bag_multiplicity():
    t = {"T": rows(["x"], (5,), (5,), (5,), (7,))}
    sk = {1: ("x", part("T", "x", (6,)))}
    q = topk(scan("T", ["x"], 1), [("x", True)], 2)
    st = Maintainer.init(q, sk, t)
    assert st.sketch() == {1: fs(0)} and dict(st.merge.counts[1]) == {0: 2}
    rec = record(st)
    step(st, t, {"T": (None, rows(["x"], (5,), (5,)))}, sk)
    assert net(rec[ops_of(st, "TopK")[0]]) == {((5,), (fs(0),)): -1, ((7,), (fs(1),)): 1}
    assert dict(st.merge.counts[1]) == {0: 1, 1: 1}
    assert st.last_change == {1: (fs(1), fs())}


def test_t12_use_rewrite_instance_is_safe():
    t = {"sales": sales_table()}
    sk = ref.sketch(q_top(), t, SK)
    assert sk == {1: fs(r3, r4)}
    lo, hi = PRICE_PART.range_of(r3)[0], PRICE_PART.range_of(r4)[1]
    assert (lo, hi) == (1001, None)  # merged ranges: price >= 1001
    dp = ref.restrict(t, q_top(), SK, sk)
    assert sorted(dp["sales"]["sid"]) == [3, 4, 5]
    pd.testing.assert_frame_equal(ref.evaluate(q_top(), dp), ref.evaluate(q_top(), t))


def test_t13_selection_pushdown_equivalence():
    delta = {"R": (rows(["a", "b"], (2, 8), (5, 8)), None)}
    results = []
    for push in (True, False):
        t = rs_tables()
        st = Maintainer.init(ex51(), SK2, t, pushdown_on=push)
        step(st, t, delta, SK2)
        results.append((st.last_change, st.sketch(), st.snapshot()))
    assert results[0] == results[1]
    assert results[0][0] == {1: (fs(f1), fs()), 2: (fs(g2), fs())}
    # pushed into the delta fetch: (2, 8) is dropped right at the scan
    t = rs_tables()
    st = Maintainer.init(ex51(), SK2, t)
    step(st, t, delta, SK2)
    assert st.last_stats["pushdown_dropped"] == 1


def test_t14_bloom_filter():
    t = rs_tables()
    st = Maintainer.init(ex51(), SK2, t)
    step(st, t, {"R": (rows(["a", "b"], (7, 3)), None)}, SK2)
    assert st.last_stats.get("base_calls", 0) == 0 and st.last_stats["bloom_dropped"] == 1
    assert st.last_change == {1: (fs(), fs()), 2: (fs(), fs())}
    t = rs_tables()
    st = Maintainer.init(ex51(), SK2, t)
    rec = record(st)
    step(st, t, {"R": (rows(["a", "b"], (7, 3)), None), "S": (rows(["c", "d"], (4, 3)), None)}, SK2)
    assert emitted(rec[ops_of(st, "Join")[0]]) == {((7, 3, 4, 3), (fs(f2), fs(g1)), 1)}
    assert agg_state(st)[(7,)] == (1, (1,), (4,), (None,), ({f2: 1}, {g1: 1}))
    assert st.last_change == {1: (fs(), fs()), 2: (fs(), fs())}


def test_t15_random_batches_on_sales():
    rng = np.random.default_rng(15)
    brands = ["Lenovo", "Apple", "Dell", "HP", "Asus"]
    queries = [q_top(), t10_query(), select(agg(scan("sales", [("sid", "bigint"), ("brand", "string"),
                                                              ("price", "bigint")], 1),
                                                 ["brand"], [("max", "price", "mx"), ("count", None, "n")]), "n >= 2")]
    for q in queries:
        t = {"sales": sales_table()}
        st = Maintainer.init(q, SK, t, topk_buffer=3)
        nid = 100
        for _ in range(25):
            cur = t["sales"]
            dels = cur.sample(n=min(len(cur), int(rng.integers(0, 3))), random_state=int(rng.integers(1 << 30)))
            ins = sales_rows(*[(nid + i, brands[int(rng.integers(5))], "x", int(rng.integers(1, 4000)),
                                int(rng.integers(1, 4))) for i in range(int(rng.integers(0, 4)))])
            nid += 10
            t, _, after = step(st, t, {"sales": (ins, dels)})
            assert after == ref.sketch(q, t, SK)
            assert st.snapshot() == Maintainer.init(q, SK, t, topk_buffer=3).snapshot()
