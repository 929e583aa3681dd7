"""Bootstrap replicates drawn ahead on a helper thread (``estimators.prefetch``).

Differential: whatever the prefetch serves must be bit for bit what the estimator draws inline,
the generator must be left where inline draws leave it, and a prefetch for another layout must not
be served.  The end-to-end test draws a fresh sample through ``advisor.estimation.size_estimates`` and checks that
the prefetch was claimed and that every size equals the estimate made with prefetching off.
"""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

import advisor.estimation.size_estimates as estimate_mod
from advisor.estimation.size_estimates import analyze, estimate
from advisor.plan.parse import parse_sql
from estimators import bootstrap as bs
from estimators import prefetch
from estimators.aggregates import estimate_groups
from estimate_helpers import grouped_table_context


def _sample(seed: int, n: int = 3000):
    """A stratified sample frame in shuffled row order: JSON-ish labels, per-stratum ``_n_g``."""
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 40, n)
    labels = np.array([f'{{"g":{x}}}' for x in g], dtype=object)
    N_of = rng.integers(1, 5, 40) * np.bincount(g, minlength=40) + 1
    return pd.DataFrame({"g": g, "v": rng.gamma(2.0, 5.0, n), "_stratum": labels, "_n_g": N_of[g]})


def _strata(pdf, seed: int = 0):
    """Per-stratum labels, sample sizes and population sizes, the strata in a shuffled order (as a
    draw numbers them by first appearance)."""
    by = pdf.groupby("_stratum").agg(k=("g", "size"), N=("_n_g", "first")).reset_index()
    by = by.iloc[np.random.default_rng(seed).permutation(len(by))]
    return by["_stratum"].to_numpy(), by["k"].to_numpy(), by["N"].to_numpy()


def _layout(pdf, **kw):
    return prefetch.layout(*_strata(pdf), **kw)


def _claims():
    return dict(prefetch.CLAIMED)


@pytest.fixture(autouse=True)
def _fresh_caches():
    bs._BLOCKS.clear()
    prefetch.claim(("none",))  # drop any pending prefetch of an earlier test
    yield
    bs._BLOCKS.clear()


def test_layout_is_the_one_estimate_groups_resamples():
    pdf = _sample(1)
    si, N = _layout(pdf)
    assert np.all(si[1:] >= si[:-1]) and si.shape[0] == len(pdf)
    # strata numbered in the labels' sorted order, N_h read from the rows
    order = sorted(set(pdf["_stratum"]))
    want_N = [float(pdf.loc[pdf["_stratum"] == lab, "_n_g"].iloc[0]) for lab in order]
    assert N.tolist() == want_N
    assert np.bincount(si).tolist() == [int((pdf["_stratum"] == lab).sum()) for lab in order]


def test_layout_gives_up_on_empty_strata_or_repeated_labels():
    assert prefetch.layout(np.array(["a", "b"], dtype=object), np.array([2, 0]), np.array([5, 6])) is None
    assert prefetch.layout(np.array(["a", "a"], dtype=object), np.array([2, 1]), np.array([5, 6])) is None
    assert prefetch.layout(np.array(["b", "a"], dtype=object), np.array([2, 1]), np.array([5, 6]))[1].tolist() == [6, 5]


@pytest.mark.parametrize("aggs", [[("sum", "v")], [("avg", "v"), ("count", None), ("max", "v")]])
def test_prefetched_groups_equal_inline_ones(aggs):
    pdf = _sample(2)
    lay = _layout(pdf)
    before = _claims()
    prefetch.start(lambda: lay, 50, 20_000, seed=7)  # 6 replicates a block: several blocks
    ahead = estimate_groups(pdf, ["g"], aggs, B=50, seed=7, block_cells=20_000)
    assert prefetch.CLAIMED["hit"] == before["hit"] + 1
    bs._BLOCKS.clear()
    inline = estimate_groups(pdf, ["g"], aggs, B=50, seed=7, block_cells=20_000)
    assert prefetch.CLAIMED["hit"] == before["hit"] + 1  # nothing pending: drawn inline
    pd.testing.assert_frame_equal(ahead.frame, inline.frame)
    for name in inline.replicates:
        assert np.array_equal(ahead.replicates[name], inline.replicates[name], equal_nan=True)


def test_prefetch_leaves_the_generator_where_inline_draws_do():
    pdf = _sample(3)
    s, N = _layout(pdf)
    prefetch.start(lambda: (s, N), 20, 10_000, seed=11)
    block = 10_000 // s.shape[0]
    r1 = np.random.default_rng(11)
    got = bs.replicate_blocks(s, N, 20, block, r1)
    bs._BLOCKS.clear()
    r2 = np.random.default_rng(11)
    want = bs.replicate_blocks(s, N, 20, block, r2)
    assert r1.bit_generator.state == r2.bit_generator.state
    assert r1.random() == r2.random()
    for (w1, d1), (w2, d2) in zip(got, want):
        assert np.array_equal(w1, w2) and np.array_equal(d1, d2)


def test_a_prefetch_for_another_layout_or_seed_is_not_served():
    pdf = _sample(4)
    labels, k, N = _strata(pdf)
    before = _claims()
    prefetch.start(lambda: prefetch.layout(labels, k, N * 2), 50, 1_000_000, seed=7)
    other = estimate_groups(pdf, ["g"], [("sum", "v")], B=50, seed=7)
    prefetch.start(lambda: prefetch.layout(labels, k, N), 50, 1_000_000, seed=8)
    bs._BLOCKS.clear()
    other2 = estimate_groups(pdf, ["g"], [("sum", "v")], B=50, seed=7)
    assert prefetch.CLAIMED["hit"] == before["hit"] and prefetch.CLAIMED["miss"] == before["miss"] + 2
    assert np.array_equal(other.replicates["sum(v)"], other2.replicates["sum(v)"], equal_nan=True)


@pytest.fixture(scope="module")
def ctx(spark, tmp_path_factory):
    return grouped_table_context(spark, tmp_path_factory.mktemp("pf"), seed=8, n=6000, groups=50, keys=3000)


def _fresh_estimate(ctx, sql):
    """An estimate over a sample drawn afresh, with no group statistics or replicates cached."""
    cat = ctx.catalog
    with cat.store.tx() as c:
        gone = c.execute("SELECT path FROM samples WHERE table_name='t'").fetchall()
        c.execute("DELETE FROM samples WHERE table_name='t'")
    for r in gone:
        shutil.rmtree(cat.store.resolve(r["path"]), ignore_errors=True)
    estimate_mod._GROUPS.clear()
    bs._BLOCKS.clear()
    shape = analyze(parse_sql(sql, ctx.schema_lookup()), lambda t: cat.version(t).rows)
    return estimate(cat, shape, {"k": (40,), "g": (25,)}, 0.2, 0)


@pytest.mark.parametrize("sql", [
    "SELECT g, sum(v) FROM t GROUP BY g HAVING sum(v) > 1500",
    "SELECT g, avg(v) AS a FROM t WHERE k < 2000 GROUP BY g ORDER BY a DESC LIMIT 7",
])
def test_a_cold_estimate_claims_the_prefetch_and_equals_one_without(ctx, sql, monkeypatch):
    before = _claims()
    ahead = _fresh_estimate(ctx, sql)
    assert not ahead.sample.cached
    assert prefetch.CLAIMED["hit"] == before["hit"] + 1
    monkeypatch.setattr(prefetch, "ENABLED", False)
    inline = _fresh_estimate(ctx, sql)
    assert prefetch.CLAIMED["hit"] == before["hit"] + 1
    assert ahead.sizes.keys() == inline.sizes.keys()
    for key in inline.sizes:
        x, y = ahead.sizes[key], inline.sizes[key]
        assert (x.rows_expected, x.rows_point, x.point_fragments, x.ci_lo, x.ci_hi) == \
               (y.rows_expected, y.rows_point, y.point_fragments, y.ci_lo, y.ci_hi)

