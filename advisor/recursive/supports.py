"""Derivation supports with levels: the absorption state that fits dense graphs.

Explicit minimal witnesses of unbounded reachability are the simple paths (exponentially many),
and their BDDs outgrow any budget once the graph has cycles at density 2.  This state keeps, per
view tuple, only its *level*: the length of its shortest derivation.  A tuple's one-step
supports (a base link, or a parent tuple and the link extending it) are not stored: they are
found from the link graph's indexes when needed.  A support is *tight* when the parent's level is
one less (or it is a base link at level 1); the tight supports form a DAG, so they cannot hold
each other up in a cycle the way derivation counts do, and following tight supports from any
tuple always ends at a base link: a shortest derivation, which is one minimal witness.

Deletion (a backward/forward check instead of DRed's over-delete): the tuples that had a tight
support through a deleted link are checked in level order; one that keeps another tight support
from an unaffected parent is untouched (the common case in a well-connected graph, where most
tuples have several shortest derivations: the absorption that makes the source paper's deletions
cheap), one that has none is affected and its tight children are checked next.  Only the affected
tuples are then re-levelled, by a breadth-first pass from their unaffected supports; those it
does not reach are gone.  Insertion lowers levels breadth-first from the new links.  Levels are a
function of the link graph alone, so a maintained state equals a rebuilt one, and so does the
sketch projected from it (``canonical_witness``).

>>> from advisor.recursive.derive import LinkGraph, Spec
>>> g = LinkGraph({1: ("B", "C", 1), 2: ("C", "B", 1), 3: ("C", "D", 1)})
>>> v = SupportView.build(Spec(forward=True), g)
>>> v.delete({3}), sorted(v.tuples())
(2, [('B', 'B'), ('B', 'C'), ('C', 'B'), ('C', 'C')])
"""

from __future__ import annotations

import heapq
from collections import defaultdict

from advisor.recursive.derive import LinkGraph, Spec


class SupportView:
    """The view with every tuple's level, indexed by (fixed end, extension node) and by extension node."""

    def __init__(self, spec: Spec, graph: LinkGraph):
        self.spec, self.graph = spec, graph
        self.level: dict = {}
        self.by_pair: dict = defaultdict(set)
        self.by_key: dict = defaultdict(set)
        self.touched = 0

    @classmethod
    def build(cls, spec: Spec, graph: LinkGraph) -> "SupportView":
        v = cls(spec, graph)
        v._lower([(1, b) for link in graph.links.values() if (b := spec.base(link)) is not None])
        return v

    def tuples(self) -> set:
        return set(self.level)

    @property
    def size(self) -> int:
        return len(self.level)

    def _put(self, t: tuple, lv: int) -> None:
        if t not in self.level:
            self.by_pair[(self.spec.fixed(t), self.spec.key(t))].add(t)
            self.by_key[self.spec.key(t)].add(t)
        self.level[t] = lv

    def _drop(self, t: tuple) -> None:
        del self.level[t]
        self.by_pair[(self.spec.fixed(t), self.spec.key(t))].discard(t)
        self.by_key[self.spec.key(t)].discard(t)

    def supports(self, t: tuple):
        """The one-step supports of ``t`` in the current graph: (parent or None, row id)."""
        spec, g = self.spec, self.graph
        fixed = spec.fixed(t)
        for rid in g.arriving(spec, spec.key(t)):
            link = g.links[rid]
            if spec.base(link) == t:
                yield None, rid
            near = spec.near(link)
            if near is None:
                continue
            for p in self.by_pair.get((fixed, near), ()):
                if spec.extend(p, link) == t:
                    yield p, rid

    def _children(self, t: tuple):
        spec, g = self.spec, self.graph
        for rid in g.extending(spec, spec.key(t)):
            u = spec.extend(t, g.links[rid])
            if u is not None:
                yield u

    def _lower(self, seeds: list) -> int:
        """Breadth-first from (level, tuple) seeds, lowering levels (and adding tuples)."""
        heap = [(lv, repr(t), t) for lv, t in seeds]
        heapq.heapify(heap)
        n = 0
        while heap:
            lv, _, t = heapq.heappop(heap)
            if self.level.get(t, lv + 1) <= lv:
                continue
            self._put(t, lv)
            n += 1
            for u in self._children(t):
                if self.level.get(u, lv + 2) > lv + 1:
                    heapq.heappush(heap, (lv + 1, repr(u), u))
        return n

    def insert(self, links: dict) -> int:
        """Add links: their base tuples at level 1 and each tuple at a new link's near end extended
        by it one level up, lowered breadth-first.  Returns the tuples added or lowered."""
        spec, seeds = self.spec, []
        for rid, link in links.items():
            self.graph.add(rid, link)
        for link in links.values():
            if (b := spec.base(link)) is not None:
                seeds.append((1, b))
            near = spec.near(link)
            for t in list(self.by_key.get(near, ()) if near is not None else ()):
                if (u := spec.extend(t, link)) is not None:
                    seeds.append((self.level[t] + 1, u))
        self.touched = self._lower(seeds)
        return self.touched

    def _tight(self, t: tuple, affected: set) -> bool:
        lv = self.level[t]
        for p, _ in self.supports(t):
            if p is None:
                if lv == 1:
                    return True
            elif p not in affected and self.level.get(p) == lv - 1:
                return True
        return False

    def delete(self, rids) -> int:
        """Remove links (module docstring).  Returns the tuples checked."""
        spec, g = self.spec, self.graph
        dead = {r: g.links[r] for r in rids if r in g.links}
        for r in dead:
            g.remove(r)
        heap, seen = [], set()

        def check(u):
            if u is not None and u in self.level and u not in seen:
                seen.add(u)
                heapq.heappush(heap, (self.level[u], repr(u), u))

        for link in dead.values():
            check(spec.base(link))
            near = spec.near(link)
            for t in list(self.by_key.get(near, ()) if near is not None else ()):
                u = spec.extend(t, link)
                if u is not None and self.level.get(u) == self.level[t] + 1:
                    check(u)
        affected: set = set()
        while heap:
            lv, _, t = heapq.heappop(heap)
            if self._tight(t, affected):
                continue
            affected.add(t)
            for u in self._children(t):
                if self.level.get(u) == lv + 1:
                    check(u)
        self.touched = len(seen)
        if not affected:
            return self.touched
        seeds = []
        for t in affected:
            best = None
            for p, _ in self.supports(t):
                lv = 1 if p is None else (self.level[p] + 1 if p not in affected else None)
                if lv is not None and (best is None or lv < best):
                    best = lv
            if best is not None:
                seeds.append((best, t))
        for t in affected:
            self._drop(t)
        self._lower(seeds)
        return self.touched

    def canonical_witness(self, t: tuple, memo: dict | None = None) -> frozenset:
        """Row ids of one shortest derivation of ``t``: at each step the tight support with the
        smallest row id (a function of the graph, so maintained and rebuilt states agree)."""
        memo = {} if memo is None else memo
        path, cur = [], t
        while cur is not None and cur not in memo:
            lv = self.level[cur]
            best = None
            for p, rid in self.supports(cur):
                ok = (p is None and lv == 1) or (p is not None and self.level.get(p) == lv - 1)
                if ok and (best is None or rid < best[1]):
                    best = (p, rid)
            if best is None:
                raise ValueError(f"view tuple {cur!r} has no tight support")
            path.append((cur, best[1]))
            cur = best[0]
        rows = memo[cur] if cur is not None else frozenset()
        for u, rid in reversed(path):
            rows = rows | {rid}
            memo[u] = rows
        return memo[t]


def project_supports(view: SupportView, tuples, fragment_of) -> frozenset:
    """The sketch: fragments of each needed tuple's canonical shortest derivation."""
    memo: dict = {}
    out: set = set()
    for t in tuples:
        out |= {fragment_of(r) for r in view.canonical_witness(t, memo)}
    return frozenset(out)
