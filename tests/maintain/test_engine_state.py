"""Engine surface: state round trips, memory accounting, top-k exhaustion, base-side contract,
bloom filters, push-down planning, error cases."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from advisor.errors import Unsupported
from advisor.maintain import reference as ref
from advisor.maintain.base_side import NEW, OLD, KeyFilter, PandasBase
from advisor.maintain.engine import Maintainer, MaintState
from advisor.maintain.operators.protocol import MaintenanceError, NeedsRecapture
from advisor.maintain.operators.join import KeyBloom
from advisor.maintain.pushdown import pushdown_predicates, rewrite
from advisor.plan import ir
from maintain_helpers import (E, agg, distinct, ex51, fs, join, part, project, rows, rs_tables, scan, select, topk,
                              union)

SK2 = {1: ("a", part("R", "a", (6,))), 2: ("c", part("S", "c", (7,)))}


def topk_join_query():
    r, s = scan("R", ["a", "b"], 1), scan("S", ["c", "d"], 2)
    g = agg(join(r, s, "b = d"), ["a"], [("sum", "c", "sc"), ("min", "c", "mn"), ("count", "c", "nd", True)])
    return topk(select(g, "sc > 0"), [("sc", False)], 2)


def batch(tables):
    delta = {"R": (rows(["a", "b"], (5, 8), (2, 9)), rows(["a", "b"], (1, 7))),
             "S": (rows(["c", "d"], (3, 9), (11, 8)), None)}
    new = {"R": rows(["a", "b"], (9, 9), (5, 8), (2, 9)), "S": rows(["c", "d"], (6, 9), (7, 8), (3, 9), (11, 8))}
    return delta, new


def test_round_trip_preserves_next_batch():
    t = rs_tables()
    q = topk_join_query()
    a = Maintainer.init(q, SK2, t, topk_buffer=1)
    data = a.to_bytes()
    b = MaintState.from_bytes(data)
    assert b.sketch() == a.sketch() and b.snapshot() == a.snapshot()
    delta, new = batch(t)
    ra = a.apply(delta, PandasBase(t, new, SK2))
    rb = b.apply(delta, PandasBase(t, new, SK2))
    assert ra == rb == ref.sketch(q, new, SK2)
    assert a.snapshot() == b.snapshot()
    assert MaintState.from_bytes(b.to_bytes()).snapshot() == b.snapshot()


def test_from_bytes_rejects_garbage():
    with pytest.raises(ValueError):
        MaintState.from_bytes(b"nope")
    data = Maintainer.init(ex51(), SK2, rs_tables()).to_bytes()
    with pytest.raises(ValueError):
        MaintState.from_bytes(data[:8] + bytes([99]) + data[9:])


def test_memory_grows_with_groups():
    small = {"R": rows(["a", "b"], (1, 1)), "S": rows(["c", "d"], (1, 1))}
    big = {"R": pd.DataFrame({"a": range(300), "b": [1] * 300}), "S": rows(["c", "d"], (1, 1))}
    q = agg(join(scan("R", ["a", "b"], 1), scan("S", ["c", "d"], 2), "b = d"), ["a"], [("sum", "c", "s")])
    m1 = Maintainer.init(q, SK2, small).memory_bytes()
    m2 = Maintainer.init(q, SK2, big).memory_bytes()
    assert 0 < m1 < m2


def test_topk_exhaustion_raise_and_refill():
    t = {"T": rows(["x"], *[(i,) for i in range(10)])}
    sk = {1: ("x", part("T", "x", (3, 6)))}
    q = topk(scan("T", ["x"], 1), [("x", True)], 2)
    dels = rows(["x"], (0,), (1,), (2,))
    new = {"T": rows(["x"], *[(i,) for i in range(3, 10)])}
    st = Maintainer.init(q, sk, t, topk_buffer=3, on_topk_exhausted="raise")
    with pytest.raises(NeedsRecapture):
        st.apply({"T": (None, dels)}, PandasBase(t, new, sk))
    st = Maintainer.init(q, sk, t, topk_buffer=3)
    assert st.sketch() == {1: fs(0)}
    assert st.apply({"T": (None, dels)}, PandasBase(t, new, sk)) == {1: fs(1)}
    assert st.last_stats["topk_refills"] == 1


def test_global_aggregate_has_one_row_even_when_empty():
    t = {"T": rows(["x"])}
    sk = {1: ("x", part("T", "x", (5,)))}
    q = select(agg(scan("T", ["x"], 1), [], [("count", None, "n"), ("sum", "x", "s")]), "n >= 0")
    st = Maintainer.init(q, sk, t)
    assert len(ref.evaluate(q, t)) == 1
    assert st.sketch() == {1: fs()}
    new = {"T": rows(["x"], (1,), (7,))}
    assert st.apply({"T": (new["T"], None)}, None) == {1: fs(0, 1)} == ref.sketch(q, new, sk)
    assert st.apply({"T": (None, new["T"])}, None) == {1: fs()}


class SparkLikeBase:
    """Answers like a Spark BaseSide would: int fragment ids, ints as floats, no multiplicity column."""

    def __init__(self, inner):
        self.inner = inner

    def rows(self, node, version, keys=None):
        df = self.inner.rows(node, version, None)
        out = pd.DataFrame({c: df[c].astype("float64") if str(df[c].dtype) == "Int64" and not df[c].isna().any()
                            else df[c] for c in node.names})
        for c in df.columns:
            if c.startswith("__f"):
                out[c] = [next(iter(v)) if len(v) == 1 else sorted(v) for v in df[c]]
        return out.loc[out.index.repeat(df["__m"].to_numpy())].reset_index(drop=True)


def test_base_side_contract_accepts_plain_answers():
    t = rs_tables()
    delta, new = batch(t)
    q = ex51()
    a = Maintainer.init(q, SK2, t)
    b = Maintainer.init(q, SK2, t)
    ra = a.apply(delta, PandasBase(t, new, SK2))
    rb = b.apply(delta, SparkLikeBase(PandasBase(t, new, SK2)))
    assert ra == rb == ref.sketch(q, new, SK2)
    assert a.snapshot() == b.snapshot()


def test_join_without_base_side_is_an_error():
    t = rs_tables()
    st = Maintainer.init(ex51(), SK2, t)
    with pytest.raises(MaintenanceError, match="base side"):
        st.apply({"R": (rows(["a", "b"], (5, 8)), None)}, None)


def test_pandas_base_key_filter():
    t = rs_tables()
    base = PandasBase({}, t, SK2)
    s = scan("S", ["c", "d"], 2)
    got = base.rows(s, NEW, KeyFilter(("d",), frozenset({(8,)})))
    assert got["c"].tolist() == [7]
    assert len(base.rows(s, NEW)) == 2 and OLD != NEW


def test_key_bloom_has_no_false_negatives():
    bf = KeyBloom()
    keys = [(i, f"k{i % 7}") for i in range(5000)]
    bf.add(keys)
    assert bf.might_contain(keys).all()
    assert bf.might_contain([(1.0, "k1")]).all()          # 1 and 1.0 join in SQL
    assert not bf.might_contain([(None, "k1")]).any()      # NULL never joins
    others = [(i, "zz") for i in range(10000, 12000)]
    assert bf.might_contain(others).mean() < 0.2


def test_delete_of_unknown_row_is_detected():
    t = {"T": rows(["x"], (1,))}
    sk = {1: ("x", part("T", "x", (5,)))}
    st = Maintainer.init(agg(scan("T", ["x"], 1), ["x"], [("count", None, "n")]), sk, t)
    with pytest.raises(MaintenanceError):
        st.apply({"T": (None, rows(["x"], (2,)))}, None)


def test_unsupported_shapes():
    s = scan("T", ["x"], 1)
    bad = agg(s, ["x"], [("count", None, "n")])
    bad.aggs[0] = ir.AggCall("median", E("x"), False, ir.Col("m", "double"))
    with pytest.raises(Unsupported):
        Maintainer.empty(bad, {})

    class Weird(ir.Node):
        cols = []

    with pytest.raises(Unsupported):
        Maintainer.empty(Weird(), {})


def test_pushdown_planning():
    r, s = scan("R", ["a", "b", "c"], 1), scan("S", ["d", "e"], 2)
    g = agg(project(r, ["a", ("b + c", "bc")]), ["a"], [("sum", "bc", "t")])
    q = select(join(g, s, "a = d AND e > 2"), "a < 5 AND t > 3")
    p = {k: sorted(x.sql() for x in v) for k, v in pushdown_predicates(q).items() if v}
    assert p == {1: ['"a" < 5'], 2: ["e > 2"]}
    u = select(union(project(r, ["a", "b"]), project(s, ["d", "e"]), ["u1", "u2"]), "u1 > 1")
    p = {k: [x.sql() for x in v] for k, v in pushdown_predicates(u).items() if v}
    assert p == {1: ['"a" > 1'], 2: ['"d" > 1']}
    tk = select(topk(r, [("a", True)], 1), "a > 1")
    assert not any(pushdown_predicates(tk).values())
    d = select(distinct(project(r, ["b"])), "b = 2")
    assert [x.sql() for x in pushdown_predicates(d)[1]] == ['"b" = 2']
    # the rewritten tree is equivalent
    t = {"R": rows(["a", "b", "c"], (1, 2, 3), (4, 1, 1), (7, 0, 9)), "S": rows(["d", "e"], (4, 3), (1, 5), (7, 1))}
    for tree in (q, u, tk, d):
        pd.testing.assert_frame_equal(ref.evaluate(rewrite(tree), t), ref.evaluate(tree, t))


def test_dates_and_strings_flow_through():
    t = {"E": pd.DataFrame({"day": [dt.date(2020, 1, 1), dt.date(2020, 6, 1), None, dt.date(2021, 1, 1)],
                            "who": ["x", "y", "x", None], "v": [1, 2, 3, 4]})}
    cols = [("day", "date"), ("who", "string"), ("v", "bigint")]
    sk = {1: ("day", part("E", "day", ("2020-03-01", "2020-12-31"), dtype="date"))}
    q = select(agg(select(scan("E", cols, 1), "day >= DATE '2020-01-01' OR who = 'x'"), ["who"],
                   [("max", "day", "last"), ("count", None, "n")]), "n >= 1")
    st = Maintainer.init(q, sk, t)
    assert st.sketch() == ref.sketch(q, t, sk) == {1: fs(0, 1, 2, 3)}
    ins = pd.DataFrame({"day": [dt.date(2019, 1, 1)], "who": ["z"], "v": [5]})
    new = {"E": pd.concat([t["E"], ins], ignore_index=True)}
    assert st.apply({"E": (ins, None)}, None) == ref.sketch(q, new, sk)
