"""Absorption provenance for a recursive view: each derived tuple keeps its minimal witnesses (sets of
base row ids, a positive Boolean formula in sum-of-products form with absorption: {a} absorbs
{a, b}), and an index from base row id to the (tuple, witness) pairs that mention it, so a
deletion touches only those witnesses (no scan of the view, nor of a tuple's other witnesses).
Derivation counts would be unsound here: under recursion derivations support each other in cycles.

>>> from advisor.recursive.derive import LinkGraph, Spec
>>> g = LinkGraph({1: ("B", "C", 1), 2: ("C", "B", 1), 3: ("C", "D", 1)})
>>> w = WitnessView.build(Spec(forward=True), g)
>>> sorted(map(sorted, w.formula(("B", "D"))))
[[1, 3]]
>>> _ = w.delete({3})
>>> sorted(w.tuples())
[('B', 'B'), ('B', 'C'), ('C', 'B'), ('C', 'C')]
"""

from __future__ import annotations

from collections import defaultdict

from advisor.recursive.derive import LinkGraph, Spec

DEFAULT_BUDGET = 1_000_000  # witness elements (row ids over all stored witnesses) before giving up
WORK_PER_UNIT = 20  # derivations tried per unit of budget before giving up (absorbed ones cost time too)


class BudgetExceeded(Exception):
    """The witness sets outgrew their memory budget; maintenance falls back to DRed/recapture."""


def absorb_into(formula: set, w: frozenset) -> tuple[bool, list]:
    """Add witness ``w`` to an antichain in place: (changed, witnesses it absorbed).

    >>> f = {frozenset({1, 2}), frozenset({3})}
    >>> absorb_into(f, frozenset({1})), sorted(map(sorted, f))
    ((True, [frozenset({1, 2})]), [[1], [3]])
    >>> absorb_into(f, frozenset({3, 4}))
    (False, [])
    """
    if w in formula or any(v <= w for v in formula):
        return False, []
    gone = [v for v in formula if w < v]
    for v in gone:
        formula.discard(v)
    formula.add(w)
    return True, gone


class WitnessView:
    """The view with every tuple's absorbed witness sets, the row-id index and the link graph."""

    def __init__(self, spec: Spec, graph: LinkGraph, budget: int = DEFAULT_BUDGET):
        self.spec, self.graph, self.budget = spec, graph, budget
        self.formulas: dict = {}
        self.index: dict = defaultdict(set)  # row id -> (tuple, witness) for every witness holding it
        self.by_key: dict = defaultdict(set)  # extension node -> tuples
        self.size = 0  # row ids over all stored witnesses
        self.touched = 0
        self.work = 0  # derivations tried by the current operation

    @classmethod
    def build(cls, spec: Spec, graph: LinkGraph, budget: int = DEFAULT_BUDGET) -> "WitnessView":
        """Evaluate the view with provenance from scratch (raises ``BudgetExceeded``)."""
        w = cls(spec, graph, budget)
        w._propagate(
            [(b, frozenset([rid])) for rid, link in graph.links.items() if (b := spec.base(link)) is not None]
        )
        return w

    def tuples(self) -> set:
        return set(self.formulas)

    def formula(self, t: tuple) -> set:
        """The minimal witnesses of ``t`` (empty: not derivable)."""
        return self.formulas.get(t, set())

    def _add(self, t: tuple, w: frozenset) -> bool:
        self.touched += 1
        self.work += 1
        if self.work > WORK_PER_UNIT * self.budget:
            raise BudgetExceeded(
                f"witness evaluation tried more than {WORK_PER_UNIT * self.budget:,} derivations"
            )
        f = self.formulas.get(t)
        if f is None:
            f = self.formulas[t] = set()
            self.by_key[self.spec.key(t)].add(t)
        changed, gone = absorb_into(f, w)
        if not changed:
            return False
        self.size += len(w) - sum(len(v) for v in gone)
        for r in w:
            self.index[r].add((t, w))
        for v in gone:
            for r in v:
                self.index[r].discard((t, v))
        if self.size > self.budget:
            raise BudgetExceeded(f"witness sets hold more than {self.budget:,} row ids")
        return True

    def _propagate(self, queue: list) -> None:
        spec, g = self.spec, self.graph
        queue = [(t, w) for t, w in queue if self._add(t, w)]
        while queue:
            t, w = queue.pop()
            if w not in self.formulas.get(t, ()):
                continue  # absorbed since: its extensions are absorbed too
            for rid in list(g.extending(spec, spec.key(t))):
                u = spec.extend(t, g.links[rid])
                if u is not None:
                    w2 = w | {rid}
                    if self._add(u, w2):
                        queue.append((u, w2))

    def insert(self, links: dict) -> int:
        """Add links (row id -> (src, dst, cost)); semi-naive from the delta: new base tuples and
        every stored witness extended by a new link.  Returns the derivations tried."""
        self.touched = self.work = 0
        spec, seeds = self.spec, []
        for rid, link in links.items():
            self.graph.add(rid, link)
        for rid, link in links.items():
            if (b := spec.base(link)) is not None:
                seeds.append((b, frozenset([rid])))
            near = link[0] if spec.forward else link[1]
            for t in list(self.by_key.get(near, ()) if near is not None else ()):
                u = spec.extend(t, link)
                if u is not None:
                    seeds += [(u, w | {rid}) for w in list(self.formulas.get(t, ()))]
        self._propagate(seeds)
        return self.touched

    def delete(self, rids) -> int:
        """Remove links: every witness mentioning one goes (found through the index, without
        reading the tuple's other witnesses), a tuple without witnesses goes.  Returns how many
        tuples lost a witness."""
        rids = set(rids)
        hit: set = set()
        for r in rids:
            self.graph.remove(r)
            for t, w in self.index.pop(r, ()):
                f = self.formulas.get(t)
                if f is None or w not in f:
                    continue
                f.discard(w)
                self.size -= len(w)
                hit.add(t)
                for r2 in w:
                    if r2 not in rids:
                        self.index[r2].discard((t, w))
        for t in hit:
            if not self.formulas[t]:
                del self.formulas[t]
                self.by_key[self.spec.key(t)].discard(t)
        self.touched = len(hit)
        return len(hit)
