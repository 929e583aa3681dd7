"""Haas CLT estimator: formulas, stratified/vectorised form, interval coverage, pass probabilities."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from estimators.aggregates import estimate_groups
from estimators.clt import (
    T_n, T_nq, T_nqr, clt_estimate, compare, normal_pass_probability, stratified_clt, z_value)


def test_z_value():
    assert z_value(0.95) == pytest.approx(1.959964, abs=1e-6)
    with pytest.raises(ValueError):
        z_value(1.0)


def test_haas_moments():
    f = np.array([1.0, 2.0, 3.0, 4.0])
    h = np.array([1.0, 0.0, 1.0, 1.0])
    assert T_n(f) == 2.5
    assert T_nq(f, 2) == pytest.approx(5.0 / 3.0)
    assert T_nqr(f, h, 1, 1) == pytest.approx(np.cov(f, h, ddof=1)[0, 1])
    assert T_nq(np.array([3.0])) == 0.0


def test_sum_by_hand():
    # N = 8, n = 4: point 8 * 2.5 = 20; var = 64 * (5/3) / 4 * (1 - 4/8)
    e = clt_estimate(np.array([1.0, 2.0, 3.0, 4.0]), 8, "sum")
    assert e.point == 20.0
    assert e.variance == pytest.approx(64 * (5 / 3) / 4 * 0.5)
    assert e.hi - e.point == pytest.approx(1.959964 * np.sqrt(e.variance), rel=1e-6)
    assert clt_estimate(np.array([1.0, 2.0, 3.0, 4.0]), 8, "sum", fpc=False).variance == pytest.approx(64 * (5 / 3) / 4)
    assert clt_estimate(np.array([1.0, 2.0]), 2, "sum", fpc=False).variance == 0.0  # fully sampled


def test_avg_formula_7_equals_linearisation():
    rng = np.random.default_rng(0)
    v = rng.normal(10, 3, size=40)
    mask = rng.random(40) < 0.6
    e = clt_estimate(v, 1e9, "avg", mask=mask, fpc=False)
    u = mask.astype(float)
    R = (u * v).sum() / u.sum()
    z = u * v - R * u
    direct = np.var(z, ddof=1) / (u.mean() ** 2) / 40
    assert e.point == pytest.approx(R)
    assert e.variance == pytest.approx(direct, rel=1e-9)


@pytest.mark.parametrize("agg", ["sum", "count", "avg"])
def test_stratified_equals_per_group_haas(agg):
    rng = np.random.default_rng(1)
    sizes = [1, 2, 5, 12]
    N = [1, 9, 40, 12]
    g = np.repeat(np.arange(4), sizes)
    v = rng.normal(5, 2, size=g.shape[0])
    v[3] = np.nan
    m = ~np.isnan(v) & (rng.random(g.shape[0]) < 0.8)
    m[0] = True
    y = np.where(m, np.nan_to_num(v), 0.0)
    point, var = stratified_clt(agg, g, g, 4, np.array(N, float), y, m)
    for k in range(4):
        sel = g == k
        ref = clt_estimate(v[sel], N[k], agg, mask=m[sel])
        np.testing.assert_allclose([point[k], var[k]], [ref.point, ref.variance], rtol=1e-9, atol=1e-12)


def _coverage(agg, where=False, trials=400, N=2000, n=100, seed=0):
    rng = np.random.default_rng(seed)
    pop = rng.gamma(2.0, 50.0, size=N)
    flag = rng.random(N) < 0.3
    if agg == "sum":
        truth = pop[flag].sum() if where else pop.sum()
    elif agg == "avg":
        truth = pop[flag].mean() if where else pop.mean()
    else:
        truth = float(flag.sum()) if where else float(N)
    # every trial is one "group" (its own stratum) of the same population: one vectorised call
    idx = np.concatenate([rng.choice(N, n, replace=False) for _ in range(trials)])
    pdf = pd.DataFrame({"trial": np.repeat(np.arange(trials), n), "x": pop[idx], "w": flag[idx], "_n_g": N})
    est = estimate_groups(pdf, ["trial"], [(agg, "x")], method="clt", where="w" if where else None)
    lo, hi = est.frame[f"{agg}(x)_lo"], est.frame[f"{agg}(x)_hi"]
    return float(((lo <= truth) & (truth <= hi)).mean())


@pytest.mark.parametrize("agg,where", [("sum", False), ("avg", False), ("sum", True), ("avg", True),
                                       ("count", True)])
def test_clt_interval_coverage(agg, where):
    cov = _coverage(agg, where)
    assert 0.90 <= cov <= 0.99, cov


def test_normal_pass_probability_ops():
    mu, se = np.array([10.0]), np.array([2.0])
    assert normal_pass_probability(mu, se, ">", 10.0)[0] == pytest.approx(0.5)
    assert normal_pass_probability(mu, se, ">=", 8.0)[0] == pytest.approx(norm.cdf(1.0))
    assert normal_pass_probability(mu, se, "<", 12.0)[0] == pytest.approx(norm.cdf(1.0))
    assert normal_pass_probability(mu, se, "<=", 12.0)[0] == pytest.approx(norm.cdf(1.0))
    assert normal_pass_probability(mu, se, "=", 10.0)[0] == 0.0
    assert normal_pass_probability(mu, se, "!=", 10.0)[0] == 1.0
    assert normal_pass_probability(mu, se, "between", 8.0, 12.0)[0] == pytest.approx(norm.cdf(1) - norm.cdf(-1))


def test_normal_pass_probability_exact_and_null():
    mu = np.array([10.0, 10.0, np.nan])
    se = np.array([0.0, 0.0, 1.0])
    assert normal_pass_probability(mu, se, ">", 10.0).tolist() == [0.0, 0.0, 0.0]
    assert normal_pass_probability(mu, se, ">=", 10.0).tolist() == [1.0, 1.0, 0.0]
    assert normal_pass_probability(mu, se, "=", 10.0).tolist() == [1.0, 1.0, 0.0]
    assert normal_pass_probability(mu, se, "!=", 10.0).tolist() == [0.0, 0.0, 0.0]
    assert compare(np.array([np.nan]), "!=", 1.0).tolist() == [False]
