"""Top-k membership probabilities and the resulting sketch size."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from estimators.aggregates import estimate_groups

from estimators.having import Cmp
from estimators.topk import size_for_topk, topk_membership, topk_probability


def test_topk_membership_ties_and_short_lists():
    v = np.array([5.0, 9.0, 7.0, 9.0, np.nan])
    elig = np.array([True, True, True, True, True])
    assert topk_membership(v, elig, 1).tolist() == [False, True, False, True, False]  # tie at the top
    assert topk_membership(v, elig, 2).tolist() == [False, True, False, True, False]
    assert topk_membership(v, elig, 3).tolist() == [False, True, True, True, False]
    assert topk_membership(v, elig, 2, descending=False).tolist() == [True, False, True, False, False]
    few = np.array([True, False, False, False, False])
    assert topk_membership(v, few, 3).tolist() == [True, False, False, False, False]
    m = topk_membership(np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]]), np.ones((2, 3), bool), 1)
    assert m.tolist() == [[False, False, True], [True, False, False]]
    with pytest.raises(ValueError):
        topk_membership(v, elig, 0)


def test_exact_groups_give_the_true_top_k():
    rng = np.random.default_rng(0)
    pdf = pd.DataFrame({"g": rng.integers(0, 10, 200), "x": rng.gamma(2, 10, 200)})
    pdf["_n_g"] = pdf.groupby("g")["g"].transform("size")
    est = estimate_groups(pdf, ["g"], [("sum", "x")], B=20)
    tk = topk_probability(est, "sum(x)", k=3)
    truth = pdf.groupby("g")["x"].sum().nlargest(3).index
    assert set(tk.frame.loc[tk.frame.p == 1, "g"]) == set(truth)
    assert set(tk.frame["p"]) <= {0.0, 1.0}
    assert (tk.frame["point_in"] == (tk.frame.p == 1)).all()


def test_uncertain_groups_get_fractional_probabilities():
    rng = np.random.default_rng(1)
    # groups 0..5 with means 100,100,100,50,50,10: the top 2 of three equal groups is a coin toss
    means = [100, 100, 100, 50, 50, 10]
    pdf = pd.DataFrame({"g": np.repeat(range(6), 20), "x": np.concatenate([rng.normal(m, 20, 20) for m in means]),
                        "_n_g": 400})
    est = estimate_groups(pdf, ["g"], [("sum", "x")], B=200, seed=2)
    p = topk_probability(est, 0, k=2).frame["p"].to_numpy()
    assert p.sum() == pytest.approx(2.0)  # exactly k groups per replicate (no ties with floats)
    assert (p[:3] > 0.2).all() and (p[:3] < 0.95).all()
    assert (p[3:] == 0).all()
    asc = topk_probability(est, 0, k=1, descending=False).frame["p"].to_numpy()
    assert asc[5] == 1.0


def test_having_filter_applies_before_ranking():
    pdf = pd.DataFrame({"g": [1, 2, 3], "x": [30.0, 20.0, 10.0], "c": [1.0, 5.0, 5.0], "_n_g": 1})
    est = estimate_groups(pdf, ["g"], [("sum", "x"), ("sum", "c")])
    tk = topk_probability(est, "sum(x)", k=1, predicate=Cmp("sum(c)", ">", 2))
    assert tk.frame["p"].tolist() == [0.0, 1.0, 0.0]


def test_topk_size_uses_size_estimator():
    pdf = pd.DataFrame({"g": [1, 2, 3, 4], "x": [40.0, 30.0, 20.0, 10.0], "_n_g": 1,
                        "frag": [0, 0, 1, 2]})
    est = estimate_groups(pdf, ["g"], [("sum", "x")], method="clt")
    tk = topk_probability(est, 0, k=2)
    r = size_for_topk(pdf, tk, {0: 10, 1: 5, 2: 5}, group_cols=["g"], determined=True)
    assert r.point_fragments == (0,) and r.rows_point == 10 and r.rows_expected == 10
    r3 = size_for_topk(pdf, topk_probability(est, 0, k=3), {0: 10, 1: 5, 2: 5}, group_cols=["g"],
                       determined=True, point_rule="estimate")
    assert r3.rows_point == 15 and r3.selectivity_point == 0.75
