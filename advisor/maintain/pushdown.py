"""Selection push-down for deltas (digest §4.4.1).

A conjunct of a selection (or of a join condition) can be applied to a scan's *delta* when it
only talks about attributes that flow unchanged (or via projection expressions) from that scan:
rows failing it can affect neither downstream state nor the result. Conjuncts travel down through
Select, Project (column references are replaced by the projected expressions), Join (to the side
whose attributes they use), Union (renamed positionally), Aggregate and Distinct (only conjuncts
over grouping attributes: filtering groups by key = filtering their input rows by key); they stop
at TopK. Constant conjuncts are never pushed.

`rewrite(root)` returns an equivalent tree with a Select of the pushed conjuncts directly above
each Scan; the engine runs that tree (so the filter hits the delta as it is fetched, and the
BaseSide evaluates the very same subtrees). `pushdown_predicates(root)` gives the same conjuncts
per scan id, for a caller that wants to filter the delta fetch itself (e.g. in Spark).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Optional

from sqlglot import exp

from advisor.plan import ir

from advisor.plan.conjuncts import conjuncts


def _subst(e: exp.Expression, mapping: dict[str, exp.Expression]) -> exp.Expression:
    def repl(n):
        if isinstance(n, exp.Column) and n.name in mapping:
            return mapping[n.name].copy()
        return n

    return e.copy().transform(repl)


def _refs(e: exp.Expression) -> set[str]:
    return ir.referenced(e)


def pushdown_predicates(root: ir.Node) -> dict[int, list[exp.Expression]]:
    """Per scan id, the conjuncts (over the scan's internal attributes) its delta may be filtered by."""
    out: dict[int, list[exp.Expression]] = defaultdict(list)

    def visit(node: ir.Node, preds: list[exp.Expression]) -> None:
        if isinstance(node, ir.Scan):
            seen = {p.sql() for p in out[node.scan_id]}
            for p in preds:
                if p.sql() not in seen:
                    out[node.scan_id].append(p)
                    seen.add(p.sql())
        elif isinstance(node, ir.Select):
            visit(node.child, preds + conjuncts(node.cond))
        elif isinstance(node, ir.Project):
            mapping = {c.name: e for e, c in node.items}
            visit(node.child, [_subst(p, mapping) for p in preds if _refs(p) and _refs(p) <= set(mapping)])
        elif isinstance(node, ir.Join):
            allp = preds + conjuncts(node.cond)
            ln, rn = set(node.left.names), set(node.right.names)
            visit(node.left, [p for p in allp if _refs(p) and _refs(p) <= ln])
            visit(node.right, [p for p in allp if _refs(p) and _refs(p) <= rn])
        elif isinstance(node, ir.Aggregate):
            keys = set(node.keys)
            visit(node.child, [p for p in preds if _refs(p) and _refs(p) <= keys])
        elif isinstance(node, ir.Distinct):
            visit(node.child, [p for p in preds if _refs(p)])
        elif isinstance(node, ir.TopK):
            visit(node.child, [])
        elif isinstance(node, ir.Union):
            for side in (node.left, node.right):
                mapping = {u.name: ir.col_ref(c.name) for u, c in zip(node.cols, side.cols)}
                visit(side, [_subst(p, mapping) for p in preds if _refs(p) <= set(mapping)])
        else:
            for c in node.children:
                visit(c, [])

    visit(root, [])
    return dict(out)


def _and(preds: list[exp.Expression]) -> Optional[exp.Expression]:
    if not preds:
        return None
    e = preds[0].copy()
    for p in preds[1:]:
        e = exp.And(this=e, expression=p.copy())
    return e


def rewrite(root: ir.Node) -> ir.Node:
    """An equivalent tree with each scan wrapped in a Select of its pushed-down conjuncts
    (minus those a Select directly above the scan already applies)."""
    pushed = pushdown_predicates(root)

    def build(node: ir.Node, applied: frozenset = frozenset()) -> ir.Node:
        if isinstance(node, ir.Scan):
            cond = _and([p for p in pushed.get(node.scan_id, []) if p.sql() not in applied])
            return ir.Select(node, cond) if cond is not None else node
        if isinstance(node, ir.Select):
            own = frozenset(p.sql() for p in conjuncts(node.cond))
            return dataclasses.replace(node, child=build(node.child, applied | own))
        if isinstance(node, (ir.Join, ir.Union)):
            return dataclasses.replace(node, left=build(node.left), right=build(node.right))
        if isinstance(node, (ir.Project, ir.Aggregate, ir.Distinct, ir.TopK)):
            return dataclasses.replace(node, child=build(node.child))
        return node

    return build(root)
