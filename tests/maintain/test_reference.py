"""The reference evaluator (the tests' oracle): SQL semantics and lineage sketches on small cases."""

from __future__ import annotations

import pandas as pd

from advisor.maintain import reference as ref
from maintain_helpers import (PRICE_PART, SALES_COLS, agg, distinct, fs, join, part, project, q_top, rows,
                              sales_table, scan, select, topk, union)

SK = {1: ("price", PRICE_PART)}


def test_q_top_result_and_sketch():
    t = {"sales": sales_table()}
    assert ref.evaluate(q_top(), t).values.tolist() == [["Apple", 5074]]
    assert ref.sketch(q_top(), t, SK) == {1: fs(2, 3)}
    per_brand = dict(ref.evaluate(q_top(having=False), t).values.tolist())
    assert per_brand == {"Lenovo": 1247, "Apple": 5074, "Dell": 1345, "HP": 4895}


def test_aggregate_null_semantics():
    t = {"T": pd.DataFrame({"g": [1, 1, 2], "v": [None, None, 3]})}
    q = agg(scan("T", ["g", "v"], 1), ["g"], [("sum", "v", "s"), ("count", "v", "c"), ("count", None, "n"),
                                                ("avg", "v", "a"), ("min", "v", "mn"), ("count", "v", "d", True)])
    got = {r[0]: r[1:] for r in ref.evaluate(q, t).astype(object).values.tolist()}
    assert got[1] == [pd.NA, 0, 2, pd.NA, pd.NA, 0]
    assert got[2] == [3, 1, 1, 3.0, 3, 1]


def test_null_join_keys_never_match_and_lineage_unions():
    t = {"R": pd.DataFrame({"a": [1, None], "b": [5, 6]}), "S": pd.DataFrame({"c": [1, None], "d": [7, 8]})}
    sk = {1: ("b", part("R", "b", (6,))), 2: ("d", part("S", "d", (8,)))}
    q = join(scan("R", ["a", "b"], 1), scan("S", ["c", "d"], 2), "a = c")
    assert ref.evaluate(q, t).values.tolist() == [[1, 5, 1, 7]]
    assert ref.sketch(q, t, sk) == {1: fs(0), 2: fs(0)}


def test_topk_ties_by_other_attributes_then_fragment():
    t = {"T": pd.DataFrame({"k": [1, 1, 1, 2], "v": [9, 3, 3, 0], "p": [1, 10, 20, 30]})}
    sk = {1: ("p", part("T", "p", (5, 15)))}
    s = scan("T", ["k", "v", "p"], 1)
    q = topk(project(s, ["k", "v"]), [("k", True)], 2)
    assert ref.evaluate(q, t).values.tolist() == [[1, 3], [1, 3]]
    assert ref.sketch(q, t, sk) == {1: fs(1, 2)}
    q1 = topk(project(s, ["k", "v"]), [("k", True)], 1)
    assert ref.sketch(q1, t, sk) == {1: fs(1)}            # tied copies: lower fragment first
    qd = topk(project(s, ["k", "v"]), [("k", False)], 1)
    assert ref.evaluate(qd, t).values.tolist() == [[2, 0]]


def test_topk_nulls_first_ascending_last_descending():
    t = {"T": pd.DataFrame({"x": [None, 1, 2]})}
    s = scan("T", ["x"], 1)
    assert ref.evaluate(topk(s, [("x", True)], 1), t)["x"].isna().all()
    assert ref.evaluate(topk(s, [("x", False)], 1), t)["x"].tolist() == [2]


def test_union_distinct_and_global_aggregate():
    t = {"sales": sales_table()}
    s1 = scan("sales", SALES_COLS, 1)
    s2 = scan("sales", SALES_COLS, 2, "o_")
    u = union(project(select(s1, "price > 1000"), ["brand"]), project(select(s2, "o_price < 400"), ["o_brand"]), ["b"])
    assert sorted(ref.evaluate(u, t)["b"]) == ["Apple", "Apple", "Dell", "Lenovo"]
    assert ref.sketch(u, t, {1: ("price", PRICE_PART), 2: ("o_price", PRICE_PART)}) == {1: fs(2, 3), 2: fs(0)}
    d = distinct(project(s1, ["brand"]))
    assert sorted(ref.evaluate(d, t)["brand"]) == ["Apple", "Dell", "HP", "Lenovo"]
    g = agg(select(s1, "price > 99999"), [], [("count", None, "n"), ("max", "price", "m")])
    assert ref.evaluate(g, t).astype(object).values.tolist() == [[0, pd.NA]]
    assert ref.sketch(g, t, SK) == {1: fs()}


def test_restrict_builds_the_sketch_instance():
    t = {"sales": sales_table(), "other": rows(["z"], (1,))}
    dp = ref.restrict(t, q_top(), SK, {1: fs(0)})
    assert sorted(dp["sales"]["sid"]) == [1, 2] and dp["other"] is t["other"]
