"""Runs of consecutive fragments in a range partition: the unit a sketch's scan filter is written in."""

from __future__ import annotations

import heapq

from advisor.partition.range_partition import RangePartition

# Bridging above this many ranges. Each new filter text is a new whole-stage-codegen class: the
# query's loop runs interpreted until HotSpot has compiled that (huge) method, so the first run of a
# fresh filter costs more than later ones.  As one flat OR a fresh big_orders sketch at SF1 took
# 1.6-2.0 s at 32 ranges, 3.0 s at 77, 11-13 s at 128 (the plain query: 1.6-1.8 s); ``range_condition``'s
# search tree tests O(log ranges) bounds per row and took 1.2-1.5 s at 32, 0.8-1.2 s at 77-105, and
# 3.1-3.3 s at 128 (BENCHMARKS.md). Replays meet a fresh filter at every capture and every
# maintained version, so the first run is the common case.  With layouts in 1,000-row pages the cap
# became the larger cost: bridging a scattered sketch to 64 runs fills the gaps' pages.  SF1
# big_orders at c = 290 (203 fragments of 10,001): 64 runs read 2.08M rows in 0.72-0.76 s, 200 runs
# 322k rows in 0.34-0.38 s (fresh filters in a warm JVM; 2.25 s and 1.30 s as the JVM's very first
# query); at c = 293-296, 0.36-0.62 s against 0.27-0.36 s (BENCHMARKS.md).
MAX_RUNS = 256


def runs(fragments: frozenset, part: RangePartition) -> list[tuple[int, int]]:
    """Maximal runs [i, j] of consecutive range fragment ids (NULL fragment excluded).

    >>> from advisor.partition.range_partition import RangePartition
    >>> part = RangePartition(0, "t", "a", "int", (10, 20, 30, 40), (5, 5, 5, 5, 5, 0))
    >>> part.null_id, runs(frozenset({0, 1, 2, 4, 5}), part)
    (5, [(0, 2), (4, 4)])
    >>> capped_runs(frozenset({0, 1, 2, 4}), part, max_runs=1)  # the gap at 3 is bridged
    [(0, 4)]"""
    ids = sorted(f for f in fragments if f != part.null_id)
    out: list[tuple[int, int]] = []
    for f in ids:
        if out and out[-1][1] == f - 1:
            out[-1] = (out[-1][0], f)
        else:
            out.append((f, f))
    return out


def capped_runs(fragments: frozenset, part: RangePartition, max_runs: int = MAX_RUNS) -> list[tuple[int, int]]:
    """Runs of the sketch, with the cheapest gaps bridged until at most `max_runs` remain.

    Bridging adds fragments, and a superset of a safe sketch is safe (seed 001, Lemma 5), so the
    answer cannot change; we pick the gaps holding the fewest rows (fragment sizes) to lose little."""
    rs = runs(fragments, part)
    if len(rs) <= max_runs:
        return rs
    sizes = part.sizes

    def gap_rows(a, b):
        return sum(sizes[f] for f in range(a[1] + 1, b[0]) if f < len(sizes)) if sizes else b[0] - a[1]


    rs = list(rs)
    while len(rs) > max_runs:
        gaps = [(gap_rows(rs[k], rs[k + 1]), k) for k in range(len(rs) - 1)]
        # bridge the cheapest gaps in one sweep (non-overlapping), then re-evaluate
        need = len(rs) - max_runs
        chosen = sorted(k for _, k in heapq.nsmallest(need, gaps))
        merged, skip = [], set(chosen)
        k = 0
        while k < len(rs):
            lo, hi = rs[k]
            while k in skip:
                k += 1
                hi = rs[k][1]
            merged.append((lo, hi))
            k += 1
        rs = merged
    return rs


def read_set(fragments, part: RangePartition, max_runs: int = MAX_RUNS) -> frozenset:
    """The fragments a sketch's filter actually admits: its runs after bridging, plus NULLs."""
    return admitted(capped_runs(fragments, part, max_runs), fragments, part)


def admitted(rs: list[tuple[int, int]], fragments, part: RangePartition) -> frozenset:
    """The fragments of the (bridged) runs ``rs`` of ``fragments``, plus their NULL fragment."""
    got = {f for i, j in rs for f in range(i, j + 1)}
    return frozenset(got | (set(fragments) & {part.null_id}))
