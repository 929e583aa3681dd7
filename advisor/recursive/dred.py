"""DRed for a recursive view without provenance state: over-delete every tuple with a derivation
through a deleted link (transitively), then re-derive those with a derivation from what is left,
and propagate.  Correct with no per-tuple state, but in well-connected graphs it over-deletes
most of the view.  Insertions are semi-naive from the delta.

>>> from advisor.recursive.derive import LinkGraph, Spec
>>> v = DRedView.build(Spec(forward=True), LinkGraph({1: ("B", "C", 1), 2: ("C", "B", 1), 3: ("C", "D", 1)}))
>>> v.delete({3}), sorted(v.view)
((2, 0), [('B', 'B'), ('B', 'C'), ('C', 'B'), ('C', 'C')])
"""

from __future__ import annotations

from collections import defaultdict

from advisor.recursive.derive import LinkGraph, Spec


class DRedView:
    """The view as a set, indexed by (anchor, extension node) for re-derivation."""

    def __init__(self, spec: Spec, graph: LinkGraph):
        self.spec, self.graph = spec, graph
        self.view: set = set()
        self.by_pair: dict = defaultdict(set)  # (fixed end, extension node) -> tuples
        self.by_key: dict = defaultdict(set)

    @classmethod
    def build(cls, spec: Spec, graph: LinkGraph) -> "DRedView":
        v = cls(spec, graph)
        v._grow([b for link in graph.links.values() if (b := spec.base(link)) is not None])
        return v

    def _pair(self, t: tuple) -> tuple:
        return (self.spec.fixed(t), self.spec.key(t))

    def _at(self, node) -> list:
        """Tuples extending at ``node`` (none at NULL, which joins nothing)."""
        return list(self.by_key.get(node, ())) if node is not None else []

    def _put(self, t: tuple) -> None:
        self.view.add(t)
        self.by_pair[self._pair(t)].add(t)
        self.by_key[self.spec.key(t)].add(t)

    def _drop(self, t: tuple) -> None:
        self.view.discard(t)
        self.by_pair[self._pair(t)].discard(t)
        self.by_key[self.spec.key(t)].discard(t)

    def _grow(self, seeds) -> int:
        spec, g, n = self.spec, self.graph, 0
        delta = []
        for t in seeds:
            if t not in self.view:
                self._put(t)
                delta.append(t)
        while delta:
            n += len(delta)
            nxt = []
            for t in delta:
                for rid in g.extending(spec, spec.key(t)):
                    u = spec.extend(t, g.links[rid])
                    if u is not None and u not in self.view:
                        self._put(u)
                        nxt.append(u)
            delta = nxt
        return n

    def insert(self, links: dict) -> int:
        """Semi-naive from the delta; returns the tuples added."""
        spec, seeds = self.spec, []
        for rid, link in links.items():
            self.graph.add(rid, link)
        for link in links.values():
            if (b := spec.base(link)) is not None:
                seeds.append(b)
            for t in (self._at(link[0] if spec.forward else link[1])):
                if (u := spec.extend(t, link)) is not None:
                    seeds.append(u)
        return self._grow(seeds)

    def delete(self, rids) -> tuple[int, int]:
        """Over-delete and re-derive; returns (tuples over-deleted, tuples re-derived)."""
        spec, g = self.spec, self.graph
        dead = {r: g.links[r] for r in rids if r in g.links}
        over, frontier = set(), []

        def hit(u):
            if u is not None and u in self.view and u not in over:
                over.add(u)
                frontier.append(u)

        for link in dead.values():
            hit(spec.base(link))
            for t in (self._at(link[0] if spec.forward else link[1])):
                hit(spec.extend(t, link))
        while frontier:
            t = frontier.pop()
            for rid in g.extending(spec, spec.key(t)):
                hit(spec.extend(t, g.links[rid]))
        for r in dead:
            g.remove(r)
        for t in over:
            self._drop(t)
        seeds = [t for t in over if self._derivable(t)]
        back = self._grow(seeds)
        return len(over), back

    def _derivable(self, t: tuple) -> bool:
        """One step from what is left: a base link, or a remaining tuple extended by a remaining link."""
        spec, g = self.spec, self.graph
        fixed = spec.fixed(t)
        for rid in g.arriving(spec, spec.key(t)):
            link = g.links[rid]
            if spec.base(link) == t:
                return True
            near = spec.near(link)
            for t0 in self.by_pair.get((fixed, near), ()) if near is not None else ():
                if spec.extend(t0, link) == t:
                    return True
        return False
