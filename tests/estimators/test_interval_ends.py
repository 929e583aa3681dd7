"""Both ends of a sketch-size interval on seeded synthetic tables whose true size is computed.

* Upper end, a candidate the group key does not determine: a group's rows cluster on the candidate
  (normal around the group's centre), so all of its rows reach further than its 5 % sample shows.
  The passing set is exact (count over strata), so only where the unseen rows may lie can make the
  interval miss (``estimators.window_bounds``).
* Lower end, an upper-tail threshold over groups of 80 rows with 4 sampled: noise lifts many groups
  over the threshold in every replicate, so the replicates' lower end alone lies above the truth
  (``interval_ends.confident_rows``).

Over 20 independent samples the 95 % interval must hold the true size in at least 90 % of them (18 of 20).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from estimate_helpers import shrunk_size, stratified_sample

from estimators.having import Cmp

THETA, DRAWS, FRAGMENTS = 0.05, 20, 1000


def _coverage(t: pd.DataFrame, passing: np.ndarray, agg: tuple, having: Cmp, determined: bool) -> tuple[float, float]:
    fsizes = np.bincount(t["frag"].to_numpy(), minlength=FRAGMENTS).astype(float)
    truth = fsizes[np.unique(t["frag"].to_numpy()[np.isin(t["g"].to_numpy(), passing)])].sum()
    hits = 0
    for d in range(DRAWS):
        e = shrunk_size(stratified_sample(t, THETA, 200 + d), agg, having, fsizes, d, determined)
        hits += e.ci_lo - 1e-9 <= truth <= e.ci_hi + 1e-9
    return hits / DRAWS, truth / fsizes.sum()


def test_clustered_rows_reach_beyond_their_sample():
    """300 groups of 400-800 rows whose candidate values cluster around the group's centre; the
    groups with more than 780 rows pass ``count(*) > 780`` (known exactly: groups are strata)."""
    rng = np.random.default_rng(7)
    n_rows = rng.integers(400, 800, 300)
    g = np.repeat(np.arange(300), n_rows)
    y = rng.uniform(0, 1000, 300)[g] + 1.5 * rng.standard_normal(g.size)
    bounds = np.quantile(y, np.arange(1, FRAGMENTS) / FRAGMENTS)
    t = pd.DataFrame({"g": g, "frag": np.searchsorted(bounds, y)})
    passing = np.flatnonzero(n_rows > 780)
    cover, share = _coverage(t, passing, ("count", None), Cmp("count(*)", ">", 780.0), determined=False)
    assert 0.01 < share < 0.3 and passing.size >= 5
    assert cover >= 0.9, cover


def test_an_upper_tail_threshold_keeps_the_truth_above_the_lower_end():
    """1,000 groups of 80 rows, ``HAVING sum(a * b) > c`` kept by the top 12 groups; a group is one
    fragment's worth of the group key."""
    rng = np.random.default_rng(3)
    g = np.repeat(np.arange(1000), 80)
    x = rng.integers(1, 10000, g.size) * rng.uniform(1.0, 1000.0, g.size)
    t = pd.DataFrame({"g": g, "x": x, "frag": g})
    sums = t.groupby("g")["x"].sum().sort_values(ascending=False)
    c = float((sums.iloc[11] + sums.iloc[12]) / 2)
    passing = sums.index[:12].to_numpy()
    cover, share = _coverage(t, passing, ("sum", "x"), Cmp("sum(x)", ">", c), determined=True)
    assert share == 0.012
    assert cover >= 0.9, cover
