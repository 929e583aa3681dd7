"""Absorption provenance as binary decision diagrams: one BDD variable per base link row id, each
view tuple's formula a reduced ordered BDD (OR over its derivations of AND(link variable,
predecessor's formula)).  The canonical BDD applies absorption by itself, so a tuple with
exponentially many minimal witnesses (unbounded reachability: one per simple path) can still have a
small formula, where explicit witness sets (``advisor.recursive.witnesses``) exceed any budget.

Evaluation is semi-naive with a work list: when a tuple's formula changes, its extensions get
``formula AND link``, and only a changed formula is propagated further (the fixpoint is over
formulas, not tuples: a new derivation of an old tuple counts unless it is absorbed).  Propagating
the whole changed formula rather than the difference ``new AND NOT old`` keeps every BDD monotone;
differences have negative literals and grow much larger.  A deletion of rows R restricts their
variables to False in the formulas of exactly the tuples whose support names one of them (an index
from row id to tuples), and a tuple survives iff its formula is not False.  An insertion propagates
from the new links.  The same interface as ``WitnessView``, so ``advisor.recursive.maintain`` can
keep either.

The cyclic example where derivation counts fail (B->C, C->B, C->D; delete C->D):

>>> from advisor.recursive.derive import LinkGraph, Spec
>>> g = LinkGraph({1: ("B", "C", 1), 2: ("C", "B", 1), 3: ("C", "D", 1)})
>>> v = BddView.build(Spec(forward=True), g)
>>> sorted(map(sorted, v.formula(("B", "D"))))
[[1, 3]]
>>> v.delete({3})
2
>>> sorted(v.tuples())
[('B', 'B'), ('B', 'C'), ('C', 'B'), ('C', 'C')]

The source paper's running example: deleting C->B (p4) leaves every tuple, with smaller formulas:

>>> g = LinkGraph({1: ("A", "B", 1), 2: ("B", "C", 1), 3: ("C", "A", 1), 4: ("C", "B", 1)})
>>> v = BddView.build(Spec(forward=True), g)
>>> sorted(map(sorted, v.formula(("B", "B"))))
[[1, 2, 3], [2, 4]]
>>> n = len(v.tuples()); v.delete({4}) > 0, len(v.tuples()) == n, sorted(map(sorted, v.formula(("C", "B"))))
(True, True, [[1, 3]])
"""

from __future__ import annotations

import time
import warnings
from collections import defaultdict, deque

from advisor.recursive.derive import LinkGraph, Spec
from advisor.recursive.witnesses import BudgetExceeded

try:  # CUDD through dd's compiled wrapper when its wheel is installed, else dd's pure-Python BDDs
    from dd import cudd as _bdd_mod
except ImportError:  # pragma: no cover - depends on the installed wheel
    from dd import autoref as _bdd_mod

DEFAULT_NODE_BUDGET = 2_000_000  # BDD nodes in the manager before giving up (then DRed)
WORK_PER_NODE = 2  # derivations tried per unit of node budget before giving up
DEFAULT_SECONDS = 20.0  # one evaluation's time before giving up (checked between BDD operations)


def bfs_order(spec: Spec, g: LinkGraph) -> list:
    """Row ids in an order that keeps connected links close (BFS over the nodes from the sources,
    each link placed at its later end): connectivity BDDs stay far smaller than in a random order."""
    nodes = sorted({n for lk in g.links.values() for n in lk[:2] if n is not None}, key=repr)
    starts = sorted(spec.sources, key=repr) if spec.sources is not None else []
    pos: dict = {}
    for s in [n for n in starts if n in set(nodes)] + nodes:
        if s in pos:
            continue
        pos[s] = len(pos)
        q = deque([s])
        while q:
            x = q.popleft()
            for rid in sorted(g.out.get(x, set()) | g.inc.get(x, set()), key=repr):
                s2, d2 = g.links[rid][:2]
                for y in (s2, d2):
                    if y is not None and y not in pos:
                        pos[y] = len(pos)
                        q.append(y)

    def key(rid):
        ends = [pos.get(n, -1) for n in g.links[rid][:2]]
        return (max(ends), min(ends), repr(rid))

    return sorted(g.links, key=key)


class BddView:
    """The view with every tuple's absorption-provenance BDD, the row-id index and the link graph."""

    def __init__(
        self, spec: Spec, graph: LinkGraph, budget: int = DEFAULT_NODE_BUDGET, seconds: float = DEFAULT_SECONDS
    ):
        self.spec, self.graph, self.budget, self.seconds = spec, graph, budget, seconds
        self.deadline = None
        self.bdd = _bdd_mod.BDD()
        self.names: dict = {}  # row id -> variable name
        self.rows: dict = {}  # variable name -> row id
        self.formulas: dict = {}  # tuple -> BDD (never False)
        self.support: dict = {}  # tuple -> row ids its formula depends on
        self.index: dict = defaultdict(set)  # row id -> tuples whose formula depends on it
        self.by_key: dict = defaultdict(set)  # extension node -> tuples
        self.touched = 0
        self.work = 0

    @classmethod
    def build(
        cls, spec: Spec, graph: LinkGraph, budget: int = DEFAULT_NODE_BUDGET, seconds: float = DEFAULT_SECONDS
    ) -> "BddView":
        """Evaluate the view with provenance from scratch (raises ``BudgetExceeded``)."""
        v = cls(spec, graph, budget, seconds)
        for rid in bfs_order(spec, graph):
            v._var(rid)
        v._propagate(v._seeds(graph.links))
        return v

    def __getstate__(self) -> dict:
        """BDD managers do not pickle: a pickled view keeps its links, budgets and variable order
        and is evaluated again when loaded (the same formulas: BDDs are canonical)."""
        order = sorted(self.names, key=lambda r: self.bdd.level_of_var(self.names[r]))
        return {"spec": self.spec, "graph": self.graph, "budget": self.budget, "seconds": self.seconds,
                "order": order}

    def __setstate__(self, st: dict) -> None:
        self.__init__(st["spec"], st["graph"], st["budget"], st["seconds"])
        for rid in st["order"]:
            self._var(rid)
        for rid in bfs_order(self.spec, self.graph):
            self._var(rid)
        self._propagate(self._seeds(self.graph.links))

    def _var(self, rid):
        name = self.names.get(rid)
        if name is None:
            name = self.names[rid] = f"r{len(self.names)}"
            self.rows[name] = rid
            self.bdd.declare(name)
        return self.bdd.var(name)

    def tuples(self) -> set:
        return set(self.formulas)

    def nodes(self) -> int:
        """BDD nodes held by the manager (the state's size): CUDD's live count, read in constant
        time (``len`` of a manager walks its whole unique table, which cost most of an evaluation)."""
        if not hasattr(self.bdd, "statistics"):  # dd's pure-Python BDDs count in constant time
            return len(self.bdd)
        with warnings.catch_warnings():  # dd warns on every call that one statistic changed units
            warnings.simplefilter("ignore")
            return int(self.bdd.statistics()["n_nodes"])

    def formula(self, t: tuple) -> set:
        """The minimal witnesses of ``t`` as sets of row ids (enumerated from the BDD: exponentially
        many for reachability in dense graphs; for tests and small examples)."""
        f = self.formulas.get(t)
        if f is None:
            return set()
        out = set()
        for a in self.bdd.pick_iter(f, care_vars=self.bdd.support(f)):
            out.add(frozenset(self.rows[n] for n, val in a.items() if val))
        return {w for w in out if not any(o < w for o in out)}

    def _seeds(self, links: dict) -> dict:
        seeds: dict = {}
        for rid, link in links.items():
            if (b := self.spec.base(link)) is not None:
                seeds[b] = seeds.get(b, self.bdd.false) | self._var(rid)
        return seeds

    def _check(self) -> None:
        self.work += 1
        if self.work > WORK_PER_NODE * self.budget:
            raise BudgetExceeded(f"BDD evaluation tried more than {WORK_PER_NODE * self.budget:,} derivations")
        if self.work % 16:
            return
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise BudgetExceeded(f"BDD evaluation took more than {self.seconds:g} s")
        if self.work % 256 == 0 and self.nodes() > self.budget:  # a count costs milliseconds
            raise BudgetExceeded(f"BDDs hold more than {self.budget:,} nodes")

    def _or_into(self, t: tuple, f) -> bool:
        """formula(t) |= f; True if it changed."""
        self._check()
        old = self.formulas.get(t)
        new = f if old is None else old | f
        if new == old or new == self.bdd.false:
            return False
        if old is None:
            self.by_key[self.spec.key(t)].add(t)
        self.formulas[t] = new
        return True

    def _propagate(self, seeds: dict) -> None:
        """Work-list fixpoint from ``seeds`` (tuple -> formula to OR in)."""
        spec, g = self.spec, self.graph
        self.deadline = time.perf_counter() + self.seconds
        changed = {t for t, f in seeds.items() if self._or_into(t, f)}
        work, queued = deque(sorted(changed, key=repr)), set(changed)
        while work:
            t = work.popleft()
            queued.discard(t)
            f = self.formulas[t]
            for rid in sorted(g.extending(spec, spec.key(t)), key=repr):
                u = spec.extend(t, g.links[rid])
                if u is not None and self._or_into(u, f & self._var(rid)):
                    changed.add(u)
                    if u not in queued:
                        queued.add(u)
                        work.append(u)
        if self.nodes() > self.budget:
            raise BudgetExceeded(f"BDDs hold more than {self.budget:,} nodes")
        for t in changed:
            self._reindex(t)
        self.touched = len(changed)

    def _reindex(self, t: tuple) -> None:
        old = self.support.get(t, frozenset())
        f = self.formulas.get(t)
        new = frozenset(self.rows[n] for n in self.bdd.support(f)) if f is not None else frozenset()
        for r in old - new:
            self.index[r].discard(t)
        for r in new - old:
            self.index[r].add(t)
        if f is None:
            self.support.pop(t, None)
        else:
            self.support[t] = new

    def insert(self, links: dict) -> int:
        """Add links (row id -> (src, dst, cost)): their base tuples and every tuple at a new link's
        near end extended by it, propagated.  Returns the tuples whose formula changed."""
        self.work = 0
        spec = self.spec
        for rid, link in links.items():
            self.graph.add(rid, link)
        seeds = self._seeds(links)
        for rid, link in links.items():
            near = link[0] if spec.forward else link[1]
            for t in list(self.by_key.get(near, ()) if near is not None else ()):
                u = spec.extend(t, link)
                if u is not None:
                    seeds[u] = seeds.get(u, self.bdd.false) | (self.formulas[t] & self._var(rid))
        self._propagate(seeds)
        return self.touched

    def delete(self, rids) -> int:
        """Remove links: restrict their variables to False in the formulas of the tuples the index
        names (no scan of the view); a tuple whose formula becomes False goes.  Returns how many
        tuples the index named."""
        rids = set(rids)
        names = {self.names[r]: False for r in rids if r in self.names}
        hit: set = set()
        for r in rids:
            self.graph.remove(r)
            hit |= self.index.get(r, set())
        for t in hit:
            f = self.bdd.let(names, self.formulas[t])
            if f == self.bdd.false:
                del self.formulas[t]
                self.by_key[self.spec.key(t)].discard(t)
            else:
                self.formulas[t] = f
            self._reindex(t)
        for r in rids:
            self.index.pop(r, None)
        self.touched = len(hit)
        return len(hit)

    def fragments_of(self, t: tuple, fragment_of, chosen: set) -> set:
        """Fragments one minimal witness of ``t`` adds to ``chosen``, a function of the formula only
        (not of the variable order), so a maintained and a recaptured view pick the same: every
        fragment not yet chosen is set to False in turn (descending) and stays False if ``t``
        remains derivable; the fragments left are needed by every witness that remains."""
        f = self.formulas.get(t)
        if f is None:
            raise ValueError(f"view tuple {t!r} has no witness")
        by_frag: dict = defaultdict(dict)
        for r in self.support[t]:
            by_frag[fragment_of(r)][self.names[r]] = False
        new = sorted((k for k in by_frag if k not in chosen), key=repr, reverse=True)
        if not new:
            return set()
        allnew = {n: False for k in new for n in by_frag[k]}
        if self.bdd.let(allnew, f) != self.bdd.false:
            return set()
        keep = set()
        for k in new:
            g = self.bdd.let(by_frag[k], f)
            if g == self.bdd.false:
                keep.add(k)
            else:
                f = g
        return keep


def project_bdd(view: BddView, tuples, fragment_of) -> frozenset:
    """The sketch from BDD state: per needed tuple (in order) the fragments of one minimal witness,
    preferring fragments already chosen (``BddView.fragments_of``).

    One witness per tuple is what the sketch needs: the link rows of the chosen fragments hold a
    witness of every needed tuple, so by monotonicity they derive it again and derive nothing
    outside the view.  A formula's support (the union of all its minimal witnesses) is sufficient
    too, but on a well-connected graph it names nearly every link of the component.

    >>> from advisor.recursive.derive import LinkGraph, Spec
    >>> g = LinkGraph({1: ("A", "B", 1), 2: ("B", "C", 1), 3: ("A", "C", 1), 4: ("X", "Y", 1)})
    >>> v = BddView.build(Spec(forward=True, sources=frozenset("A")), g)
    >>> sorted(project_bdd(v, sorted(v.tuples()), {1: 0, 2: 1, 3: 0, 4: 5}.get))
    [0]
    """
    chosen: set = set()
    for t in tuples:
        chosen |= view.fragments_of(t, fragment_of, chosen)
    return frozenset(chosen)
