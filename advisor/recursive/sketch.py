"""Provenance sketches of recursive queries: the fragments (of a range partition of the link table
on one attribute) holding the rows of one minimal witness per needed view tuple.

Needed tuples: every view tuple passing the outer selection on the source, or, for a MIN/MAX
outer query grouped by the endpoints ((src, dst), or the node), every tuple attaining a group's extreme (all tied winners, one
witness each).  Because the recursion is monotone, the link rows of the sketch's fragments derive
a subset of the view that still holds a witness of every needed tuple, so the outer query's answer
is unchanged (``advisor.recursive.proof`` checks the MIN/MAX step with Z3).  The witness per tuple
is chosen deterministically, preferring fragments already chosen, so a sketch projected from
maintained witness sets equals one recaptured from scratch.

>>> from advisor.recursive.derive import LinkGraph, Spec
>>> from advisor.recursive.witnesses import WitnessView
>>> g = LinkGraph({1: ("A", "B", 1), 2: ("B", "C", 1), 3: ("X", "Y", 1)})
>>> w = WitnessView.build(Spec(forward=True), g)
>>> sorted(project(w.formula, [("A", "C")], {1: 0, 2: 0, 3: 5}.get))
[0]
"""

from __future__ import annotations

from collections import defaultdict



def needed(shape, tuples) -> list:
    """The view tuples whose witnesses the sketch must keep (module docstring), sorted."""
    cols = list(shape.columns)
    if shape.outer_sources is not None:
        tuples = [t for t in tuples if t[0] in shape.outer_sources]
    if shape.kind != "minmax":
        return sorted(tuples, key=repr)
    ends = 1 if getattr(shape, "nodes", False) else 2
    groups = defaultdict(list)
    for t in tuples:
        groups[t[:ends]].append(t)
    out = set()
    for ts in groups.values():
        for func, col in shape.aggregates:
            i = cols.index(col)
            best = (min if func == "min" else max)(t[i] for t in ts)
            out.update(t for t in ts if t[i] == best)
    return sorted(out, key=repr)


def project(witnesses_of, tuples, fragment_of) -> frozenset:
    """Fragments of one witness per tuple: the witness adding the fewest new fragments, ties broken
    by its fragments and row ids, so the result depends only on the witness sets."""
    chosen: set = set()
    for t in tuples:
        best = None
        for w in witnesses_of(t):
            frags = frozenset(fragment_of(r) for r in w)
            key = (len(frags - chosen), sorted(frags), sorted(w, key=repr))
            if best is None or key < best[0]:
                best = (key, frags)
        if best is None:
            raise ValueError(f"view tuple {t!r} has no witness")
        chosen |= best[1]
    return frozenset(chosen)
