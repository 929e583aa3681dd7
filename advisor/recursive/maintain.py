"""Keeping a recursive view and its sketch current under link insertions and deletions.

The provenance state is the cheapest that fits: explicit minimal witness sets for hop-bounded
views within the budget (``WitnessView``: a deletion touches only the witnesses the row-id index
names), else derivation supports with levels (``SupportView``: one shortest derivation per tuple
implicitly, a deletion checks only the tuples that lost a tight support).  BDDs (``BddView``) are
kept only when asked for (``mode="bdd"``): measured on transit-stub topologies, they do not fit
from density 2, where supports do at 1,000 nodes and density 4.  ``mode="dred"`` keeps the bare
view (DRed: over-delete and re-derive), the memory-zero end, also used when the asked-for
witness state exceeds its budget.

Per batch ``advisor.recursive.policy`` picks the method by measured cost: the incremental one on
the state (absorption, or DRed on a bare view) or recomputation (the state rebuilt from scratch:
its cost is measured by every build).  The batch result says which and why.  The sketch is
projected from the state: one witness per needed tuple, from the witness sets, the BDDs, or the
canonical shortest derivations (DRed state rebuilds levels for it, so its sketch equals the
supports state's).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from advisor.recursive.bdd_witnesses import DEFAULT_NODE_BUDGET, DEFAULT_SECONDS, BddView, project_bdd
from advisor.recursive.derive import LinkGraph, Spec
from advisor.recursive.dred import DRedView
from advisor.recursive.policy import LABEL, Costs, choose
from advisor.recursive.sketch import needed, project
from advisor.recursive.supports import SupportView, project_supports
from advisor.recursive.witnesses import DEFAULT_BUDGET, BudgetExceeded, WitnessView


@dataclass
class RecursivePolicy:
    """Which state to keep and how many measurements a choice looks at (module docstring)."""

    budget: int = DEFAULT_BUDGET
    node_budget: int = DEFAULT_NODE_BUDGET
    bdd_seconds: float = DEFAULT_SECONDS
    window: int = 3
    mode: str = "auto"  # auto | witness | supports | bdd | dred
    method: str = "auto"  # auto | absorption | dred | recompute: a fixed method per batch


@dataclass
class BatchResult:
    """One maintained batch: the state kind, the method, seconds, tuples touched, why."""

    mode: str
    seconds: float
    inserted: int
    deleted: int
    touched: int
    note: str = ""
    method: str = ""

    def to_json(self) -> dict:
        return self.__dict__ | {"seconds": round(self.seconds, 5)}


@dataclass
class RecursiveState:
    """A recursive query's maintained view over a link graph (row id -> link tuple)."""

    shape: object
    links: dict
    policy: RecursivePolicy = field(default_factory=RecursivePolicy)

    def __post_init__(self):
        self.spec = Spec.of(self.shape)
        self.costs = Costs()
        self.batches = 0
        self.note = ""
        self.kind = self._initial_kind()
        self._build()

    @property
    def mode(self) -> str:
        return self.kind

    @property
    def witness(self):
        """The provenance state (None in DRed mode)."""
        return None if self.kind == "dred" else self.view

    def _initial_kind(self) -> str:
        m = self.policy.mode
        if m in ("witness", "bdd", "supports", "dred"):
            return m
        return "witness" if self.spec.max_hops is not None else "supports"

    def _build(self) -> None:
        """Evaluate the state of ``self.kind`` from scratch (a budget moves witness sets to
        supports, or, when witness sets or BDDs were asked for, to DRed); the time is a measured
        recomputation."""
        t0 = time.perf_counter()
        g = LinkGraph(dict(self.links))
        try:
            if self.kind == "witness":
                self.view = WitnessView.build(self.spec, g, self.policy.budget)
            elif self.kind == "bdd":
                self.view = BddView.build(self.spec, g, self.policy.node_budget, self.policy.bdd_seconds)
            elif self.kind == "supports":
                self.view = SupportView.build(self.spec, g)
            else:
                self.view = DRedView.build(self.spec, g)
        except BudgetExceeded as e:
            self.kind = "dred" if self.policy.mode in ("witness", "bdd") else "supports"
            self.note = f"{e}: {'DRed' if self.kind == 'dred' else 'derivation supports'} instead"
            self._build()
            return
        self.costs.add("recompute", 0, time.perf_counter() - t0, self.batches)

    def tuples(self) -> set:
        return self.view.tuples() if self.kind != "dred" else set(self.view.view)

    def apply(self, inserted: dict, deleted) -> BatchResult:
        """Maintain the view for one batch (deletions first, then insertions)."""
        deleted = set(deleted) & set(self.links)
        n = len(inserted) + len(deleted)
        self.batches += 1
        incremental = "dred" if self.kind == "dred" else "absorption"
        if self.policy.method != "auto":
            method = self.policy.method if self.policy.method in (incremental, "recompute") else incremental
            why = f"{LABEL[method]} asked for"
        else:
            method, why = choose(self.costs, [incremental, "recompute"], self.policy.window, n, self.batches)
        kind = self.kind
        t0 = time.perf_counter()
        for r in deleted:
            del self.links[r]
        self.links.update(inserted)
        if method == "recompute":
            self._build()
            touched = len(self.tuples())
        elif self.kind == "dred":
            over, back = self.view.delete(deleted)
            touched = over + back + self.view.insert(inserted)
        else:
            touched = self.view.delete(deleted)
            try:
                touched += self.view.insert(inserted)
            except BudgetExceeded as e:
                self.kind = "supports" if self.policy.mode == "auto" else "dred"
                self.note = f"{e}: {self.kind} from here on"
                why += f"; {self.note}"
                self._build()
        secs = time.perf_counter() - t0
        if method != "recompute":
            self.costs.add(method, n, secs, self.batches)
        return BatchResult(kind, secs, len(inserted), len(deleted), touched, why, method)

    def fragments(self, fragment_of) -> frozenset:
        """The sketch: fragments of one witness per needed tuple (module docstring)."""
        need = needed(self.shape, self.tuples())
        if self.kind == "bdd":
            return project_bdd(self.view, need, fragment_of)
        if self.kind == "witness":
            return project(self.view.formula, need, fragment_of)
        sup = self.view if self.kind == "supports" else SupportView.build(self.spec, LinkGraph(dict(self.links)))
        return project_supports(sup, need, fragment_of)
