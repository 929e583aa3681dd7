"""Differential tests of every recursive shape's driver-side maintenance, without Spark: random
link graphs (cycles, self-loops and parallel links included) and random delete/insert sequences.
Each maintained state (derivation supports, witness sets, DRed, and the policy-driven state)
equals the recomputed fixpoint after every batch, node-set reachability equals networkx's, the
sketch projected from the maintained state equals the one from a state built afresh, and the link
rows of the sketch's fragments derive every needed tuple and nothing outside the view."""

from __future__ import annotations

import networkx as nx
from hypothesis import given, settings, strategies as st

from advisor.recursive.derive import LinkGraph, Spec, fixpoint
from advisor.recursive.dred import DRedView
from advisor.recursive.maintain import RecursivePolicy, RecursiveState
from advisor.recursive.shape import recognise
from advisor.recursive.sketch import needed
from advisor.recursive.supports import SupportView
from advisor.recursive.witnesses import WitnessView

N = 6
node_st = st.one_of(st.integers(0, N - 1), st.just(None))  # None: a NULL end, which joins nothing
link_st = st.tuples(node_st, node_st, st.integers(1, 3), st.booleans())

# one query per shape; the step selection (``l.cost < 3``) is the link's step flag below
SHAPES = {
    "nodes forward": "WITH RECURSIVE reach(node) AS (SELECT dst FROM link WHERE src = 0 UNION SELECT l.dst "
    "FROM reach r JOIN link l ON l.src = r.node) SELECT node FROM reach",
    "nodes backward": "WITH RECURSIVE reach(node) AS (SELECT src FROM link WHERE dst = 0 UNION SELECT l.src "
    "FROM reach r JOIN link l ON l.dst = r.node) SELECT node FROM reach",
    "nodes hop-bounded, step selection": "WITH RECURSIVE reach(node, hops) AS (SELECT dst, 1 FROM link WHERE "
    "src IN (0, 1) UNION SELECT l.dst, r.hops + 1 FROM reach r JOIN link l ON l.src = r.node WHERE r.hops < 3 "
    "AND l.cost < 3) SELECT node, MIN(hops) FROM reach GROUP BY node",
    "pairs forward": "WITH RECURSIVE r(src, dst) AS (SELECT src, dst FROM link UNION SELECT r.src, l.dst FROM r "
    "JOIN link l ON r.dst = l.src) SELECT * FROM r WHERE src IN (0, 2)",
    "pairs backward, step selection": "WITH RECURSIVE r(src, dst) AS (SELECT src, dst FROM link WHERE dst = 1 "
    "UNION SELECT l.src, r.dst FROM link l JOIN r ON l.dst = r.src WHERE l.cost < 3) SELECT * FROM r",
    "paths with cost and hops": "WITH RECURSIVE p(src, dst, cost, hops) AS (SELECT src, dst, cost, 1 FROM link "
    "WHERE src = 0 UNION SELECT p.src, l.dst, p.cost + l.cost, p.hops + 1 FROM p JOIN link l ON p.dst = l.src "
    "WHERE p.hops < 3) SELECT src, dst, MIN(cost) FROM p GROUP BY src, dst",
}


def links_of(shape, raw: list) -> dict:
    """Row id -> link tuple as ``load_links`` makes it from link(src, dst, cost): the shape's near
    and far columns (swapped for a backward node set), a step flag for ``l.cost < 3``."""
    swap = shape.src_col == "dst"
    out = {}
    for i, (s, d, c, _) in enumerate(raw):
        ends = (d, s) if swap else (s, d)
        out[i] = ends + ((c, True, c < 3) if shape.step_filter else (c,))
    return out


def sufficient(spec, shape, links: dict, frags: frozenset, frag_of) -> bool:
    full = fixpoint(spec, LinkGraph(dict(links)))
    kept = fixpoint(spec, LinkGraph({r: lk for r, lk in links.items() if frag_of(r) in frags}))
    return set(needed(shape, full)) <= kept <= full


def nx_nodes(table: dict, start: int, reverse: bool) -> set:
    """Nodes reached from ``start`` by one link or more of link(src, dst) (``reverse``: reaching it)."""
    g = nx.MultiDiGraph()
    null = iter(range(-1, -10**6, -1))  # each NULL end a node of its own link only
    ends = [(next(null) if s is None else s, next(null) if d is None else d) for s, d, *_ in table.values()]
    g.add_edges_from((d, s) if reverse else (s, d) for s, d in ends)
    if start not in g:
        return set()
    return {(n if n is None or n >= 0 else None,) for f in g.successors(start) for n in nx.descendants(g, f) | {f}}


@settings(max_examples=150)
@given(
    st.lists(link_st, min_size=1, max_size=16),
    st.lists(st.tuples(st.lists(st.integers(0, 40), max_size=3), st.lists(link_st, max_size=3)), min_size=1,
             max_size=4),
    st.sampled_from(sorted(SHAPES)),
    st.integers(1, 4),
)
def test_every_shape_maintained_equals_recomputed_and_its_sketch_equals_a_rebuilt_one(raw, batches, name, nfrag):
    shape = recognise(SHAPES[name])
    spec = Spec.of(shape)
    links = links_of(shape, raw)
    table = dict(enumerate(raw))
    sup = SupportView.build(spec, LinkGraph(dict(links)))
    dred = DRedView.build(spec, LinkGraph(dict(links)))
    wit = WitnessView.build(spec, LinkGraph(dict(links))) if spec.max_hops is not None else None
    state = RecursiveState(shape, dict(links), RecursivePolicy(window=1))
    nxt = len(raw)
    frag_of = lambda r: r % nfrag  # noqa: E731  a fragment per row id class
    for dels, ins in batches:
        gone = {d % max(1, len(links)) for d in dels} & set(links)
        new = links_of(shape, [(s, d, c, f) for s, d, c, f in ins])
        new = {nxt + i: lk for i, lk in new.items()}
        nxt += len(new)
        for r in gone:
            del links[r]
            del table[r]
        links.update(new)
        table.update({nxt - len(new) + i: lk for i, lk in enumerate(ins)})
        for v in (sup, wit):
            if v is not None:
                v.delete(gone)
                v.insert(new)
        dred.delete(gone)
        dred.insert(new)
        state.apply(new, gone)
        fresh = fixpoint(spec, LinkGraph(dict(links)))
        assert sup.tuples() == fresh and dred.view == fresh and state.tuples() == fresh
        assert wit is None or wit.tuples() == fresh
        assert sup.level == SupportView.build(spec, LinkGraph(dict(links))).level
        if name == "nodes forward":
            assert fresh == nx_nodes(table, 0, reverse=False)
        if name == "nodes backward":
            assert fresh == nx_nodes(table, 0, reverse=True)
        got = state.fragments(frag_of)
        again = RecursiveState(shape, dict(links), RecursivePolicy(mode=state.mode)).fragments(frag_of)
        assert got == again
        assert sufficient(spec, shape, links, got, frag_of)


def test_a_dense_cycle_keeps_every_node_when_one_of_several_shortest_paths_fails():
    # two disjoint shortest paths 0->1->3 and 0->2->3, and a cycle back to 0
    links = {1: (0, 1, 1), 2: (1, 3, 1), 3: (0, 2, 1), 4: (2, 3, 1), 5: (3, 0, 1)}
    spec = Spec(forward=True, nodes=True, sources=frozenset({0}))
    v = SupportView.build(spec, LinkGraph(dict(links)))
    checked = v.delete({2})
    assert v.tuples() == {(0,), (1,), (2,), (3,)} and v.level[(3,)] == 2
    assert checked == 1  # only node 3 lost a tight support; its other one holds it at level 2
    v.delete({4})  # now 3 is unreachable, and 0 (reached through 3) goes too
    assert v.tuples() == {(1,), (2,)}


def test_the_policy_picks_the_method_by_measured_cost_and_says_why():
    shape = recognise(SHAPES["nodes forward"])
    links = {i: (i, i + 1, 1) for i in range(30)}
    state = RecursiveState(shape, dict(links), RecursivePolicy(window=2))
    first = state.apply({}, [5])
    assert first.method == "absorption" and "absorption" in first.note
    state.costs.add("absorption", 1, 10.0, state.batches)  # absorption measured as far slower
    second = state.apply({}, [6])
    assert second.method == "recompute" and second.note.startswith("recomputation")
    assert state.tuples() == fixpoint(Spec.of(shape), LinkGraph({r: lk for r, lk in links.items() if r < 5}))
