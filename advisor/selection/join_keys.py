"""Join keys of the sampled table that decide its groups (beyond the paper's group-by pool).

In ``lineitem JOIN orders ON l_orderkey = o_orderkey GROUP BY o_orderdate`` no group-by attribute
is a column of lineitem, so the paper's group-by strategies would sketch only orders and read
lineitem in full.  Yet ``o_orderkey`` is the key of orders, so ``l_orderkey`` determines
``o_orderdate``: every order's line items fall in one group, and a sketch on ``l_orderkey`` keeps
groups whole, as a sketch on a group-by attribute does.  Such a column joins the group-by pool.

The rule is functional dependencies and nothing else: equal columns determine each other, and a
table's single-column key determines every column of that table; a column qualifies when the
closure of those dependencies from it holds every group-by attribute.

>>> deps = KeyDeps(equal=[("l_ok", "o_ok")], keys={"o_ok": ["o_ok", "o_date", "o_ck"], "c_ck": ["c_ck", "c_seg"]})
>>> sorted(deps.closure("l_ok"))
['l_ok', 'o_ck', 'o_date', 'o_ok']
>>> deps.decides("l_ok", ["o_date"]), deps.decides("l_ok", ["c_seg"])
(True, False)
>>> deps.equal.append(("o_ck", "c_ck"))
>>> deps.decides("l_ok", ["c_seg", "o_date"])
True
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from advisor.plan import ir


@dataclass
class KeyDeps:
    """Functional dependencies between a query's internal column names: ``equal`` pairs (equi-join
    and filter equalities) and ``keys``, a key column -> every column of its table."""

    equal: list = field(default_factory=list)
    keys: dict = field(default_factory=dict)

    def closure(self, col: str) -> set:
        """Every column ``col`` determines."""
        out, grew = {col}, True
        while grew:
            grew = False
            for a, b in self.equal:
                if (a in out) != (b in out):
                    out |= {a, b}
                    grew = True
            for k, cols in self.keys.items():
                if k in out and not out.issuperset(cols):
                    out |= set(cols)
                    grew = True
        return out

    def decides(self, col: str, group_keys: list) -> bool:
        """Whether every group-by attribute is a function of ``col`` (one group per value)."""
        return bool(group_keys) and set(group_keys) <= self.closure(col)


def equalities(node: ir.Node) -> list:
    """``a = b`` pairs of plain columns in the join and filter conditions below ``node``."""
    out = []
    for n in node.walk():
        cond = n.cond if isinstance(n, (ir.Select, ir.Join)) else None
        if cond is None:
            continue
        for eq in cond.find_all(exp.EQ):
            if isinstance(eq.this, exp.Column) and isinstance(eq.expression, exp.Column):
                out.append((eq.this.name, eq.expression.name))
    return out


def key_deps(inner: ir.Aggregate, unique_columns: dict) -> KeyDeps:
    """The dependencies below an aggregation; ``unique_columns``: table -> its columns that are a key
    on their own (base names; a composite key's part determines nothing alone)."""
    deps = KeyDeps(equal=equalities(inner.child))
    for s in inner.child.walk():
        if isinstance(s, ir.Scan):
            names = [c.name for c in s.cols]
            for c in s.cols:
                if c.source in unique_columns.get(s.table, ()):
                    deps.keys[c.name] = names
    return deps
