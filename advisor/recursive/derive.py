"""The recursive rule as pure Python over a link graph held on the driver: base tuples, one-link
extensions, and plain set-semantics semi-naive evaluation (recomputation, DRed's re-derivation).

View tuples are ``(src, dst[, cost][, hops])``.  Links are keyed by their base row id.

>>> g = LinkGraph({1: ("B", "C", 1), 2: ("C", "B", 1), 3: ("C", "D", 1)})
>>> sorted(fixpoint(Spec(forward=True), g))
[('B', 'B'), ('B', 'C'), ('B', 'D'), ('C', 'B'), ('C', 'C'), ('C', 'D')]
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True)
class Spec:
    """What the recursion derives: direction, carried cost and hop count, hop bound, source selection."""

    forward: bool = True
    cost: bool = False
    hops: bool = False
    max_hops: int | None = None
    sources: frozenset | None = None

    @classmethod
    def of(cls, shape) -> "Spec":
        return cls(shape.forward, shape.cost_col is not None, shape.has_hops, shape.max_hops, shape.sources)

    def base(self, link: tuple):
        """The view tuple a link derives on its own, or None (filtered by the source selection)."""
        s, d, c = link
        if self.sources is not None and s not in self.sources:
            return None
        return (s, d) + ((c,) if self.cost else ()) + ((1,) if self.hops else ())

    def key(self, t: tuple):
        """The node where ``t`` extends: its destination (forward) or its source (backward)."""
        return t[1] if self.forward else t[0]

    def extend(self, t: tuple, link: tuple):
        """``t`` extended by ``link`` (whose near end is ``key(t)``), or None past the hop bound."""
        if self.hops and self.max_hops is not None and t[-1] >= self.max_hops:
            return None
        s, d, c = link
        out = (t[0], d) if self.forward else (s, t[1])
        if self.cost:
            out += ((t[2] + c) if self.forward else (c + t[2]),)
        if self.hops:
            out += (t[-1] + 1,)
        return out


class LinkGraph:
    """Links by row id with an index from node to the links that extend a tuple there."""

    def __init__(self, links: dict | None = None):
        self.links: dict = {}
        self.out: dict = defaultdict(set)  # node -> row ids of links leaving it
        self.inc: dict = defaultdict(set)  # node -> row ids of links entering it
        for rid, link in (links or {}).items():
            self.add(rid, link)

    def add(self, rid, link: tuple) -> None:
        self.links[rid] = link
        self.out[link[0]].add(rid)
        self.inc[link[1]].add(rid)

    def remove(self, rid) -> tuple | None:
        link = self.links.pop(rid, None)
        if link is not None:
            self.out[link[0]].discard(rid)
            self.inc[link[1]].discard(rid)
        return link

    def extending(self, spec: Spec, node) -> set:
        """Row ids of links that extend a tuple whose extension node is ``node`` (none for NULL:
        the SQL join condition is not true for NULL)."""
        if node is None:
            return set()
        return self.out.get(node, set()) if spec.forward else self.inc.get(node, set())

    def copy(self) -> "LinkGraph":
        return LinkGraph(dict(self.links))


def fixpoint(spec: Spec, g: LinkGraph, seeds: set | None = None, known: set | None = None) -> set:
    """Semi-naive set evaluation: every tuple derivable from ``seeds`` (default: the base tuples of
    all links) not already in ``known``; ``known`` is extended in place when given."""
    view = known if known is not None else set()
    if seeds is None:
        seeds = {b for link in g.links.values() if (b := spec.base(link)) is not None}
    delta = [t for t in seeds if t not in view]
    view.update(delta)
    new_all = set(delta)
    while delta:
        nxt = []
        for t in delta:
            for rid in g.extending(spec, spec.key(t)):
                u = spec.extend(t, g.links[rid])
                if u is not None and u not in view:
                    view.add(u)
                    new_all.add(u)
                    nxt.append(u)
        delta = nxt
    return view if known is None else new_all
