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
from advisor.plan.conjuncts import column_equalities
from advisor.plan.uniqueness import distinct_rows


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


VAL, SET = "val", "set"


def carried_kinds(node: ir.Node, names: dict[int, str]) -> tuple[dict[int, str], dict[int, frozenset]]:
    """How each scan in ``names`` (scan id -> the attribute's internal name) can reach ``node``'s
    output without per-row fragment ids: {scan id: VAL or SET} (scans missing cannot), and
    {id(aggregation node): scan ids whose values turn into value sets there}.

    VAL is ``groups_by_value``.  SET extends it past an Aggregate or DISTINCT that does not keep
    the attribute: the provenance of its group is the union of its input rows' provenance, so the
    group carries the set of their values.  It is taken where the input rows were already grouped
    by the attribute (TPC-H's "count the orders with quantity > 300": one value per order, where
    fragment ids would need one per lineitem row); on raw rows fragment ids cost no more (an
    array of ids per group, ``to_sql`` kind IDS) and bring at most one entry per fragment to the
    driver, not one per provenance value.  A top-k may sit above a value set only where its input
    rows are distinct (``uniqueness.distinct_rows``: otherwise ties between equal rows would pick
    between provenance sets), and no UNION above any of it.  An inner join or filter on ``a = b``
    (same type, not floating point) makes ``b`` a name of ``a``'s value on the rows it keeps, so
    TPC-H Q3's orders.o_orderkey is grouped by ``GROUP BY l_orderkey``.

    >>> from advisor.plan.parse import parse_sql
    >>> q = parse_sql("SELECT count(*) AS n FROM (SELECT a, sum(b) AS s FROM t GROUP BY a HAVING sum(b) > 3) x",
    ...               lambda t: [("a", "int"), ("b", "int")])
    >>> kinds, points = carried_kinds(q.root, {s.scan_id: s.cols[0].name for s in q.scans()})
    >>> list(kinds.values()), len(points)
    (['set'], 1)
    """
    points: dict[int, set] = {}
    state = _walk_kinds(node, names, points)
    kinds = {sid: (SET if mode == SET else VAL) for sid, (_, grouped, mode) in state.items()
             if mode is not None and grouped}
    return kinds, {nid: frozenset(s & kinds.keys()) for nid, s in points.items() if s & kinds.keys()}


def _walk_kinds(node: ir.Node, names: dict[int, str], points: dict[int, set]) -> dict:
    """scan id -> (names the attribute goes by here, grouped yet, VAL / SET / None: not carried)."""
    if isinstance(node, ir.Scan):
        return {node.scan_id: (frozenset([names[node.scan_id]]), False, VAL)} if node.scan_id in names else {}
    below: dict = {}
    for ch in node.children:
        below.update(_walk_kinds(ch, names, points))
    if isinstance(node, ir.Union):
        return {sid: (al, g, None) for sid, (al, g, _) in below.items()}
    if isinstance(node, ir.Project):
        return {sid: (al | {c.name for e, c in node.items if isinstance(e, exp.Column) and e.name in al}, g, m)
                for sid, (al, g, m) in below.items()}
    if isinstance(node, (ir.Join, ir.Select)):
        pairs = equal_columns(node)
        return {sid: (_closure(al, pairs), g, m) for sid, (al, g, m) in below.items()}
    if isinstance(node, ir.Aggregate):
        keys = set(node.keys)
    elif isinstance(node, (ir.Distinct, ir.TopK)):
        keys = {c.name for c in node.cols}
    else:
        return below
    out = {}
    for sid, (al, g, m) in below.items():
        if m == VAL and al & keys:
            out[sid] = (al, g or not isinstance(node, ir.TopK), VAL)
        elif isinstance(node, ir.TopK) and m == SET and distinct_rows(node.child):
            out[sid] = (al, g, SET)  # rows differ in their attributes: ties never pick between sets
        elif isinstance(node, ir.TopK) or m is None:
            out[sid] = (al, g, None)
        elif m == SET:
            out[sid] = (frozenset(), True, SET)  # sets of its input rows' sets: unioned
        elif g:
            points.setdefault(id(node), set()).add(sid)
            out[sid] = (frozenset(), True, SET)
        else:
            out[sid] = (al, g, None)
    return out


def equal_columns(node: ir.Node) -> list[tuple[str, str]]:
    """Pairs of columns that hold the same value on every row an inner join or filter keeps: the
    conjuncts ``a = b`` of its condition between two columns of one type, floating point types
    left out (``-0.0 = 0.0`` holds between different values), as are collated strings ('A' = 'a'
    under UTF8_LCASE).  A different type would compare after a cast that can equate different
    values (``'01' = 1``)."""
    cond = node.cond
    if cond is None:
        return []
    types = {c.name: c.dtype.lower() for c in node.cols}
    pairs = []
    for a, b in column_equalities(cond):
        ta, tb = types.get(a), types.get(b)
        if ta is not None and ta == tb and not ta.startswith(("float", "double", "real")) and "collate" not in ta:
            pairs.append((a, b))
    return pairs


def _closure(names: frozenset, pairs: list[tuple[str, str]]) -> frozenset:
    """``names`` with every column a chain of ``pairs`` equates to one of them."""
    out, grew = set(names), True
    while grew:
        grew = False
        for a, b in pairs:
            if (a in out) != (b in out):
                out |= {a, b}
                grew = True
    return frozenset(out)
