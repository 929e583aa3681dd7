"""Sketch-size estimators: the paper's worked example, brute-force checks, synthetic tables, properties."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from estimators.aggregates import estimate_groups

from estimators.having import Cmp
from estimators.sketch_size import (
    estimate_alpha, estimate_size, expected_distinct_fragments, group_windows, size_for_having,
    touch_probability, unseen_touch_probability)

CRIMES = pd.DataFrame(
    [(3, 1, 2010, 88), (4, 1, 2013, 73), (4, 1, 2013, 101), (8, 6, 2015, 86), (8, 6, 2015, 96),
     (2, 7, 2016, 157), (7, 2, 2022, 83), (7, 9, 2023, 58)],
    columns=["pid", "month", "year", "numcrimes"])
GB = ["pid", "month", "year"]
# digest §1.9: p1=[1,3] p2=[4,6] p3=[7,9]; m1=[1,4] m2=[5,8] m3=[9,12]; y1=[2010,2012] y2=[2013,2020] y3=[2021,2024]
BOUNDS = {"pid": [1, 4, 7, 10], "month": [1, 5, 9, 13], "year": [2010, 2013, 2021, 2025]}
NAMES = {"pid": ["p1", "p2", "p3"], "month": ["m1", "m2", "m3"], "year": ["y1", "y2", "y3"]}


def frag_of(attr, values):
    return [NAMES[attr][int(np.searchsorted(BOUNDS[attr], v, side="right")) - 1] for v in values]


@pytest.mark.parametrize("method", ["bootstrap", "clt"])
@pytest.mark.parametrize("point_rule", ["p>=0.5", "estimate"])
def test_fig6_year_month_pid_selection(method, point_rule):
    sample = CRIMES.iloc[[0, 2, 3, 5, 6, 7]].copy()
    sample["_n_g"] = [1, 2, 2, 1, 1, 1]
    est = estimate_groups(sample, GB, [("sum", "numcrimes")], method=method)
    having = Cmp("sum(numcrimes)", ">=", 100)
    result = {}
    for attr in ("pid", "month", "year"):
        s = sample.assign(frag=frag_of(attr, sample[attr]))
        sizes = pd.Series(frag_of(attr, CRIMES[attr])).value_counts().to_dict()
        result[attr] = size_for_having(s, est, having, sizes, determined=True, point_rule=point_rule)
    # digest §1.9 / Fig. 6c: pid {p1,p2,p3} 8 rows 100 %, month {m1,m2} 7 rows 87.5 %, year {y2} 5 rows 62.5 %
    assert set(result["pid"].point_fragments) == {"p1", "p2", "p3"}
    assert set(result["month"].point_fragments) == {"m1", "m2"}
    assert set(result["year"].point_fragments) == {"y2"}
    assert {a: r.rows_point for a, r in result.items()} == {"pid": 8, "month": 7, "year": 5}
    assert {a: r.selectivity_point for a, r in result.items()} == {"pid": 1.0, "month": 0.875, "year": 0.625}
    assert {a: r.fragments_point for a, r in result.items()} == {"pid": 3, "month": 2, "year": 1}
    # g1 and g2 show one of their two rows: under the bootstrap their sums carry the pooled
    # variance (``estimators.small_groups``), so pid's interval (g2 alone holds p3) holds the point
    # but is not a point and not labelled exact; the CLT keeps a singleton's zero standard error
    for r in result.values():
        assert r.ci_lo <= r.rows_point <= r.ci_hi
        assert not r.exact or r.ci_lo == r.ci_hi
    if method == "bootstrap":
        assert result["pid"].ci_hi > result["pid"].ci_lo and not result["pid"].exact
    assert min(result, key=lambda a: result[a].selectivity_expected) == "year"


def test_exact_mapping_reproduces_algorithm2_for_a_non_groupby_candidate():
    # candidate numcrimes (not a group-by attribute), ranges [0,80) [80,100) [100,200)
    bounds = [0, 80, 100, 200]
    frag = lambda v: int(np.searchsorted(bounds, v, side="right")) - 1  # noqa: E731
    full = CRIMES.assign(frag=CRIMES.numcrimes.map(frag))
    sample = full.iloc[[0, 2, 3, 5, 6, 7]].assign(_n_g=[1, 2, 2, 1, 1, 1])
    est = estimate_groups(sample, GB, [("sum", "numcrimes")])
    sizes = full.frag.value_counts().to_dict()
    mapping = full[GB + ["frag"]].drop_duplicates()
    r = size_for_having(sample, est, Cmp(0, ">=", 100), sizes, mapping=mapping)
    # provenance rows g1,g2,g3 have numcrimes 73,101,86,96,157 -> fragments 0,1,2 -> all 8 rows
    assert r.touch == "mapping" and r.rows_point == 8 and set(r.point_fragments) == {0, 1, 2}
    only_sample = size_for_having(sample, est, Cmp(0, ">=", 100), sizes, determined=True)
    assert only_sample.rows_point < r.rows_point  # the sample misses g1's 73 (fragment 0)


def _brute_expectation(p, frags_of_group, sizes):
    G = len(p)
    e_rows = e_frags = 0.0
    for passes in itertools.product([0, 1], repeat=G):
        prob = np.prod([p[g] if s else 1 - p[g] for g, s in enumerate(passes)])
        covered = set().union(*[frags_of_group[g] for g in range(G) if passes[g]])
        e_rows += prob * sum(sizes[r] for r in covered)
        e_frags += prob * len(covered)
    return e_rows, e_frags


@pytest.mark.parametrize("seed", range(4))
def test_expected_size_equals_brute_force_enumeration(seed):
    rng = np.random.default_rng(seed)
    G, F = 6, 5
    sizes = {r: int(rng.integers(1, 50)) for r in range(F)}
    frags_of_group = [set(rng.choice(F, int(rng.integers(1, 4)), replace=False).tolist()) for _ in range(G)]
    p = rng.random(G).round(2)
    p[0], p[1] = 1.0, 0.0
    mapping = pd.DataFrame([(g, r) for g in range(G) for r in frags_of_group[g]], columns=["g", "frag"])
    sample = pd.DataFrame({"g": range(G), "frag": [min(f) for f in frags_of_group]})
    groups = pd.DataFrame({"g": range(G), "p": p})
    est = estimate_size(sample, groups, sizes, group_cols=["g"], mapping=mapping)
    rows, frags = _brute_expectation(p, frags_of_group, sizes)
    assert est.rows_expected == pytest.approx(rows, rel=1e-12)
    assert est.fragments_expected == pytest.approx(frags, rel=1e-12)
    assert est.selectivity_expected == pytest.approx(rows / sum(sizes.values()))
    # point estimate = fragments of the groups with p >= 0.5
    want = set().union(*[frags_of_group[g] for g in range(G) if p[g] >= 0.5])
    assert set(est.point_fragments) == want
    assert est.method == "normal" and 0 <= est.ci_lo <= est.rows_expected <= est.ci_hi <= sum(sizes.values())


def test_replicate_interval_covers_the_replicated_sizes():
    sizes = {0: 10, 1: 20, 2: 30, 3: 40}
    sample = pd.DataFrame({"g": [0, 1, 2, 3], "frag": [0, 1, 2, 3]})
    reps = np.zeros((100, 4), dtype=bool)
    reps[:, 0] = True
    reps[:50, 3] = True
    groups = pd.DataFrame({"g": range(4), "p": reps.mean(axis=0)})
    r = estimate_size(sample, groups, sizes, group_cols=["g"], determined=True, pass_replicates=reps)
    assert r.method == "replicates"
    assert (r.ci_lo, r.ci_hi) == (10.0, 50.0)
    assert r.rows_expected == pytest.approx(30.0)
    assert r.fragments_point == 2  # p = 0.5 counts as passing


def test_expected_distinct_fragments_brute_force():
    q = np.array([0.5, 0.3, 0.2])
    N = 4
    brute = 0.0
    for seq in itertools.product(range(3), repeat=N):
        brute += np.prod(q[list(seq)]) * len(set(seq))
    assert expected_distinct_fragments(q, N) == pytest.approx(brute, rel=1e-12)


@pytest.mark.parametrize("alpha", [0.7, 3.0, 25.0])
def test_dirichlet_touch_probability_equals_polya_urn_enumeration(alpha):
    pi = np.array([0.5, 0.3, 0.15, 0.05])
    m = np.array([2, 0, 1, 0])
    n, K = int(m.sum()), 4
    miss = np.zeros(4)
    for seq in itertools.product(range(4), repeat=K):
        counts = m.astype(float).copy()
        prob = 1.0
        for j, r in enumerate(seq):
            prob *= (alpha * pi[r] + counts[r]) / (alpha + n + j)
            counts[r] += 1
        miss += prob * np.array([r not in seq for r in range(4)])
    t = touch_probability(m, n, n + K, pi, alpha)
    np.testing.assert_allclose(t[m == 0], 1 - miss[m == 0], rtol=1e-10)
    assert (t[m > 0] == 1).all()
    # limits: alpha -> inf is iid from pi, alpha = 0 never leaves the observed fragments
    np.testing.assert_allclose(unseen_touch_probability([n], [K], pi, np.inf)[0], 1 - (1 - pi) ** K)
    assert (unseen_touch_probability([n], [K], pi, 0.0) == 0).all()


def test_model_is_calibrated_on_data_drawn_from_the_model():
    """Groups drawn from Dir(alpha*pi): the posterior expectation of each group's distinct fragments,
    summed over many groups, matches the realised count (the derivation is exact under the model)."""
    rng = np.random.default_rng(0)
    F, alpha = 40, 4.0
    pi = rng.dirichlet(np.ones(F))
    expected = realised = 0.0
    for _ in range(400):
        N = int(rng.integers(10, 60))
        q = rng.dirichlet(alpha * pi)
        rows = rng.choice(F, N, p=q)
        n = max(1, math.ceil(0.1 * N))
        seen = rows[:n]  # rows are iid, so the first n are a uniform sample
        m = np.bincount(seen, minlength=F)
        expected += touch_probability(m, n, N, pi, alpha).sum()
        realised += len(set(rows.tolist()))
    assert expected == pytest.approx(realised, rel=0.04)


def test_estimate_alpha_limits():
    assert estimate_alpha(np.array([3, 2]), np.array([3, 2]), 0.1) == 0.0       # every pair shares
    assert estimate_alpha(np.array([1, 1, 1]), np.array([3]), 0.1) == np.inf    # no pair shares
    assert estimate_alpha(np.array([1]), np.array([1]), 0.1) == np.inf          # no information
    a = estimate_alpha(np.array([2, 1, 1]), np.array([4]), 0.0)                 # 2 of 12 ordered pairs
    assert (a * 0.0 + 1) / (a + 1) == pytest.approx(2 / 12)


def test_group_windows_german_tank():
    lo, hi = group_windows(np.array([0, 0, 1, 2]), np.array([10, 14, 3, 7]), np.array([3, 1, 1]), 3)
    # group 0: 3 rows spanning positions 10..14 (5 wide) -> extend by 5/2 each side
    assert (lo[0], hi[0]) == (7.5, 16.5)
    # one-row groups use the median estimated width 5 * 4/2 = 10 -> +-4.5
    assert (lo[1], hi[1]) == (-1.5, 7.5) and (lo[2], hi[2]) == (2.5, 11.5)


def test_group_windows_pool_noisy_two_row_widths():
    # 40 groups all 100 positions wide, two sampled rows each: a two-row span alone is off by ~71 %
    rng = np.random.default_rng(3)
    cg, cp = [], []
    for g in range(40):
        a, b = sorted(rng.integers(0, 100, 2))
        cg += [g, g]
        cp += [1000 * g + a, 1000 * g + b]
    lo, hi = group_windows(np.array(cg), np.array(cp, dtype=float), np.full(40, 2), 40)
    width = hi - lo + 1
    spans = np.array([cp[2 * g + 1] - cp[2 * g] + 1 for g in range(40)], dtype=float)
    own = spans * 3.0  # s (n+1)/(n-1)
    assert np.abs(width - 100).mean() < 0.6 * np.abs(own - 100).mean()  # pooled: closer to the truth
    assert (width >= spans).all()  # never narrower than what was seen


def test_group_windows_keep_precise_heterogeneous_widths():
    # groups of 30 sampled rows, widths 10 and 200: well measured, not pulled to a common width
    rng = np.random.default_rng(4)
    cg, cp, true = [], [], []
    for g in range(20):
        w = 10 if g % 2 else 200
        true.append(w)
        cg += [g] * 30
        cp += list(1000 * g + rng.integers(0, w, 30))
    lo, hi = group_windows(np.array(cg), np.array(cp, dtype=float), np.full(20, 30), 20)
    width = hi - lo + 1
    assert np.all(np.abs(width / np.array(true) - 1) < 0.3)


def _synthetic(seed, kind, F=500, G=300, theta=0.1):
    rng = np.random.default_rng(seed)
    parts = []
    for g in range(G):
        N = int(rng.integers(30, 300))
        home = int(rng.integers(0, F - 20))
        f = rng.integers(0, F, N) if kind == "independent" else home + rng.integers(0, 10, N)
        parts.append(pd.DataFrame({"g": g, "frag": f}))
    df = pd.concat(parts, ignore_index=True)
    df["_n_g"] = df.groupby("g")["g"].transform("size")
    sizes = df["frag"].value_counts().reindex(range(F), fill_value=0)
    keep = np.concatenate([rng.choice(ix, max(1, math.ceil(theta * len(ix))), replace=False)
                           for ix in df.groupby("g").indices.values()])
    passing = rng.random(G) < 0.1
    groups = pd.DataFrame({"g": range(G), "p": passing.astype(float), "N": df.groupby("g").size().to_numpy()})
    truth = df.loc[df.g.isin(np.flatnonzero(passing)), "frag"].unique()
    return df, df.loc[np.sort(keep)], groups, sizes, truth


@pytest.mark.parametrize("kind", ["correlated", "independent"])
def test_unseen_row_model_on_synthetic_table(kind):
    df, sample, groups, sizes, truth = _synthetic(0, kind)
    true_rows = sizes[truth].sum()
    model = estimate_size(sample, groups, sizes, group_cols=["g"])
    sample_only = estimate_size(sample, groups, sizes, group_cols=["g"], alpha=0.0)
    exact = estimate_size(sample, groups, sizes, group_cols=["g"], mapping=df[["g", "frag"]].drop_duplicates())
    assert exact.rows_expected == true_rows and exact.fragments_point == len(truth)
    assert model.touch == "model"
    assert abs(model.fragments_expected - len(truth)) / len(truth) < 0.1
    assert abs(model.rows_expected - true_rows) / true_rows < 0.1
    # the sample alone misses fragments: a clear underestimate, and the model is much closer
    assert sample_only.fragments_expected < 0.9 * len(truth)
    assert abs(model.rows_expected - true_rows) < 0.5 * abs(sample_only.rows_expected - true_rows)


def test_unknown_fragment_is_rejected():
    with pytest.raises(ValueError):
        estimate_size(pd.DataFrame({"g": [0], "frag": [9]}), pd.DataFrame({"g": [0], "p": [1.0]}),
                      {0: 1}, group_cols=["g"])


# --- properties -----------------------------------------------------------------------------------

@st.composite
def instances(draw):
    G = draw(st.integers(1, 6))
    F = draw(st.integers(1, 6))
    sizes = draw(st.lists(st.integers(0, 30), min_size=F, max_size=F))
    if sum(sizes) == 0:
        sizes[0] = 1
    rows = draw(st.lists(st.tuples(st.integers(0, G - 1), st.integers(0, F - 1)), min_size=1, max_size=15))
    p = draw(st.lists(st.floats(0, 1), min_size=G, max_size=G))
    N_extra = draw(st.lists(st.integers(0, 20), min_size=G, max_size=G))
    return G, F, sizes, rows, p, N_extra


def _run(inst, determined, p=None):
    G, F, sizes, rows, p0, N_extra = inst
    sample = pd.DataFrame(rows, columns=["g", "frag"])
    n = sample.groupby("g").size().reindex(range(G), fill_value=0).to_numpy()
    groups = pd.DataFrame({"g": range(G), "p": p0 if p is None else p, "N": n + np.array(N_extra)})
    return estimate_size(sample, groups, dict(enumerate(sizes)), group_cols=["g"], determined=determined)


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=instances(), determined=st.booleans(), bump=st.integers(0, 5), delta=st.floats(0, 1))
def test_size_properties(inst, determined, bump, delta):
    G, F, sizes, rows, p, _ = inst
    r = _run(inst, determined)
    total = sum(sizes)
    assert -1e-9 <= r.rows_expected <= total + 1e-9
    assert -1e-9 <= r.fragments_expected <= F + 1e-9
    assert 0 <= r.selectivity_expected <= 1 + 1e-12
    assert 0 <= r.ci_lo <= r.ci_hi <= total + 1e-9
    P = r.fragment_probability.to_numpy()
    assert ((P >= 0) & (P <= 1)).all()
    if determined:
        # Frechet bounds per fragment: max_g p_g <= P(r in sketch) <= min(1, sum_g p_g)
        touch = {(g, f) for g, f in rows}
        for f in range(F):
            ps = [p[g] for g in range(G) if (g, f) in touch]
            lo, hi = (max(ps), min(1.0, sum(ps))) if ps else (0.0, 0.0)
            assert lo - 1e-9 <= P[f] <= hi + 1e-9
    # monotone in p for a fixed prior mean: raising one group's p never shrinks the expected size.
    # The passing groups' prior (size.PASS_PRIOR) depends on p itself, so it is checked without it:
    # moving prior mass towards a newly passing group's fragments can take it from another's.
    import estimators.sketch_size as size_mod

    g = bump % G
    p2 = list(p)
    p2[g] = min(1.0, p2[g] + delta)
    size_mod.PASS_PRIOR = False
    try:
        r, r2 = _run(inst, determined), _run(inst, determined, p=p2)
    finally:
        size_mod.PASS_PRIOR = True
    assert r2.rows_expected >= r.rows_expected - 1e-9
    assert r2.fragments_expected >= r.fragments_expected - 1e-9


def _two_kinds(seed, F=400, G=600, theta=0.05):
    """Groups of two kinds whose rows fall on interleaved fragments (kind 0 on even fragments, kind 1
    on odd ones; flights: busy hours carry other flight numbers than quiet ones), so every group's
    window spans the table.  Only kind-0 groups pass."""
    rng = np.random.default_rng(seed)
    kind = np.arange(G) % 2
    N = rng.integers(20, 80, G)
    g = np.repeat(np.arange(G), N)
    frag = 2 * rng.integers(0, F // 2, g.size) + kind[g]
    df = pd.DataFrame({"g": g, "frag": frag})
    sizes = df["frag"].value_counts().reindex(range(F), fill_value=0)
    keep = np.concatenate([rng.choice(ix, max(1, math.ceil(theta * len(ix))), replace=False)
                           for ix in df.groupby("g").indices.values()])
    groups = pd.DataFrame({"g": range(G), "p": (kind == 0).astype(float), "N": N})
    truth = df.loc[kind[df.g] == 0, "frag"].unique()
    return df.loc[np.sort(keep)], groups, sizes, truth


def test_unseen_rows_of_passing_groups_follow_the_passing_groups_fragments(monkeypatch):
    """With the table's distribution as the prior mean, the unseen rows of the passing groups are
    spread over every fragment and the sketch looks twice its size; the passing groups' own sampled
    fragments (``passing_prior``) keep most of them on the fragments that kind of group uses.  Not
    all: the leave-one-out share of the table prior (~2 %) still leaks ~14,000 unseen rows into
    the other kind's fragments, so the estimate is 1.6x, not 1.0x."""
    import estimators.sketch_size as size_mod

    sample, groups, sizes, truth = _two_kinds(5)
    true_rows = sizes[truth].sum()
    monkeypatch.setattr(size_mod, "PASS_PRIOR", False)
    table_prior = estimate_size(sample, groups, sizes, group_cols=["g"])
    monkeypatch.setattr(size_mod, "PASS_PRIOR", True)
    pass_prior = estimate_size(sample, groups, sizes, group_cols=["g"])
    assert table_prior.touch == pass_prior.touch == "model"
    assert table_prior.rows_expected > 1.9 * true_rows
    assert true_rows < pass_prior.rows_expected < table_prior.rows_expected - 0.25 * true_rows


def test_passing_prior_weighs_the_table_by_how_well_other_groups_predict():
    """The table's weight is what the other passing groups' fragments cannot predict: little when
    all passing groups share a few fragments, nearly all when every passing row is somewhere new;
    and never so little that a fragment the table reaches becomes unreachable."""
    from estimators.sketch_size import passing_prior

    F = 50
    pi = np.full(F, 1.0 / F)
    g = np.repeat(np.arange(40), 3)
    shared = passing_prior(np.ones(40), g, np.tile([0, 1, 2], 40), np.ones(120), pi, F)
    assert shared[:3].sum() > 0.98 and (shared[3:] > 0).all()
    fresh = passing_prior(np.ones(40), np.arange(40), np.arange(40), np.ones(40), pi, F)
    assert fresh.max() / fresh.min() < 1.05      # every row somewhere new: the table's distribution
    two = passing_prior(np.ones(2), np.array([0, 1]), np.array([0, 0]), np.ones(2), pi, F)
    assert two[1:].sum() > 0.3 and (two > 0).all()  # two rows in one fragment prove little
    # groups that cannot pass do not shape the prior; one passing group is too few to learn from
    p = np.zeros(40)
    p[0] = 1.0
    assert passing_prior(p, g, np.tile([0, 1, 2], 40), np.ones(120), pi, F) is None
