"""The Z3 check of the witness rule behind node-set (and reachability) sketches.

Claim: over any link graph, if the kept link rows (the sketch's fragments) include, for every
node reached from the source, the links of one witness (a link set in which that node is reached),
then the nodes reached over the kept links are exactly the nodes reached over all links.  Z3
checks it for every graph on ``n`` nodes (every link present or not, every kept subset, every
choice of witnesses), with reachability unrolled ``n`` rounds (enough on ``n`` nodes), and shows
the weaker rules fail: a kept set without a witness for some reached node, or witnesses that are
not kept, can lose nodes (a counterexample exists).  The argument, monotonicity of a positive
fixpoint plus one witness per needed tuple, does not depend on ``n``; the check makes the rule's
two halves (nothing lost, nothing gained) explicit.

>>> reach_lemma(3).safe
True
"""

from __future__ import annotations

from functools import lru_cache

import z3

from advisor.safety.verdict import Verdict

MAX_NODES = 4


def _reach(n: int, edge) -> list:
    """Z3 formulas: node j reached from node 0 by one link or more, over links ``edge(i, j)``."""
    r = [edge(0, j) for j in range(n)]
    for _ in range(n):
        r = [z3.Or(r[j], *[z3.And(r[i], edge(i, j)) for i in range(n)]) for j in range(n)]
    return r


def _valid(hyps: list, goal) -> bool:
    s = z3.Solver()
    s.set("timeout", 10_000)
    s.add(*hyps, z3.Not(goal))
    return s.check() == z3.unsat


@lru_cache(maxsize=None)
def reach_lemma(n: int) -> Verdict:
    """The witness rule on graphs of ``n`` nodes (module docstring)."""
    e = [[z3.Bool(f"e{i}_{j}") for j in range(n)] for i in range(n)]
    k = [[z3.Bool(f"k{i}_{j}") for j in range(n)] for i in range(n)]
    w = [[[z3.Bool(f"w{t}_{i}_{j}") for j in range(n)] for i in range(n)] for t in range(n)]
    pairs = [(i, j) for i in range(n) for j in range(n)]
    full = _reach(n, lambda i, j: e[i][j])
    kept = _reach(n, lambda i, j: k[i][j])
    kept_subset = [z3.Implies(k[i][j], e[i][j]) for i, j in pairs]
    wit = [z3.And(*[z3.Implies(w[t][i][j], e[i][j]) for i, j in pairs]) for t in range(n)]
    reaches = [_reach(n, lambda i, j, t=t: w[t][i][j])[t] for t in range(n)]
    witness_kept = [z3.And(*[z3.Implies(w[t][i][j], k[i][j]) for i, j in pairs]) for t in range(n)]
    same = z3.And(*[kept[j] == full[j] for j in range(n)])
    rule = [z3.Implies(full[t], z3.And(wit[t], reaches[t], witness_kept[t])) for t in range(n)]
    details, ok = [], True

    def claim(what: str, hyps: list, goal, expect: bool) -> None:
        nonlocal ok
        got = _valid(hyps, goal)
        details.append(f"{what}: {'proved' if got else 'refuted (counterexample)'}")
        ok &= got == expect

    claim("kept links reach no node all links do not", kept_subset, z3.And(*[z3.Implies(kept[j], full[j]) for j in range(n)]), True)
    claim("one kept witness per reached node keeps every reached node", kept_subset + rule, same, True)
    weak = [z3.Implies(full[t], z3.And(wit[t], reaches[t])) for t in range(n)]
    claim("witnesses that are not kept keep every reached node", kept_subset + weak, same, False)
    claim("any kept subset keeps every reached node", kept_subset, same, False)
    reason = (f"Z3, graphs of {n} nodes: " + "; ".join(details)) if ok else "Z3 did not confirm the witness rule"
    return Verdict(ok, reason, len(details), details)
