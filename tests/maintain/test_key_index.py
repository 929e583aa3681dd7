"""Group key -> code maps: the dense integer index must behave exactly like the dict one, and
move to it when a key stops fitting."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
from hypothesis import given, settings, strategies as st

from advisor.maintain.key_index import DenseIntKeys, PackedIntKeys, TupleKeys


def _frame(vals):
    return pd.DataFrame({"k": pd.array(vals, dtype="Int64")})


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 60), max_size=12), st.lists(st.integers(0, 60), max_size=5)),
                max_size=12))
def test_dense_index_hands_out_the_same_codes_as_the_dict(batches):
    dense, tup = DenseIntKeys(), TupleKeys()
    for add, drop in batches:
        cd = dense.frame_codes(_frame(add), ["k"])
        ct = tup.codes([(v,) for v in add])
        assert cd.tolist() == ct.tolist()
        dead = sorted({c for v, c in zip(add, ct.tolist()) if v in drop})
        dense.release(np.array(dead, dtype=np.int64))
        tup.release(np.array(dead, dtype=np.int64))
        assert sorted(dense.items()) == sorted(tup.items()) and len(dense) == len(tup)
        assert all(dense.key(c) == k for k, c in tup.items())
        assert sorted(dense.live().tolist()) == sorted(tup.live().tolist())
        live = tup.live()
        assert dense.key_columns(live, 1)[0].tolist() == tup.key_columns(live, 1)[0].tolist()
    assert sorted(dense.to_tuples().items()) == sorted(tup.items())


def test_keys_that_do_not_fit_are_refused_so_the_caller_can_move():
    d = DenseIntKeys()
    assert d.frame_codes(_frame([3, 5]), ["k"]).tolist() == [0, 1]
    assert d.frame_codes(_frame([3, None]), ["k"]) is None          # NULL
    assert d.frame_codes(_frame([-1]), ["k"]) is None                # negative
    assert d.frame_codes(_frame([10 ** 12]), ["k"]) is None          # far too sparse
    assert d.codes([("x",)]) is None and d.codes([(True,)]) is None  # not an int
    assert (5,) in d and (4,) not in d and len(d) == 2              # refusals changed nothing
    t = d.to_tuples()
    assert t.codes([(5,), (-1,), (None,)]).tolist() == [1, 2, 3]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 60), max_size=10), st.lists(st.integers(0, 60), max_size=4)),
                min_size=1, max_size=6),
       st.lists(st.integers(10 ** 9, 10 ** 9 + 50), min_size=1, max_size=6),
       st.lists(st.tuples(st.lists(st.integers(0, 60), max_size=10), st.lists(st.integers(0, 60), max_size=4)),
                max_size=6))
def test_sparse_keys_widen_the_dense_index_to_packed_keys_with_the_same_codes(before, far, after):
    """Keys far above the dense slots (new orders keyed above every generated one) move the index to
    one-column packed keys, not to the dict: the codes stay those the dict hands out."""
    from advisor.maintain.operators.aggregate_arrays import PlainAggOp

    op = PlainAggOp.__new__(PlainAggOp)
    op.index, op.cnt, op.nn, op.sums, op.f1, op.c1 = DenseIntKeys(), np.zeros(0, dtype=np.int64), \
        np.zeros((0, 0), dtype=np.int64), [], np.zeros((0, 0), dtype=np.int64), np.zeros((0, 0), dtype=np.int64)
    op.aggs, op.sids, op.keys = [], [], ["g"]
    tup = TupleKeys()
    far_vals = [v % 1000 + 10 ** 9 for v in far]
    for add, drop in before + [(far_vals, [])] + after:
        c = op._frame_codes(_frame(add).rename(columns={"k": "g"})) if add else np.zeros(0, dtype=np.int64)
        ct = tup.codes([(v,) for v in add])
        assert c.tolist() == ct.tolist()
        dead = sorted({cc for v, cc in zip(add, ct.tolist()) if v in drop})
        op.index.release(np.array(dead, dtype=np.int64))
        tup.release(np.array(dead, dtype=np.int64))
        assert sorted(op.index.items()) == sorted(tup.items())
    assert isinstance(op.index, PackedIntKeys) and len(op.index.width) == 1
    live = tup.live()
    assert op.index.key_columns(live, 1)[0].tolist() == tup.key_columns(live, 1)[0].tolist()


def test_aggregate_state_moves_to_the_dict_and_old_pickles_still_load():
    from advisor.maintain.operators import aggregate_arrays as ops_agg_plain

    op = ops_agg_plain.PlainAggOp.__new__(ops_agg_plain.PlainAggOp)
    st_old = {"code": {(7,): 0}, "key_of": [(7,)], "free": []}
    op.__setstate__(dict(st_old))
    assert isinstance(op.index, TupleKeys) and op.index.key(0) == (7,) and (7,) in op.index
    again = pickle.loads(pickle.dumps(op.index))
    assert dict(again.items()) == {(7,): 0}


def _frame2(pairs):
    return pd.DataFrame({"a": pd.array([p[0] for p in pairs], dtype="Int64"),
                         "b": pd.array([p[1] for p in pairs], dtype="Int64")})


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.lists(st.tuples(st.integers(0, 2 ** 20), st.integers(0, 9)), max_size=12),
                          st.lists(st.integers(0, 11), max_size=5)), max_size=12))
def test_packed_index_hands_out_the_same_codes_as_the_dict(batches):
    """Two integer keys, values spread so the bit fields widen and repack along the way."""
    packed, tup = PackedIntKeys(2), TupleKeys()
    for add, drop_at in batches:
        cp = packed.frame_codes(_frame2(add), ["a", "b"])
        ct = tup.codes(list(add))
        assert cp.tolist() == ct.tolist()
        dead = sorted({ct.tolist()[i] for i in drop_at if i < len(add)})
        packed.release(np.array(dead, dtype=np.int64))
        tup.release(np.array(dead, dtype=np.int64))
        assert sorted(packed.items()) == sorted(tup.items()) and len(packed) == len(tup)
        assert all(packed.key(c) == k and k in packed for k, c in tup.items())
        assert all(k not in packed for k in add if k not in tup.code)
        live = tup.live()
        assert [s.tolist() for s in packed.key_columns(live, 2)] == [s.tolist() for s in tup.key_columns(live, 2)]
    assert sorted(packed.to_tuples().items()) == sorted(tup.items())
    again = pickle.loads(pickle.dumps(packed))
    assert sorted(again.items()) == sorted(packed.items())


def test_packed_keys_that_do_not_fit_are_refused_so_the_caller_can_move():
    p = PackedIntKeys(2)
    assert p.codes([(3, 1), (200_000, 7), (3, 1)]).tolist() == [0, 1, 0]
    assert p.frame_codes(_frame2([(3, None)]), ["a", "b"]) is None     # NULL
    assert p.frame_codes(_frame2([(-1, 0)]), ["a", "b"]) is None       # negative
    assert p.codes([(2 ** 40, 2 ** 30)]) is None                         # more than 62 bits in all
    assert p.codes([("x", 1)]) is None and p.codes([(True, 1)]) is None  # not an int
    assert p.codes([(3,)]) is None                                       # wrong arity
    assert (200_000, 7) in p and (200_000, 6) not in p and (3, 1) in p and len(p) == 2
    assert p.codes([(2 ** 40, 5)]).tolist() == [2]                       # widens, keeps the old codes
    assert p.codes([(200_000, 7), (3, 1)]).tolist() == [1, 0]
    t = p.to_tuples()
    assert t.codes([(200_000, 7), (-1, 0), (None, 2)]).tolist() == [1, 3, 4]


def test_state_of_a_two_key_aggregate_is_far_smaller_with_packed_keys():
    """The state-size estimate the cache budgets by: ~1.3M (part, line number) groups were sized
    at ~200 bytes each for the dict alone; the packed index must stay under 40."""
    p = PackedIntKeys(2)
    rng = np.random.default_rng(5)
    n = 200_000
    a, b = rng.integers(0, 200_000, n), rng.integers(1, 8, n)
    assert p.fit([a, b])
    p.codes_of([a, b])
    assert len(p) == len(set(zip(a.tolist(), b.tolist())))
    assert p.nbytes() < 40 * len(p)
