"""Keeping a recursive view and its sketch current under link insertions and deletions.

Three kinds of state, chosen by a policy: explicit witness sets (``WitnessView``: deletions touch
only the tuples whose formula names a deleted row; insertions pay for provenance bookkeeping), the
same formulas as BDDs (``BddView``: for views whose witness sets outgrow the budget, as unbounded
reachability does, one witness per simple path), or the bare view (``DRedView``: over-delete and
re-derive; no per-tuple state).  Hop-bounded views keep witness sets while they fit the budget (row
ids over all witnesses), else BDDs; unbounded views go to BDDs directly; BDDs over their node budget
fall back to DRed.  Provenance state is kept while the stream has deletions: on an
insert-only stream provenance is pure overhead, so after ``window`` batches with a delete share
below ``min_delete_share`` the policy drops it, and rebuilds it when deletions come back.  The
sketch is projected from the surviving witnesses, or, without witness state, from each needed
tuple's first derivation (``advisor.recursive.sketch``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from advisor.recursive.bdd_witnesses import DEFAULT_NODE_BUDGET, DEFAULT_SECONDS, BddView, project_bdd
from advisor.recursive.derive import LinkGraph, Spec
from advisor.recursive.dred import DRedView
from advisor.recursive.sketch import chain, first_witnesses, needed, project
from advisor.recursive.witnesses import DEFAULT_BUDGET, BudgetExceeded, WitnessView


@dataclass
class Policy:
    """When to keep witness state (module docstring)."""

    budget: int = DEFAULT_BUDGET
    node_budget: int = DEFAULT_NODE_BUDGET
    bdd_seconds: float = DEFAULT_SECONDS
    min_delete_share: float = 0.05
    window: int = 4
    mode: str = "auto"  # auto | witness | bdd | dred


@dataclass
class BatchResult:
    """One maintained batch: the state kind used, seconds, tuples touched, policy note."""

    mode: str
    seconds: float
    inserted: int
    deleted: int
    touched: int
    note: str = ""

    def to_json(self) -> dict:
        return self.__dict__ | {"seconds": round(self.seconds, 5)}


@dataclass
class RecursiveState:
    """A recursive query's maintained view over a link graph (row id -> (src, dst, cost))."""

    shape: object
    links: dict
    policy: Policy = field(default_factory=Policy)

    def __post_init__(self):
        self.spec = Spec.of(self.shape)
        self.history: list = []  # (inserted, deleted) per batch
        self.note = ""
        self.witness: WitnessView | None = None
        self.dred: DRedView | None = None
        self.over_budget = False
        if self.policy.mode == "dred":
            self._to_dred("DRed asked for")
        else:
            self._to_witness()

    @property
    def mode(self) -> str:
        if self.witness is None:
            return "dred"
        return "bdd" if isinstance(self.witness, BddView) else "witness"

    def _graph(self) -> LinkGraph:
        return LinkGraph(dict(self.links))

    def _to_witness(self) -> bool:
        """Witness sets for hop-bounded views within budget, else BDDs, else DRed."""
        why = "no hop bound: minimal witnesses are the simple paths"
        if self.policy.mode != "bdd" and self.spec.max_hops is not None:
            try:
                self.witness, self.dred = WitnessView.build(self.spec, self._graph(), self.policy.budget), None
                return True
            except BudgetExceeded as e:
                why = str(e)
        if self.policy.mode == "witness":
            self.over_budget = True
            self._to_dred(f"{why}: DRed instead")
            return False
        try:
            self.witness, self.dred = BddView.build(
                self.spec, self._graph(), self.policy.node_budget, self.policy.bdd_seconds
            ), None
            self.note = f"{why}: BDDs"
            return True
        except BudgetExceeded as e:
            self.over_budget = True
            self._to_dred(f"{why}; {e}: DRed instead")
            return False

    def _to_dred(self, why: str) -> None:
        self.witness, self.dred, self.note = None, DRedView.build(self.spec, self._graph()), why

    def tuples(self) -> set:
        return self.witness.tuples() if self.witness is not None else set(self.dred.view)

    def apply(self, inserted: dict, deleted) -> BatchResult:
        """Maintain the view for one batch (deletions first, then insertions)."""
        deleted = set(deleted) & set(self.links)
        t0 = time.perf_counter()
        mode, note = self.mode, ""
        for r in deleted:
            del self.links[r]
        self.links.update(inserted)
        if self.witness is not None:
            touched = self.witness.delete(deleted)
            try:
                touched += self.witness.insert(inserted)
            except BudgetExceeded as e:
                self.over_budget = True
                self._to_dred(f"{e}: DRed from here on")
                note = self.note
        else:
            over, back = self.dred.delete(deleted)
            touched = over + back + self.dred.insert(inserted)
        self.history.append((len(inserted), len(deleted)))
        note = note or self._decide()
        return BatchResult(mode, time.perf_counter() - t0, len(inserted), len(deleted), touched, note)

    def _decide(self) -> str:
        """The policy after a batch (module docstring); returns what it changed, if anything."""
        if self.policy.mode != "auto":
            return ""
        recent = self.history[-self.policy.window :]
        ins, dels = sum(i for i, _ in recent), sum(d for _, d in recent)
        share = dels / max(1, ins + dels)
        if (
            self.witness is not None
            and len(recent) >= self.policy.window
            and share < self.policy.min_delete_share
        ):
            self._to_dred(f"delete share {share:.0%} over {len(recent)} batches: witness state dropped")
            return self.note
        if self.witness is None and not self.over_budget and share >= self.policy.min_delete_share:
            if self._to_witness():
                self.note = f"delete share {share:.0%}: witness state rebuilt"
                return self.note
        return ""

    def fragments(self, fragment_of) -> frozenset:
        """The sketch: fragments of one witness per needed tuple (``advisor.recursive.sketch``)."""
        need = needed(self.shape, self.tuples())
        if isinstance(self.witness, BddView):
            return project_bdd(self.witness, need, fragment_of)
        if self.witness is not None:
            return project(self.witness.formula, need, fragment_of)
        parent = first_witnesses(self.spec, self._graph())
        return project(lambda t: [chain(parent, t)], need, fragment_of)
