"""Group key -> code maps: the dense integer index must behave exactly like the dict one, and
move to it when a key stops fitting."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
from hypothesis import given, settings, strategies as st

from advisor.maintain.keyindex import DenseIntKeys, TupleKeys


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


def test_aggregate_state_moves_to_the_dict_and_old_pickles_still_load():
    from advisor.maintain import ops_agg_plain

    op = ops_agg_plain.PlainAggOp.__new__(ops_agg_plain.PlainAggOp)
    st_old = {"code": {(7,): 0}, "key_of": [(7,)], "free": []}
    op.__setstate__(dict(st_old))
    assert isinstance(op.index, TupleKeys) and op.index.key(0) == (7,) and (7,) in op.index
    again = pickle.loads(pickle.dumps(op.index))
    assert dict(again.items()) == {(7,): 0}
