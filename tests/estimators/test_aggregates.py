"""Per-group estimates, predicates, pass probabilities and nested aggregation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from estimators.aggregates import estimate_groups
from estimators.having import And, Cmp, Not, Or, pass_matrix, pass_probability, point_pass
from estimators.nested import estimate_nested

# --- the paper's running example (digest §1.9, Fig. 5/6) -----------------------------------------

CRIMES = pd.DataFrame(
    [(3, 1, 2010, 88), (4, 1, 2013, 73), (4, 1, 2013, 101), (8, 6, 2015, 86), (8, 6, 2015, 96),
     (2, 7, 2016, 157), (7, 2, 2022, 83), (7, 9, 2023, 58)],
    columns=["pid", "month", "year", "numcrimes"])
GB = ["pid", "month", "year"]
# group name -> key, in the digest's numbering g0..g5
GROUPS = {"g0": (3, 1, 2010), "g1": (4, 1, 2013), "g2": (8, 6, 2015), "g3": (2, 7, 2016),
          "g4": (7, 2, 2022), "g5": (7, 9, 2023)}


def fig5_sample() -> pd.DataFrame:
    """Fig. 5b: one sampled row per group (g1: 101, g2: 86), with the population group sizes."""
    s = CRIMES.iloc[[0, 2, 3, 5, 6, 7]].copy()
    s["_n_g"] = [1, 2, 2, 1, 1, 1]
    return s


def by_group(est, values) -> dict:
    keys = [tuple(int(x) for x in r) for r in est.frame[GB].to_numpy()]
    inv = {v: k for k, v in GROUPS.items()}
    return {inv[k]: v for k, v in zip(keys, values)}


@pytest.mark.parametrize("method", ["bootstrap", "clt"])
def test_fig6_estimates_and_qualifying_groups(method):
    est = estimate_groups(fig5_sample(), GB, [("sum", "numcrimes")], method=method)
    got = by_group(est, est.point("sum(numcrimes)"))
    # digest §2.6 worked example: EST_SUM = 88, 202, 172, 157, 83, 58
    assert got == {"g0": 88, "g1": 202, "g2": 172, "g3": 157, "g4": 83, "g5": 58}
    having = Cmp("sum(numcrimes)", ">=", 100)
    p = by_group(est, pass_probability(est, having))
    assert {g for g, v in p.items() if v >= 0.5} == {"g1", "g2", "g3"}
    exact = {g for g in GROUPS if g not in ("g1", "g2")}  # 1 of 1 rows sampled
    assert {p[g] for g in exact} <= {0.0, 1.0}
    if method == "bootstrap":  # 1 of 2 rows: the pooled variance leaves their pass uncertain
        assert p["g2"] < 1.0 and min(p["g1"], p["g2"]) >= 0.5  # 172 +- 48 against 100: a miss is possible
        se = by_group(est, est.stderr("sum(numcrimes)"))
        assert se["g1"] > 0 and se["g2"] > 0
    assert by_group(est, point_pass(est, having)) == {g: g in ("g1", "g2", "g3") for g in GROUPS}
    # g0, g3, g4, g5 are fully sampled (1 of 1 rows): exact
    assert by_group(est, est.frame["exact"]) == {g: g not in ("g1", "g2") for g in GROUPS}


def test_fully_sampled_groups_are_exact_for_every_predicate():
    rng = np.random.default_rng(5)
    pdf = pd.DataFrame({"g": rng.integers(0, 8, 120), "x": rng.normal(50, 20, 120)})
    pdf["_n_g"] = pdf.groupby("g")["g"].transform("size")
    truth = pdf.groupby("g")["x"].agg(["sum", "mean", "count", "min", "max"])
    aggs = [("sum", "x"), ("avg", "x"), ("count", None), ("min", "x"), ("max", "x")]
    for method in ("bootstrap", "clt"):
        est = estimate_groups(pdf, ["g"], aggs, method=method, B=30)
        assert est.frame["exact"].all()
        np.testing.assert_allclose(est.point("sum(x)"), truth["sum"])
        np.testing.assert_allclose(est.point("avg(x)"), truth["mean"])
        np.testing.assert_allclose(est.point("count(*)"), truth["count"])
        for name in est.names:
            assert (est.stderr(name) == 0).all()
        pred = Or([And([Cmp(0, ">", 300), Cmp("max(x)", "<", 90)]), Cmp("count(*)", "between", 14, 16)])
        p = pass_probability(est, pred).to_numpy()
        want = (((truth["sum"] > 300) & (truth["max"] < 90)) | truth["count"].between(14, 16)).to_numpy()
        assert set(np.unique(p)) <= {0.0, 1.0}
        np.testing.assert_array_equal(p == 1.0, want)


def _noisy_sample(seed=0, groups=5, n=20, N=400):
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(groups), n)
    x = rng.normal(100 + 10 * g, 30, size=g.shape[0])
    return pd.DataFrame({"g": g, "x": x, "y": rng.gamma(2, 3, size=g.shape[0]), "_n_g": N})


def test_bootstrap_conjunction_is_joint_per_replicate():
    est = estimate_groups(_noisy_sample(), ["g"], [("sum", "x"), ("avg", "y")], B=200, seed=3)
    a, b = Cmp("sum(x)", ">", 44000), Cmp("avg(y)", "<", 6.0)
    reps_x, reps_y = est.replicates["sum(x)"], est.replicates["avg(y)"]
    want_and = ((reps_x > 44000) & (reps_y < 6.0)).mean(axis=0)
    want_or = ((reps_x > 44000) | (reps_y < 6.0)).mean(axis=0)
    np.testing.assert_allclose(pass_probability(est, And([a, b])), want_and)
    np.testing.assert_allclose(pass_probability(est, Or([a, b])), want_or)
    np.testing.assert_allclose(pass_probability(est, Not(a)), 1 - (reps_x > 44000).mean(axis=0))
    assert pass_matrix(est, And([a, b])).shape == (200, 5)


def test_clt_same_aggregate_conjunction_is_an_interval_and_others_multiply():
    est = estimate_groups(_noisy_sample(), ["g"], [("sum", "x"), ("avg", "y")], method="clt")
    mu, se = est.point("sum(x)"), est.stderr("sum(x)")
    p = pass_probability(est, And([Cmp(0, ">", 42000), Cmp(0, "<=", 46000)])).to_numpy()
    np.testing.assert_allclose(p, norm.cdf((46000 - mu) / se) - norm.cdf((42000 - mu) / se), atol=1e-12)
    pa = pass_probability(est, Cmp(0, ">", 42000)).to_numpy()
    pb = pass_probability(est, Cmp(1, "<", 6.0)).to_numpy()
    np.testing.assert_allclose(pass_probability(est, And([Cmp(0, ">", 42000), Cmp(1, "<", 6.0)])), pa * pb)
    np.testing.assert_allclose(pass_probability(est, Or([Cmp(0, ">", 42000), Cmp(1, "<", 6.0)])),
                               1 - (1 - pa) * (1 - pb))
    np.testing.assert_allclose(pass_probability(est, Not(Cmp(0, ">", 42000))), 1 - pa)


def test_bootstrap_and_clt_agree_roughly():
    pdf = _noisy_sample(seed=1, groups=30, n=25, N=500)
    b = estimate_groups(pdf, ["g"], [("sum", "x"), ("avg", "x")], B=400, seed=1)
    c = estimate_groups(pdf, ["g"], [("sum", "x"), ("avg", "x")], method="clt")
    np.testing.assert_allclose(b.point("sum(x)"), c.point("sum(x)"))
    ratio = b.stderr("sum(x)") / c.stderr("sum(x)")
    assert 0.85 < ratio.mean() < 1.15
    pb = pass_probability(b, Cmp(0, ">", 60000)).to_numpy()
    pc = pass_probability(c, Cmp(0, ">", 60000)).to_numpy()
    assert np.abs(pb - pc).max() < 0.2


def test_bootstrap_percentile_interval_coverage():
    rng = np.random.default_rng(8)
    pop = rng.gamma(2.0, 50.0, size=1000)
    trials, n = 300, 80
    idx = np.concatenate([rng.choice(1000, n, replace=False) for _ in range(trials)])
    pdf = pd.DataFrame({"t": np.repeat(np.arange(trials), n), "x": pop[idx], "_n_g": 1000})
    est = estimate_groups(pdf, ["t"], [("sum", "x")], B=200, seed=2)
    cov = ((est.frame["sum(x)_lo"] <= pop.sum()) & (pop.sum() <= est.frame["sum(x)_hi"])).mean()
    assert 0.88 <= cov <= 0.99


def test_where_predicate_and_group_existence():
    pdf = pd.DataFrame({"g": [1, 1, 2, 2, 3], "x": [5.0, 7.0, 1.0, 2.0, 4.0], "ok": [1, 0, 0, 0, 1],
                        "_n_g": [10, 10, 10, 10, 3]})
    for method in ("bootstrap", "clt"):
        est = estimate_groups(pdf, ["g"], [("sum", "x"), ("count", None)], method=method, where="ok")
        assert est.frame["exists"].tolist() == [True, False, True]
        assert est.point("sum(x)")[0] == pytest.approx(25.0)   # 10/2 * 5
        assert np.isnan(est.point("sum(x)")[1])                # SUM over no rows is NULL
        cnt = est.point("count(*)")
        if method == "clt":  # Horvitz-Thompson: N_h c_h / n_h
            assert cnt.tolist() == pytest.approx([5.0, 0.0, 3.0])
        else:  # the beta-binomial of estimators.filtered_counts: seen rows plus a share of the unseen
            assert 1.0 < cnt[0] < 10.0 and cnt[1] == 0.0 and 1.0 < cnt[2] < 3.0
            assert cnt[0] < 5.0 and cnt[2] < 3.0  # pulled towards the pooled share (2 of 5 rows pass)
        # a group with no WHERE-passing sampled row satisfies nothing, not even its negation
        for pred in (Cmp(0, "<", 1e9), Not(Cmp(0, ">", 1e9)), Cmp(1, ">=", 0)):
            assert pass_probability(est, pred)[1] == 0.0


def test_min_max_sample_bound_rule():
    pdf = pd.DataFrame({"g": [1] * 4 + [2] * 4, "x": [1, 2, 3, 50, 1, 2, 3, 4.0], "_n_g": 100})
    est = estimate_groups(pdf, ["g"], [("max", "x"), ("min", "x")], B=100)
    # sample max 50 > 40 proves the population max > 40: no replicate falls below the sample max
    assert (est.replicates["max(x)"][:, 0] >= 50).all()
    assert pass_probability(est, Cmp("max(x)", ">", 40))[0] == 1.0
    assert pass_probability(est, Cmp("max(x)", "<", 40))[0] == 0.0
    # group 2: its sample never exceeds 4, but 96 of its rows are unseen and the pooled rows
    # reach 50 (``estimators.extremes``), so a max > 40 is possible, not excluded; MIN < 2 is
    # proven by the sampled 1
    assert 0.0 < pass_probability(est, Cmp("max(x)", ">", 40))[1] < 1.0
    assert pass_probability(est, Cmp("min(x)", "<", 2))[1] == 1.0
    assert pass_probability(est, Cmp("max(x)", "<", 3.5))[1] == 0.0   # the sampled 4 disproves it
    assert pass_probability(est, Cmp("max(x)", "=", 3.0))[1] == 0.0   # so does it for '= 3'
    clt = estimate_groups(pdf, ["g"], [("max", "x")], method="clt")
    assert pass_probability(clt, Cmp(0, ">", 40))[0] == 1.0


def test_row_order_does_not_change_the_estimates():
    pdf = _noisy_sample(seed=2)
    a = estimate_groups(pdf, ["g"], [("sum", "x"), ("max", "y")], B=40, seed=7)
    b = estimate_groups(pdf.sample(frac=1.0, random_state=3), ["g"], [("sum", "x"), ("max", "y")], B=40, seed=7)
    pd.testing.assert_frame_equal(a.frame, b.frame)
    for k in a.replicates:
        np.testing.assert_array_equal(a.replicates[k], b.replicates[k])
    c = estimate_groups(pdf, ["g"], [("sum", "x")], B=40, seed=8)
    assert not np.array_equal(a.replicates["sum(x)"], c.replicates["sum(x)"])


def test_uniform_sample_uses_domain_estimator():
    # a uniform sample (single stratum "{}", _n_g = table size) of a 1000-row table
    pdf = pd.DataFrame({"g": ["a", "a", "b", "c", "c", "c"], "x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                        "_n_g": 1000, "_stratum": "{}"})
    for method in ("bootstrap", "clt"):
        est = estimate_groups(pdf, ["g"], [("sum", "x"), ("count", None), ("avg", "x")], method=method)
        w = 1000 / 6
        assert est.point("sum(x)").tolist() == pytest.approx([3 * w, 3 * w, 15 * w])
        assert est.point("count(*)").tolist() == pytest.approx([2 * w, w, 3 * w])
        assert est.point("avg(x)").tolist() == pytest.approx([1.5, 3.0, 5.0])
        assert not est.frame["exact"].any()
    est = estimate_groups(pdf, ["g"], [("sum", "x")], method="clt")
    # domain variance: y = x * [row in group] over all 6 rows of the stratum
    y = np.array([1.0, 2.0, 0, 0, 0, 0])
    want = 1000 ** 2 * (1 - 6 / 1000) * np.var(y, ddof=1) / 6
    assert est.stderr(0)[0] ** 2 == pytest.approx(want)


def test_bad_inputs():
    pdf = pd.DataFrame({"g": [1, 1], "x": [1.0, 2.0], "_n_g": [5, 6]})
    with pytest.raises(ValueError):
        estimate_groups(pdf, ["g"], [("sum", "x")])  # _n_g not constant within the stratum
    with pytest.raises(ValueError):
        estimate_groups(pdf.drop(columns="_n_g"), ["g"], [("sum", "x")])
    with pytest.raises(ValueError):
        estimate_groups(pdf.assign(_n_g=1), ["g"], [("sum", "x")])  # more sample rows than population
    with pytest.raises(ValueError):
        Cmp(0, "~", 1)
    est = estimate_groups(pdf.assign(_n_g=5), ["g"], [("sum", "x")])
    with pytest.raises(KeyError):
        pass_probability(est, Cmp("avg(x)", ">", 1))
    assert est.resolve("SUM(x)") == "sum(x)"


# --- nested aggregation ---------------------------------------------------------------------------

def _nested_table(seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for region in range(4):
        for store in range(6):
            k = int(rng.integers(20, 60))
            rows.append(pd.DataFrame({"region": region, "store": store,
                                      "amount": rng.gamma(2.0, 5.0 + 3 * region + store, size=k)}))
    return pd.concat(rows, ignore_index=True)


def _nested_truth(df, c1, c2):
    inner = df.groupby(["region", "store"])["amount"].sum().reset_index()
    inner = inner[inner["amount"] > c1]
    outer = inner.groupby("region").agg(cnt=("store", "size"), tot=("amount", "sum")).reset_index()
    return inner, outer[outer["cnt"] >= c2]


@pytest.mark.parametrize("method", ["bootstrap", "clt"])
def test_nested_on_fully_sampled_data_is_exact(method):
    df = _nested_table()
    df["_n_g"] = df.groupby(["region", "store"])["amount"].transform("size")
    inner = estimate_groups(df, ["region", "store"], [("sum", "amount")], method=method, B=20)
    c1, c2 = 400.0, 3
    nest = estimate_nested(inner, ["region"], [("count", None), ("sum", "sum(amount)")],
                           inner_having=Cmp(0, ">", c1), outer_having=Cmp("count(*)", ">=", c2))
    t_inner, t_outer = _nested_truth(df, c1, c2)
    prov = {(r, s) for r, s in t_inner[["region", "store"]].itertuples(index=False) if r in set(t_outer.region)}
    got = {(int(r), int(s)) for r, s, p in nest.inner_frame[["region", "store", "p"]].itertuples(index=False) if p == 1}
    assert got == prov
    assert set(nest.inner_frame["p"]) <= {0.0, 1.0}
    cnt = dict(zip(nest.outer.frame["region"], nest.outer.frame["count(*)"]))
    truth_cnt = t_inner.groupby("region").size()
    for r in range(4):
        assert cnt[r] == truth_cnt.get(r, 0)
    assert set(np.flatnonzero(nest.p_outer.to_numpy() == 1)) == set(t_outer.region)


def test_nested_sampled_propagates_replicates():
    df = _nested_table(seed=1)
    df["_n_g"] = df.groupby(["region", "store"])["amount"].transform("size")
    rng = np.random.default_rng(0)
    keep = np.concatenate([rng.choice(ix, max(1, int(np.ceil(0.25 * len(ix)))), replace=False)
                           for ix in df.groupby(["region", "store"]).indices.values()])
    sample = df.loc[np.sort(keep)]
    inner = estimate_groups(sample, ["region", "store"], [("sum", "amount")], B=100, seed=4)
    ih, oh = Cmp(0, ">", 350.0), Cmp("sum(sum(amount))", ">", 1500.0)
    nest = estimate_nested(inner, ["region"], [("sum", "sum(amount)")], inner_having=ih, outer_having=oh)
    ip = pass_matrix(inner, ih)
    # per replicate: outer sum = sum of the passing inner replicates of that region
    reg = inner.frame["region"].to_numpy()
    reps = inner.replicates["sum(amount)"]
    for r in range(4):
        want = np.where(ip[:, reg == r], reps[:, reg == r], 0).sum(axis=1)
        has = ip[:, reg == r].any(axis=1)
        np.testing.assert_allclose(nest.outer.replicates["sum(sum(amount))"][has, r], want[has])
    # provenance needs both levels: never more likely than passing the inner HAVING alone
    assert (nest.inner_frame["p"].to_numpy() <= ip.mean(axis=0) + 1e-12).all()
    assert nest.provenance.shape == (100, len(inner.frame))
    # the point estimate is Algorithm 1 applied at both levels
    pt = point_pass(inner, ih)
    osum = pd.Series(np.where(pt, inner.point(0), 0)).groupby(reg).sum()
    want_pt = pt & (osum.to_numpy()[reg] > 1500.0)
    np.testing.assert_array_equal(nest.inner_frame["point_pass"].to_numpy(), want_pt)


# --- properties -----------------------------------------------------------------------------------


_OPS = [">", ">=", "<", "<=", "=", "!=", "between"]


@st.composite
def _samples_and_predicates(draw):
    n = draw(st.integers(1, 25))
    g = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    x = draw(st.lists(st.one_of(st.floats(-100, 100), st.just(float("nan"))), min_size=n, max_size=n))
    ok = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    pdf = pd.DataFrame({"g": g, "x": x, "ok": ok})
    extra = draw(st.lists(st.integers(0, 30), min_size=4, max_size=4))
    pdf["_n_g"] = pdf.groupby("g")["g"].transform("size") + pdf["g"].map(dict(enumerate(extra)))

    def cmp_():
        agg = draw(st.integers(0, 4))
        op = draw(st.sampled_from(_OPS))
        v = draw(st.floats(-500, 500))
        return Cmp(agg, op, v, v + draw(st.floats(0, 300)) if op == "between" else None)

    kind = draw(st.integers(0, 3))
    if kind == 0:
        pred = cmp_()
    elif kind == 1:
        pred = And([cmp_(), cmp_()])
    elif kind == 2:
        pred = Or([cmp_(), cmp_()])
    else:
        pred = Not(And([cmp_(), cmp_()]))
    return pdf, pred, draw(st.booleans())


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_samples_and_predicates(), method=st.sampled_from(["bootstrap", "clt"]))
def test_pass_probability_is_a_probability(case, method):
    pdf, pred, use_where = case
    aggs = [("sum", "x"), ("avg", "x"), ("count", None), ("min", "x"), ("max", "x")]
    est = estimate_groups(pdf, ["g"], aggs, method=method, B=20, where="ok" if use_where else None)
    p = pass_probability(est, pred).to_numpy()
    assert ((p >= 0) & (p <= 1)).all()
    # absent groups never pass; fully sampled groups are decided exactly, as by the point estimate
    assert (p[~est.frame["exists"].to_numpy()] == 0).all()
    exact = est.frame["exact"].to_numpy()
    np.testing.assert_array_equal(p[exact], point_pass(est, pred)[exact].astype(float))
