"""A top-k state's first batch (every group of the aggregation below it) is cut to about the
buffer in numpy before the per-entry work: the sketch is the reference's, the buffer holds about
`l` copies, and later deletions that drain it still refill to the right answer."""

from __future__ import annotations

import decimal

import numpy as np
import pandas as pd
import pytest
from maintain_helpers import agg, apply_delta, part, scan, topk

from advisor.maintain import reference as ref
from advisor.maintain.base_side import PandasBase
from advisor.maintain.engine import Maintainer
from advisor.maintain.frames import M
from advisor.maintain.operators.topk import TopKOp

SK = {1: ("g", part("T", "g", (100, 200, 300)))}


def _table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"g": rng.integers(0, 400, n), "v": rng.integers(-50, 50, n)})


def _topk_op(state) -> TopKOp:
    return next(op for op in state.root_op.walk() if isinstance(op, TopKOp))


@pytest.mark.parametrize("asc", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_first_batch_is_cut_to_the_buffer_and_stays_exact(asc, seed):
    t = {"T": _table(3000, seed)}
    q = topk(agg(scan("T", ["g", "v"], 1), ["g"], [("sum", "v", "s")]), [("s", asc)], 5)
    st = Maintainer.init(q, SK, t, topk_buffer=8)
    assert st.sketch() == ref.sketch(q, t, SK)
    op = _topk_op(st)
    assert op.n_total == t["T"]["g"].nunique()          # every group counted, ...
    assert len(op.buf) < 30 and not op.complete       # ... about l of them held
    # delete rows of the current winners until the buffer runs dry: refills keep it exact
    cur = t
    for k in range(4):
        winners = [v[0] for v, _ in op._topk(op._sorted())]
        dels = cur["T"][cur["T"]["g"].isin(winners[:3])].head(40 + k)
        new = apply_delta(cur, {"T": (None, dels)})
        assert st.apply({"T": (None, dels)}, PandasBase(cur, new, SK)) == ref.sketch(q, new, SK)
        cur = new


def test_decimal_sums_are_cut_and_numeric_strings_are_not():
    rng = np.random.default_rng(5)
    df = pd.DataFrame({"g": rng.integers(0, 500, 2000)})
    df["v"] = [decimal.Decimal(int(x)) / 100 for x in rng.integers(0, 10_000, 2000)]
    t = {"T": df}
    q = topk(agg(scan("T", ["g", ("v", "decimal(15,2)")], 1), ["g"], [("sum", "v", "s")]), [("s", False)], 3)
    st = Maintainer.init(q, SK, t, topk_buffer=4)
    assert st.sketch() == ref.sketch(q, t, SK)
    assert len(_topk_op(st).buf) < 20

    # strings that look like numbers order as strings ('9' after '10'): never cut as numbers
    s = pd.DataFrame({"w": [str(i) for i in range(200)]})
    q2 = topk(scan("S", [("w", "string")], 1), [("w", False)], 3)
    sk2 = {1: ("w", part("S", "w", ("3", "6"), dtype="string"))}
    st2 = Maintainer.init(q2, sk2, {"S": s}, topk_buffer=4)
    assert st2.sketch() == ref.sketch(q2, {"S": s}, sk2)
    assert [v[0] for v, _ in _topk_op(st2)._topk(_topk_op(st2)._sorted())] == ["99", "98", "97"]


def test_the_cut_keeps_every_row_within_l_copies_and_counts_the_rest():
    t = {"T": _table(50, 0)}
    q = topk(agg(scan("T", ["g", "v"], 1), ["g"], [("sum", "v", "s")]), [("s", False)], 2)
    op = _topk_op(Maintainer.init(q, SK, t, topk_buffer=3))
    before = op.n_total
    d = pd.DataFrame({"g": range(10), "s": [5, 9, 9, 1, None, 7, 9, 3, 2, 8], M: [1] * 10})
    kept = op._drop_trimmed(d)
    # DESC: the three 9s are the first l = 3 copies; the NULL is kept (never cut), the rest counted
    assert sorted(kept["g"].tolist()) == [1, 2, 4, 6]
    assert op.n_total - before == 6
    # a batch with a deletion is left whole
    d.loc[0, M] = -1
    assert len(op._drop_trimmed(d)) == 10
