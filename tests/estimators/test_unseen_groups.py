"""Groups a uniform sample misses, on seeded synthetic tables whose true sketch size is computed.

A uniform sample at theta = 5 % of groups of 1-7 rows (an order's lines) holds about a fifth of
the groups.  The sketch's expected size must count the passing groups it missed (each sampled
group stands for ``1 / pi`` like it), not only those it shows; its interval must still cover.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from estimators.aggregates import estimate_groups
from estimators.having import Cmp, pass_matrix
from estimators.shrinkage import shrink_groups
from estimators.sketch_size import estimate_size, size_for_having
from estimators.unseen_groups import twin_weights

G, PER_FRAGMENT, THETA, DRAWS = 6000, 6, 0.05, 12


def _table(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = rng.integers(1, 8, G)
    g = np.repeat(np.arange(G), n)
    return pd.DataFrame({"g": g, "x": rng.gamma(2.0, 10.0, g.size)})


def _uniform(t: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Rows kept at rate THETA, each labelled with its group's size and key (the post-stratified
    uniform fallback of ``estimators.sampling``)."""
    rng = np.random.default_rng(seed)
    N = t.groupby("g")["g"].transform("size").to_numpy()
    keep = rng.random(len(t)) < THETA
    s = t[keep].copy()
    s["_n_g"] = N[keep]
    s["_stratum"] = s["g"].astype(str)
    s["frag"] = s["g"] // PER_FRAGMENT
    return s.reset_index(drop=True)


def _sizes(t: pd.DataFrame, op: str, q: float):
    truth = t.groupby("g")["x"].max() if op == ">" else t.groupby("g")["x"].min()
    c = float(truth.quantile(q))
    passing = truth[truth > c].index.to_numpy() if op == ">" else truth[truth < c].index.to_numpy()
    fsizes = np.bincount((t["g"] // PER_FRAGMENT).to_numpy(), minlength=G // PER_FRAGMENT).astype(float)
    return c, fsizes, float(fsizes[np.unique(passing // PER_FRAGMENT)].sum())


@pytest.mark.parametrize("op,q", [(">", 0.97), ("<", 0.03)])
def test_extreme_over_groups_a_uniform_sample_misses(op, q):
    """``HAVING max(x) > c`` / ``min(x) < c`` over 1-7 row groups, sampled uniformly: the expectation
    counts the missing passing groups (median error within 30 %, where counting the sampled groups
    alone is ~4x low) and the interval covers in at least 80 % of the draws."""
    t = _table(7)
    func = "max" if op == ">" else "min"
    c, fsizes, true_rows = _sizes(t, op, q)
    assert 0.02 < true_rows / fsizes.sum() < 0.4
    errs, hits = [], 0
    for d in range(DRAWS):
        s = _uniform(t, 300 + d)
        est = estimate_groups(s, ["g"], [(func, "x")], B=50, seed=d)
        est.unshrunk = dataclasses.replace(est, frame=est.frame.copy(),
                                           replicates={k: v.copy() for k, v in est.replicates.items()})
        shrink_groups(est, s, ["g"], aligned=True)
        having = Cmp(f"{func}(x)", op, c)
        e = size_for_having(s, est, having, fsizes, determined=True, seed=d, group_rate=THETA,
                            model_replicates=pass_matrix(est.unshrunk, having))
        errs.append(abs(e.rows_expected - true_rows) / true_rows)
        hits += e.ci_lo - 1e-9 <= true_rows <= e.ci_hi + 1e-9
        assert e.unseen_groups > 0 and not e.exact
    assert float(np.median(errs)) <= 0.30, errs
    assert hits / DRAWS >= 0.8, hits


def test_twins_weigh_small_groups_more():
    """A passing group of one row sampled at 5 % stands for 19 missing ones, one of 20 rows for ~0.56."""
    w = twin_weights(np.array([1.0, 1.0, 0.5]), np.array([1.0, 20.0, 1.0]), 0.05)
    assert np.allclose(w, [19.0, 0.95 ** 20 / (1 - 0.95 ** 20), 9.5])


def _whole(sample_g, frag, dec, p=None):
    sample = pd.DataFrame({"g": sample_g, "frag": frag})
    groups = pd.DataFrame({"g": np.arange(3), "p": np.ones(3) if p is None else p, "N": [5.0, 5.0, 5.0]})
    reps = np.ones((50, 3), dtype=bool)
    return estimate_size(sample, groups, np.full(4, 10.0), group_cols=["g"], pass_replicates=reps,
                         determined=True, decided_groups=np.asarray(dec))


def test_whole_table_is_exact_only_when_the_sample_proves_it():
    """Every replicate covers all four fragments; the size is exact when decided passing groups'
    sampled rows sit in each fragment, else the lower end leaves room below the whole table."""
    proven = _whole([0, 1, 2, 2], [0, 1, 2, 3], [True, True, True])
    assert proven.exact and proven.ci_lo == proven.ci_hi == 40.0
    open_ = _whole([0, 1, 2, 2], [0, 1, 2, 3], [True, True, False])  # group 2 holds fragments 2 and 3
    assert not open_.exact and open_.ci_hi == 40.0 and open_.ci_lo < 40.0
    assert open_.ci_lo >= 40.0 - 20.0


def test_a_point_below_the_table_is_exact_or_widened():
    """Groups whose fragments are all sampled (determined) and whose pass is decided: a point; the
    same replicates over groups a model maps and whose pass is undecided get an upper margin."""
    sample = pd.DataFrame({"g": [0, 1], "frag": [0, 1]})
    groups = pd.DataFrame({"g": [0, 1], "p": [1.0, 0.0], "N": [1.0, 1.0]})
    reps = np.tile([True, False], (50, 1))
    kw = dict(group_cols=["g"], pass_replicates=reps, determined=True)
    exact = estimate_size(sample, groups, np.full(4, 10.0), decided_groups=np.array([True, True]), **kw)
    assert exact.exact and exact.ci_lo == exact.ci_hi == 10.0
    open_ = estimate_size(sample, groups, np.full(4, 10.0), decided_groups=np.array([True, False]), **kw)
    assert not open_.exact and open_.ci_lo <= 10.0 < open_.ci_hi <= 40.0
