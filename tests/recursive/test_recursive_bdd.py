"""BDD absorption provenance, differential: after every random insert/delete batch the BDD view
equals a from-scratch evaluation and networkx's reachability, each tuple's formula has exactly the
minimal witnesses explicit witness sets compute, the row-id index names exactly the tuples whose
formula depends on the row, and the sketch projected from the maintained BDDs equals the one
projected from a fresh build and is sufficient."""

from __future__ import annotations

import networkx as nx
from hypothesis import given, settings, strategies as st

from advisor.recursive.bdd_witnesses import BddView, project_bdd
from advisor.recursive.derive import LinkGraph, Spec, fixpoint
from advisor.recursive.witnesses import BudgetExceeded, WitnessView

NODES = ["A", "B", "C", "D", "E", None]  # None: a NULL end, which joins nothing
link_st = st.tuples(st.sampled_from(NODES), st.sampled_from(NODES), st.integers(1, 5))
batch_st = st.tuples(st.lists(link_st, max_size=4), st.lists(st.integers(0, 10_000), max_size=3))
SPECS = [
    Spec(forward=True),
    Spec(forward=False),
    Spec(forward=True, sources=frozenset("AB")),
    Spec(forward=True, cost=True, hops=True, max_hops=3),
    Spec(forward=True, hops=True, max_hops=2),
]


def nx_reach(links: dict, sources=None) -> set:
    """(s, d) with a path of at least one link from s to d, by networkx (NULL ends join nothing)."""
    g = nx.MultiDiGraph()
    g.add_edges_from((("null", "s", r) if s is None else s, ("null", "d", r) if d is None else d)
                     for r, (s, d, _) in links.items())
    back = lambda n: None if isinstance(n, tuple) else n  # noqa: E731
    out = set()
    for s in g.nodes:
        if sources is not None and back(s) not in sources:
            continue
        for f in {d for _, d in g.out_edges(s)}:
            out |= {(back(s), back(d)) for d in nx.descendants(g, f) | {f}}
    return out


def check(v: BddView, spec: Spec, live: dict, frag: dict) -> None:
    fresh = fixpoint(spec, LinkGraph(live))
    assert v.tuples() == fresh
    if not spec.hops:
        assert {(t[0], t[1]) for t in fresh} == nx_reach(live, spec.sources)
    w = WitnessView.build(spec, LinkGraph(live))
    assert {t: v.formula(t) for t in fresh} == {t: w.formula(t) for t in fresh}
    # the index: row -> exactly the tuples whose formula names it
    want = {(r, t) for t in fresh for wit in w.formula(t) for r in wit}
    assert {(r, t) for r, ts in v.index.items() for t in ts} == want
    # the sketch: maintained equals recaptured, and its fragments' links derive every tuple
    order = sorted(fresh, key=repr)
    sketch = project_bdd(v, order, frag.get)
    again = BddView.build(spec, LinkGraph(dict(live)))
    assert project_bdd(again, order, frag.get) == sketch
    kept = {r: lk for r, lk in live.items() if frag[r] in sketch}
    assert fixpoint(spec, LinkGraph(kept)) == fresh  # recursion is monotone: nothing outside the view


@settings(max_examples=60)
@given(
    st.lists(link_st, max_size=10),
    st.lists(batch_st, min_size=1, max_size=4),
    st.sampled_from(SPECS),
    st.integers(1, 4),
)
def test_bdd_view_equals_recomputation_and_witness_sets_after_every_batch(links, batches, spec, n_frag):
    live = dict(enumerate(links))
    frag = {r: r % n_frag for r in range(len(links) + 4 * len(batches))}
    v = BddView.build(spec, LinkGraph(dict(live)))
    check(v, spec, live, frag)
    nxt = len(links)
    for ins, dels in batches:
        ids = sorted(live)
        gone = {ids[i % len(ids)] for i in dels} if ids else set()
        for r in gone:
            del live[r]
        v.delete(gone)
        new = {nxt + i: link for i, link in enumerate(ins)}
        nxt += len(ins)
        live.update(new)
        v.insert(new)
        check(v, spec, live, frag)


class CountingView:
    """Derivation counts transplanted to recursion (what non-recursive maintenance does), for
    reachable(x, y) :- link(x, z), reachable(z, y)."""

    def __init__(self, links: dict):
        self.links = dict(links)
        view = fixpoint(Spec(forward=False), LinkGraph(links))
        self.count = {t: 0 for t in view}
        for s, d, _ in links.values():
            self.count[(s, d)] += 1
            for t in view:
                if t[0] == d:
                    self.count[(s, t[1])] += 1

    def delete(self, rid) -> None:
        s, d, _ = self.links.pop(rid)
        self.count[(s, d)] -= 1
        for t in [t for t, n in self.count.items() if n > 0 and t[0] == d]:
            self.count[(s, t[1])] -= 1

    def tuples(self) -> set:
        return {t for t, n in self.count.items() if n > 0}


def test_the_cyclic_counter_example_defeats_counting_but_not_bdds():
    # B->C, C->B, C->D; delete C->D: D is unreachable, yet reachable(B,D) and reachable(C,D) each
    # keep a derivation through the other, so counting keeps them
    links = {1: ("B", "C", 1), 2: ("C", "B", 1), 3: ("C", "D", 1)}
    counting = CountingView(links)
    counting.delete(3)
    assert ("B", "D") in counting.tuples() and ("C", "D") in counting.tuples()
    for spec in (Spec(forward=False), Spec(forward=True)):
        v = BddView.build(spec, LinkGraph(dict(links)))
        assert v.delete({3}) == 2  # the index names (B,D) and (C,D) only
        assert v.tuples() == nx_reach({1: links[1], 2: links[2]})
        assert ("B", "D") not in v.tuples() and ("C", "D") not in v.tuples()


def test_a_complete_graph_fits_bdds_where_witness_sets_exceed_their_budget():
    nodes = "ABCDEF"
    links = {i: (a, b, 1) for i, (a, b) in enumerate((a, b) for a in nodes for b in nodes if a != b)}
    try:
        WitnessView.build(Spec(forward=True), LinkGraph(links), budget=2_000)
        raise AssertionError("simple paths of a complete graph on 6 nodes exceed 2,000 row ids")
    except BudgetExceeded:
        pass
    v = BddView.build(Spec(forward=True, sources=frozenset("A")), LinkGraph(dict(links)))
    assert v.tuples() == nx_reach(links, {"A"})
    v.delete([r for r, (s, d, _) in links.items() if d == "F"][:4])
    assert ("A", "F") in v.tuples()  # one link into F is left
    v.delete([r for r, (s, d, _) in links.items() if d == "F"])
    assert ("A", "F") not in v.tuples() and len(v.tuples()) == 5


def test_the_node_budget_stops_bdd_growth():
    links = {i: (a, b, 1) for i, (a, b) in enumerate((a, b) for a in "ABCDEFG" for b in "ABCDEFG" if a != b)}
    try:
        BddView.build(Spec(forward=True), LinkGraph(links), budget=50)
    except BudgetExceeded:
        return
    raise AssertionError("all-pairs reachability on 7 complete nodes needs more than 50 BDD nodes")


@settings(max_examples=25)
@given(st.lists(link_st, min_size=1, max_size=10), st.lists(batch_st, min_size=1, max_size=3))
def test_bdd_state_asked_for_stays_bdd_and_its_sketch_equals_a_recapture(links, batches):
    from advisor.recursive.maintain import RecursivePolicy, RecursiveState
    from advisor.recursive.shape import recognise

    shape = recognise(
        "WITH RECURSIVE r(src, dst) AS (SELECT src, dst FROM link UNION SELECT r.src, l.dst "
        "FROM r JOIN link l ON r.dst = l.src) SELECT * FROM r"
    )
    live = dict(enumerate(links))
    state = RecursiveState(shape, dict(live), RecursivePolicy(mode="bdd"))
    assert state.mode == "bdd"
    nxt = len(links)
    frag = lambda r: r % 3  # noqa: E731
    for ins, dels in batches:
        ids = sorted(live)
        gone = {ids[i % len(ids)] for i in dels} if ids else set()
        new = {nxt + i: link for i, link in enumerate(ins)}
        nxt += len(ins)
        for r in gone:
            del live[r]
        live.update(new)
        assert state.apply(new, gone).mode == "bdd"
        assert state.tuples() == fixpoint(Spec(forward=True), LinkGraph(live))
        assert state.fragments(frag) == RecursiveState(shape, dict(live), RecursivePolicy(mode="bdd")).fragments(frag)


def test_a_pickled_bdd_view_loads_with_the_same_formulas_and_keeps_maintaining():
    import pickle

    links = {1: ("A", "B", 1), 2: ("B", "C", 1), 3: ("C", "A", 1), 4: ("C", "B", 1), 5: ("B", "D", 1)}
    v = BddView.build(Spec(forward=True), LinkGraph(dict(links)))
    v.delete({4})
    w = pickle.loads(pickle.dumps(v))
    assert w.tuples() == v.tuples() and all(w.formula(t) == v.formula(t) for t in v.tuples())
    w.delete({2})
    del links[4], links[2]
    assert w.tuples() == fixpoint(Spec(forward=True), LinkGraph(links))
