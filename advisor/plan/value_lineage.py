"""Does a plan carry a scan's attribute *by value* up to its result: is the attribute's value
constant over the provenance of every output row?

It is when every Aggregate / DISTINCT above the scan keeps the attribute (by its internal name, or
a name a projection gave it unchanged) among its keys, every top-k above it still outputs it (so
ties never pick between fragments), at least one such aggregation groups it, and no UNION lies
above it.  Then a group's provenance rows all share the value, and the fragments of a result are
those of its values: captures and state initialisations carry values instead of per-row fragment
ids (``advisor.plan.to_sql`` kind VAL).
"""

from __future__ import annotations

from sqlglot import exp

from advisor.plan import ir


def groups_by_value(node: ir.Node, names: dict[int, str]) -> bool:
    """True when every scan in ``names`` (scan id -> the attribute's internal name) has its
    attribute carried by value to ``node``'s output and grouped on the way (see the module)."""
    ok, seen = _walk(node, names)
    return ok and bool(seen) and all(g for _, g in seen.values())


def _walk(node: ir.Node, names: dict[int, str]):
    """(ok, scan_id -> (names the attribute goes by here, grouped by an aggregation yet))."""
    if isinstance(node, ir.Scan):
        return True, ({node.scan_id: (frozenset([names[node.scan_id]]), False)}
                      if node.scan_id in names else {})
    ok, below = True, {}
    for ch in node.children:
        o, b = _walk(ch, names)
        ok, below = ok and o, {**below, **b}
    if not ok or not below:
        return ok, below
    if isinstance(node, ir.Union):
        return False, below
    if isinstance(node, ir.Project):
        return True, {sid: (al | {c.name for e, c in node.items
                                   if isinstance(e, exp.Column) and e.name in al}, g)
                      for sid, (al, g) in below.items()}
    if isinstance(node, ir.Aggregate):
        keys = set(node.keys)
    elif isinstance(node, (ir.Distinct, ir.TopK)):
        keys = {c.name for c in node.cols}
    else:
        return True, below
    if any(not (al & keys) for al, _ in below.values()):
        return False, below
    grouped = not isinstance(node, ir.TopK)
    return True, {sid: (al, g or grouped) for sid, (al, g) in below.items()}
