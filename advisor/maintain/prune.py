"""Column pruning for the plan the maintenance engine runs: each scan keeps only the attributes
something above it reads.

The parser's scans carry every column of their table (TPC-H orders: 9, with long comment
strings), and the engine's annotated frames, the base side's Spark answers and the join-side
cache would carry them all. An attribute is needed when the root outputs it, or a selection,
join condition, projection item, grouping key or aggregate argument reads it, or it is a
sketched partition attribute (fragments are assigned from it). DISTINCT, top-k (ties are broken
by every attribute) and UNION (positional) need all their input attributes. A scan keeps at
least one column so it still yields its rows (``count(*)``).
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from advisor.plan import ir


def prune(root: ir.Node, keep: Iterable[str] = ()) -> ir.Node:
    """An equivalent tree whose scans drop the attributes no operator above them uses."""
    keep = frozenset(keep)

    def need(node: ir.Node, req: set[str]) -> ir.Node:
        if isinstance(node, ir.Scan):
            cols = [c for c in node.cols if c.name in req or c.name in keep] or node.cols[:1]
            return dataclasses.replace(node, cols=cols) if len(cols) < len(node.cols) else node
        if isinstance(node, ir.Select):
            return dataclasses.replace(node, child=need(node.child, req | ir.referenced(node.cond)))
        if isinstance(node, ir.Project):
            used = set().union(*[ir.referenced(e) for e, _ in node.items]) if node.items else set()
            return dataclasses.replace(node, child=need(node.child, used))
        if isinstance(node, ir.Aggregate):
            used = set(node.keys)
            for a in node.aggs:
                if a.arg is not None:
                    used |= ir.referenced(a.arg)
            return dataclasses.replace(node, child=need(node.child, used))
        if isinstance(node, ir.Join):
            used = req | (ir.referenced(node.cond) if node.cond is not None else set())
            return dataclasses.replace(node, left=need(node.left, used & set(node.left.names)),
                                       right=need(node.right, used & set(node.right.names)))
        if isinstance(node, (ir.Distinct, ir.TopK)):
            return dataclasses.replace(node, child=need(node.child, set(node.child.names)))
        if isinstance(node, ir.Union):
            return dataclasses.replace(node, left=need(node.left, set(node.left.names)),
                                       right=need(node.right, set(node.right.names)))
        return node

    return need(root, set(root.names))
