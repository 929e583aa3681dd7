"""Interval coverage per query shape on seeded synthetic tables whose true sketch size is computed.

Each test draws a table of small groups, a stratified sample at theta = 5 % (at least one row per
group, as ``estimators.sampling`` draws it), estimates the groups as ``advisor.estimation`` does
(bootstrap, empirical-Bayes shrinkage, the unshrunk model's replicates for the interval's hull) and
sizes the sketch on the group key at 1,000 fragments (4 groups a fragment).  Over 20 independent
samples the 95 % interval must hold the true size in at least 80 % of them, and an interval of width
zero must be labelled exact and equal the truth.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from estimate_helpers import shrunk_size, stratified_sample

from estimators.aggregates import estimate_groups
from estimators.having import Cmp, pass_matrix
from estimators.shrinkage import shrink_groups
from estimators.sketch_size import size_for_having

G, PER_FRAGMENT, THETA, DRAWS = 4000, 4, 0.05, 20


def _table(rows_per_group: int, values, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(G), rows_per_group)
    return pd.DataFrame({"g": g, "x": values(rng, g.size)})


def _sample(t: pd.DataFrame, seed: int) -> pd.DataFrame:
    s = stratified_sample(t, THETA, seed)
    s["frag"] = s["g"] // PER_FRAGMENT
    return s


def _size(sample: pd.DataFrame, agg: tuple, having: Cmp, fsizes: np.ndarray, seed: int):
    return shrunk_size(sample, agg, having, fsizes, seed)


def _coverage(t: pd.DataFrame, truth_by_group: pd.Series, agg: tuple, c: float, op: str = ">") -> tuple:
    passing = truth_by_group[truth_by_group > c if op == ">" else truth_by_group < c].index.to_numpy()
    frag = (t["g"] // PER_FRAGMENT).to_numpy()
    fsizes = np.bincount(frag, minlength=G // PER_FRAGMENT).astype(float)
    true_rows = fsizes[np.unique(passing // PER_FRAGMENT)].sum()
    hits, points = 0, []
    for d in range(DRAWS):
        s = _sample(t, 100 + d)
        e = _size(s, agg, Cmp(f"{agg[0]}({agg[1] or '*'})", op, c), fsizes, d)
        hits += e.ci_lo - 1e-9 <= true_rows <= e.ci_hi + 1e-9
        if e.ci_hi <= e.ci_lo:
            points.append((e.exact, e.ci_lo, true_rows))
    return hits / DRAWS, points, true_rows / fsizes.sum()


@pytest.mark.parametrize("q", [0.95, 0.98])
def test_max_over_small_groups_is_covered(q):
    """``HAVING max(x) > c`` over groups of 6 rows (one sampled): the sample max is only a lower
    bound, so sizing by it alone misses most passing groups with a confident, narrow interval."""
    t = _table(6, lambda rng, n: rng.gamma(2.0, 10.0, n), seed=1)
    truth = t.groupby("g")["x"].max()
    cover, points, sel = _coverage(t, truth, ("max", "x"), float(truth.quantile(q)))
    assert 0.0 < sel < 0.5
    assert cover >= 0.8, cover
    assert all(exact and lo == true for exact, lo, true in points), points


def test_min_over_small_groups_is_covered():
    """The mirror: ``HAVING min(x) < c``."""
    t = _table(6, lambda rng, n: rng.gamma(2.0, 10.0, n), seed=2)
    truth = t.groupby("g")["x"].min()
    cover, points, _ = _coverage(t, truth, ("min", "x"), float(truth.quantile(0.02)), op="<")
    assert cover >= 0.8, cover
    assert all(exact for exact, _, _ in points), points


@pytest.mark.parametrize("q", [0.9, 0.98])
def test_sum_of_products_over_four_row_groups_is_covered(q):
    """``HAVING sum(a * b) > c`` over partsupp-like groups of 4 rows (one sampled): a single row
    has no bootstrap spread, so its ``4 * x`` was taken as certain."""
    t = _table(4, lambda rng, n: rng.integers(1, 10_000, n) * rng.uniform(1.0, 1000.0, n), seed=3)
    truth = t.groupby("g")["x"].sum()
    cover, points, sel = _coverage(t, truth, ("sum", "x"), float(truth.quantile(q)))
    assert 0.0 < sel < 0.6
    assert cover >= 0.8, cover
    assert all(exact and lo == true for exact, lo, true in points), points


def test_count_over_strata_is_exact_and_labelled():
    """``HAVING count(*) > c`` over groups that are strata: the counts are known from the strata, so
    the interval is a point, labelled exact, and equals the truth in every draw."""
    rng = np.random.default_rng(4)
    sizes = rng.integers(1, 60, G)
    t = pd.DataFrame({"g": np.repeat(np.arange(G), sizes), "x": 1.0})
    truth = t.groupby("g")["x"].size()
    cover, points, _ = _coverage(t, truth, ("count", None), float(truth.quantile(0.95)))
    assert cover == 1.0
    assert len(points) == DRAWS and all(exact and lo == true for exact, lo, true in points)


@pytest.mark.parametrize("q", [0.9, 0.98])
def test_filtered_count_over_few_sampled_rows_is_covered(q):
    """``WHERE p GROUP BY g HAVING count(*) > c`` over groups of 10-40 rows (one or two sampled):
    a sampled share of 1/2 or 1 put most shown groups above any threshold."""
    from estimators.sketch_size import sizing_rows

    rng = np.random.default_rng(5)
    sizes = rng.integers(10, 40, G)
    share = rng.beta(2.0, 8.0, G)
    g = np.repeat(np.arange(G), sizes)
    t = pd.DataFrame({"g": g, "x": 1.0, "ok": rng.random(g.size) < share[g]})
    truth = t[t["ok"]].groupby("g")["x"].size().reindex(range(G), fill_value=0)
    c = float(truth.quantile(q))
    frag = (t["g"] // PER_FRAGMENT).to_numpy()
    fsizes = np.bincount(frag, minlength=G // PER_FRAGMENT).astype(float)
    true_rows = fsizes[np.unique(truth[truth > c].index.to_numpy() // PER_FRAGMENT)].sum()
    hits = 0
    for d in range(DRAWS):
        s = _sample(t, 200 + d)
        est = estimate_groups(s, ["g", "ok"], [("count", None)], B=50, seed=d, where="ok")
        keep = s[sizing_rows(s["ok"].to_numpy(), s, est, ["g", "ok"])]
        e = size_for_having(keep, est, Cmp("count(*)", ">", c), fsizes, determined=True,
                            seed=d)
        hits += e.ci_lo - 1e-9 <= true_rows <= e.ci_hi + 1e-9
        assert e.rows_expected <= 3 * true_rows + 3 * fsizes.max()
    assert hits / DRAWS >= 0.8, hits / DRAWS


def _filtered_sum_sizes(t: pd.DataFrame, c: float, fsizes: np.ndarray, d: int, stratified: bool):
    from estimators.sketch_size import sizing_rows

    s = _sample(t, 300 + d)
    est = estimate_groups(s, ["g", "ok"], [("sum", "x")], B=50, seed=d, where="ok")
    est.unshrunk = dataclasses.replace(est, frame=est.frame.copy(),
                                       replicates={k: v.copy() for k, v in est.replicates.items()})
    extra = {"where": "ok", "stratum_rows": s} if stratified else {}
    shrink_groups(est, s[s["ok"]], ["g", "ok"], aligned=True, **extra)
    keep = s[sizing_rows(s["ok"].to_numpy(), s, est, ["g", "ok"])]
    having = Cmp("sum(x)", ">", c)
    return size_for_having(keep, est, having, fsizes, determined=True, seed=d,
                           model_replicates=pass_matrix(est.unshrunk, having))


@pytest.mark.parametrize("q", [0.99, 0.995])
def test_filtered_sum_of_products_is_shrunk_with_its_passing_count(q):
    """``WHERE a > 5000 GROUP BY g HAVING sum(a * b) > c`` over partsupp-like strata of 80 rows (4
    sampled, about 2 of them passing): the total's noise is mostly the passing rows' count, so
    shrinking the mean per passing row alone left most groups' totals where their noisy counts put
    them (TPC-H: 0.23 of the table estimated, 0.002-0.007 real).  Shrunk as the stratum's mean of
    ``x * [WHERE]``, the estimate stays within 3x of the truth and the interval's upper end (what a
    go must pay at) holds it.  (Its lower end does not yet: tau^2 is estimated at ~20 times less
    than the noise, and 5-7 of 10 intervals hold the truth.)"""
    rng = np.random.default_rng(6)
    g = np.repeat(np.arange(G), 80)
    a = rng.integers(1, 10_000, g.size)
    t = pd.DataFrame({"g": g, "x": a * rng.uniform(1.0, 1000.0, g.size), "ok": a > 5000})
    truth = t[t["ok"]].groupby("g")["x"].sum().reindex(range(G), fill_value=0.0)
    c = float(truth.quantile(q))
    frag = (t["g"] // PER_FRAGMENT).to_numpy()
    fsizes = np.bincount(frag, minlength=G // PER_FRAGMENT).astype(float)
    true_rows = fsizes[np.unique(truth[truth > c].index.to_numpy() // PER_FRAGMENT)].sum()
    hits, ratios, old = 0, [], []
    for d in range(DRAWS // 2):
        e = _filtered_sum_sizes(t, c, fsizes, d, stratified=True)
        hits += true_rows <= e.ci_hi + 1e-9
        ratios.append(e.rows_expected / true_rows)
        old.append(_filtered_sum_sizes(t, c, fsizes, d, stratified=False).rows_expected / true_rows)
    assert float(np.median(old)) > 5.0, old  # the per-passing-row target: the failure described above
    assert 1 / 3 <= float(np.median(ratios)) <= 3.0, ratios
    assert hits / (DRAWS // 2) >= 0.8, hits
