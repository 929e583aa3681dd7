"""The selective shape-family generator and its per-family metrics -- no Spark needed."""

from __future__ import annotations

import random

import numpy as np

from workloads.bench.accuracy_shapes import COMBOS, FAMILIES, Combo, draw, in_range, predicted_share, sql_of
from workloads.bench.shape_metrics import family_metrics


def test_every_dataset_has_every_family():
    for ds, combos in COMBOS.items():
        assert {c.family for c in combos} == set(FAMILIES), ds


def test_sql_of_each_shape():
    c = Combo("where_count", "t", ("a", "b"), "count(*)", where="x > 1")
    assert sql_of(c, 3, 7.5) == "SELECT a, b, count(*) AS r FROM t WHERE x > 1 GROUP BY a, b HAVING count(*) > 7.5"
    k = Combo("topk_sum", "t", ("a",), "sum(v)", "topk")
    assert sql_of(k, 5, None).endswith("ORDER BY sum(v) DESC LIMIT 5")


def test_draw_keeps_exactly_k_groups_and_targets_small_sketches():
    rng = np.random.default_rng(0)
    G = 20_000
    r, n = rng.gamma(2.0, 1.0, G), np.full(G, 5.0)
    for op in (">", "<"):
        c = Combo("extreme", "t", ("g",), "max(x)", op)
        for s in range(20):
            k, thr = draw(c, r, n, int(n.sum()), random.Random(s))
            passing = (r > thr) if op == ">" else (r < thr)
            assert passing.sum() == k
            share = predicted_share(np.sort(n), int(n.sum()), G)[k - 1]
            assert share <= 0.25


def test_in_range_judges_the_best_sketch():
    assert in_range({"a": 0.5, "b": 0.05}) and not in_range({"a": 0.5}) and not in_range({"a": 0.0001})


def _rec(family, real, est, ci, go, pick, exact=None):
    return {"template": family, "sql": family, "rows": 1000, "real": real,
            "theta": {"0.05": {"est": est, "ci": ci, "exact": exact or {}, "est_s": 1.0,
                               "picks": {"CB-OPT": {"attr": pick, "go": go}}}}}


def test_family_metrics_count_what_the_bar_names():
    recs = [_rec("extreme", {"a": 0.10, "b": 0.02}, {"a": 0.12, "b": 0.002}, {"a": [0.1, 0.2], "b": [0.002, 0.002]},
                 True, "b"),
            _rec("topk_sum", {"a": 0.05}, {"a": 0.05}, {"a": [0.05, 0.05]}, True, "a", {"a": True})]
    fm = family_metrics(recs, "0.05")
    ex, tk = fm["extreme"], fm["topk_sum"]
    assert ex["coverage"] == 0.5 and ex["zero_width_not_exact"] == 1 and ex["bad_gos"] == 1
    assert ex["within_1_05"] == 1.0 and abs(ex["pick_median_err"] - 0.9) < 1e-9
    assert tk["coverage"] == 1.0 and tk["zero_width_not_exact"] == 0 and tk["bad_gos"] == 0
    assert fm["all"]["queries"] == 2
