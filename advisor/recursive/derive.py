"""The recursive rule as pure Python over a link graph held on the driver: base tuples, one-link
extensions, and plain set-semantics semi-naive evaluation (recomputation, DRed's re-derivation).

View tuples are ``(src, dst[, cost][, hops])`` (pairs) or ``(node[, cost][, hops])`` (node sets:
the nodes reached from the base links' sources; a backward node set is a forward one over the
link table with its two node columns swapped, which the shape does).  Links are keyed by their
base row id and are ``(src, dst, cost)``, or ``(src, dst, cost, base_ok, step_ok)`` when the query
selects link rows by other predicates: the flags say whether the row passes the base query's and
the step's selection (computed by Spark when the links are read).

>>> g = LinkGraph({1: ("B", "C", 1), 2: ("C", "B", 1), 3: ("C", "D", 1)})
>>> sorted(fixpoint(Spec(forward=True), g))
[('B', 'B'), ('B', 'C'), ('B', 'D'), ('C', 'B'), ('C', 'C'), ('C', 'D')]
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True)
class Spec:
    """What the recursion derives: direction, carried cost and hop count, hop bound, the base
    selection on the link's source (``sources``) and destination (``targets``), and whether view
    tuples are node sets (``nodes``: the fixed end is dropped)."""

    forward: bool = True
    cost: bool = False
    hops: bool = False
    max_hops: int | None = None
    sources: frozenset | None = None
    nodes: bool = False
    targets: frozenset | None = None

    @classmethod
    def of(cls, shape) -> "Spec":
        return cls(
            shape.forward,
            shape.cost_col is not None,
            shape.has_hops,
            shape.max_hops,
            shape.sources,
            getattr(shape, "nodes", False),
            getattr(shape, "base_targets", None),
        )

    @property
    def width(self) -> int:
        """How many node columns a view tuple starts with (2 for pairs, 1 for node sets)."""
        return 1 if self.nodes else 2

    def base(self, link: tuple):
        """The view tuple a link derives on its own, or None (filtered by the base selection)."""
        s, d, c = link[:3]
        if self.sources is not None and s not in self.sources:
            return None
        if self.targets is not None and d not in self.targets:
            return None
        if len(link) > 3 and not link[3]:
            return None
        ends = (d,) if self.nodes else (s, d)
        return ends + ((c,) if self.cost else ()) + ((1,) if self.hops else ())

    def key(self, t: tuple):
        """The node where ``t`` extends: its destination (forward, and node sets) or its source
        (backward)."""
        return t[1] if self.forward and not self.nodes else t[0]

    def fixed(self, t: tuple):
        """The end of ``t`` no extension changes (None for node sets)."""
        if self.nodes:
            return None
        return t[0] if self.forward else t[1]

    def near(self, link: tuple):
        """The end of a link that meets the tuple it extends."""
        return link[0] if self.forward else link[1]

    def extend(self, t: tuple, link: tuple):
        """``t`` extended by ``link`` (whose near end is ``key(t)``), or None past the hop bound or
        outside the step's selection."""
        if self.hops and self.max_hops is not None and t[-1] >= self.max_hops:
            return None
        if len(link) > 4 and not link[4]:
            return None
        s, d, c = link[:3]
        w = self.width
        if self.nodes:
            out = (d,)
        else:
            out = (t[0], d) if self.forward else (s, t[1])
        if self.cost:
            out += ((t[w] + c) if self.forward else (c + t[w]),)
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

    def arriving(self, spec: Spec, node) -> set:
        """Row ids of links that could have made the last step of a tuple whose extension node is
        ``node`` (links into it forward, out of it backward; a link can end at NULL)."""
        return self.inc.get(node, set()) if spec.forward else self.out.get(node, set())

    def extending(self, spec: Spec, node) -> set:
        """Row ids of links that extend a tuple whose extension node is ``node`` (none for NULL:
        the SQL join condition is not true for NULL)."""
        if node is None:
            return set()
        return self.out.get(node, set()) if spec.forward else self.inc.get(node, set())

    def copy(self) -> "LinkGraph":
        return LinkGraph(dict(self.links))


def _rounds(spec: Spec, g: LinkGraph, delta: list, view: set):
    """Semi-naive rounds from ``delta``: yields each round's new tuples, adding them to ``view``."""
    while delta:
        nxt = []
        for t in delta:
            for rid in g.extending(spec, spec.key(t)):
                u = spec.extend(t, g.links[rid])
                if u is not None and u not in view:
                    view.add(u)
                    nxt.append(u)
        yield nxt
        delta = nxt


def rounds_fixpoint(spec: Spec, g: LinkGraph) -> tuple[set, int]:
    """The whole view by semi-naive rounds, and the number of rounds that added tuples."""
    view = {b for link in g.links.values() if (b := spec.base(link)) is not None}
    rounds = 1 if view else 0
    for nxt in _rounds(spec, g, list(view), view):
        rounds += bool(nxt)
    return view, rounds


def fixpoint(spec: Spec, g: LinkGraph, seeds: set | None = None, known: set | None = None) -> set:
    """Semi-naive set evaluation: every tuple derivable from ``seeds`` (default: the base tuples of
    all links) not already in ``known``; ``known`` is extended in place when given."""
    view = known if known is not None else set()
    if seeds is None:
        seeds = {b for link in g.links.values() if (b := spec.base(link)) is not None}
    delta = [t for t in seeds if t not in view]
    view.update(delta)
    new_all = set(delta)
    for nxt in _rounds(spec, g, delta, view):
        new_all.update(nxt)
    return view if known is None else new_all
