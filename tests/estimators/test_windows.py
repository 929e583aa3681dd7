"""Locality windows clipped by the spans of the groups that contain a group's own (`estimators.windows`)."""

from __future__ import annotations

import numpy as np
import pytest

import estimators.windows as W
from estimators.windows import containing_spans, group_windows


@pytest.mark.parametrize("G", [1, 2, 7, 64, 500, 1024, 2001])
def test_containing_spans_equal_brute_force(G):
    rng = np.random.default_rng(G)
    a = rng.integers(0, 80, G).astype(float)  # many ties in both ends
    b = a + rng.integers(0, 25, G)
    lo, hi, count = containing_spans(a, b)
    for g in range(G):
        m = (a <= a[g]) & (b >= b[g])
        assert (lo[g], hi[g], count[g]) == (a[m].min(), b[m].max(), m.sum() - 1)


def _blocks(seed, blocks=6, width=60, per_block=80):
    """Groups living inside fixed blocks of positions (hours of a day), 2-3 sampled rows each."""
    rng = np.random.default_rng(seed)
    cg, cp, home = [], [], []
    g = 0
    for k in range(blocks):
        for _ in range(per_block):
            n = int(rng.integers(2, 4))
            cg += [g] * n
            cp += list(k * width + rng.integers(0, width, n))
            home.append(k)
            g += 1
    return np.array(cg), np.array(cp, dtype=float), np.bincount(cg).astype(float), np.array(home)


def test_windows_of_block_aligned_groups_stay_in_their_block(monkeypatch):
    cg, cp, n, home = _blocks(1)
    lo, hi = group_windows(cg, cp, n, n.shape[0])
    spill = (np.ceil(lo) < home * 60) | (np.floor(hi) > home * 60 + 59)
    a = np.array([cp[cg == g].min() for g in range(n.shape[0])])
    b = np.array([cp[cg == g].max() for g in range(n.shape[0])])
    clipped = containing_spans(a, b)[2] >= W.ALIGN_MIN
    assert clipped.sum() > n.shape[0] / 2 and not spill[clipped].any()
    monkeypatch.setattr(W, "ALIGN_MIN", 0)  # without the clip, windows spill over block edges
    lo0, hi0 = group_windows(cg, cp, n, n.shape[0])
    spill0 = (np.ceil(lo0) < home * 60) | (np.floor(hi0) > home * 60 + 59)
    assert spill.sum() < spill0.sum() / 2
    assert (lo >= lo0).all() and (hi <= hi0).all()  # the clip only narrows


def test_groups_in_their_own_regions_keep_their_windows(monkeypatch):
    """No other group's span contains a group's own (each lives in its own 100 positions): nothing
    tells where the group ends, so its German-tank window is kept."""
    rng = np.random.default_rng(2)
    cg = np.repeat(np.arange(50), 3)
    cp = (np.repeat(np.arange(50), 3) * 100 + rng.integers(0, 100, 150)).astype(float)
    n = np.full(50, 3.0)
    lo, hi = group_windows(cg, cp, n, 50)
    monkeypatch.setattr(W, "ALIGN_MIN", 0)
    lo0, hi0 = group_windows(cg, cp, n, 50)
    assert np.array_equal(lo, lo0) and np.array_equal(hi, hi0)
    assert (hi - lo > np.array([np.ptp(cp[cg == g]) for g in range(50)])).all()  # extended beyond the span


def test_extent_equals_ufunc_at():
    rng = np.random.default_rng(9)
    g = rng.integers(0, 300, 5000)
    pos = rng.integers(0, 1000, 5000).astype(float)
    lo, hi = W._extent(g, pos, 320)  # unsorted cells, and groups 300-319 without any
    want_lo, want_hi = np.full(320, np.inf), np.full(320, -np.inf)
    np.minimum.at(want_lo, g, pos)
    np.maximum.at(want_hi, g, pos)
    assert np.array_equal(lo, want_lo) and np.array_equal(hi, want_hi)
    s = np.argsort(g, kind="stable")
    assert all(np.array_equal(x, y) for x, y in zip(W._extent(g[s], pos[s], 320), (want_lo, want_hi)))
