"""What a safety or reuse check hands back (``Verdict``) and the human names its reasons use for
internal attributes (``Labels``, ``agg_desc``): shared by ``static_check`` and ``reuse_check``, so
neither check has to import the other for its vocabulary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from sqlglot import exp

from advisor.plan import ir


@dataclass
class Verdict:
    """Outcome of a safety or reuse check: verdict, a human reason, #solver calls, check log."""

    safe: bool
    reason: str
    checks: int = 0
    details: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.safe


def agg_desc(a: ir.AggCall, label=lambda e: e.sql()) -> str:
    """Display form of an aggregate call, e.g. `count(*)`, `sum(popden)`."""
    arg = "*" if a.arg is None else label(a.arg)
    return f"{a.func}({'DISTINCT ' if a.distinct else ''}{arg})"


class Labels:
    """Human names for internal attributes: base column names, aggregate calls, cleaned aliases."""

    def __init__(self, root: ir.Node):
        self.names: dict[str, str] = {}
        self.agg_outs: set[str] = set()
        scans = [n for n in root.walk() if isinstance(n, ir.Scan)]
        srcs = [c.source or c.name for s in scans for c in s.cols]
        for s in scans:
            for c in s.cols:
                src = c.source or c.name
                self.names[c.name] = src if srcs.count(src) == 1 else f"{s.alias}.{src}"
        for n in root.walk():
            if isinstance(n, ir.Aggregate):
                for a in n.aggs:
                    self.agg_outs.add(a.out.name)
        for n in root.walk():  # after the scans so the aggregate args already have names
            if isinstance(n, ir.Aggregate):
                for a in n.aggs:
                    self.names[a.out.name] = agg_desc(a, self.sql)

    def __call__(self, name: str) -> str:
        return self.names.get(name) or re.sub(r"_\d+$", "", name)

    def sql(self, e: Optional[exp.Expression]) -> str:
        if e is None:
            return "*"
        t = e.transform(lambda n: exp.var(self(n.name)) if isinstance(n, exp.Column) else n)
        return t.sql(dialect="spark")

    def op(self, n: ir.Node) -> str:
        """The operator as the user wrote it: WHERE/HAVING/JOIN ON/GROUP BY/ORDER BY ... LIMIT."""
        if isinstance(n, ir.Select):
            kw = "HAVING" if ir.referenced(n.cond) & self.agg_outs else "WHERE"
            return f"{kw} {self.sql(n.cond)}"
        if isinstance(n, ir.Join):
            return f"JOIN ON {self.sql(n.cond)}" if n.cond is not None else "cross product"
        if isinstance(n, ir.TopK):
            keys = ", ".join(self(o) + ("" if asc else " DESC") for o, asc in n.order)
            return f"ORDER BY {keys} LIMIT {n.k}"
        if isinstance(n, ir.SemiJoin):
            return f"EXISTS / IN (semi-join ON {self.sql(n.cond)})"
        if isinstance(n, ir.AntiJoin):
            return f"NOT EXISTS / NOT IN (anti-join ON {self.sql(n.cond)})"
        if isinstance(n, ir.LeftJoin):
            return f"LEFT OUTER JOIN ON {self.sql(n.cond)}"
        if isinstance(n, ir.Aggregate):
            return f"GROUP BY {', '.join(self(k) for k in n.keys)}" if n.keys else "aggregation without GROUP BY"
        names = {ir.Distinct: "DISTINCT", ir.Union: "UNION ALL", ir.Project: "SELECT list"}
        return names.get(type(n), type(n).__name__)

