"""The reuse a template's own bindings allow: of its latest instances, how many a sketch captured for
an earlier one could have served (the reuse test, ``advisor.safety.reuse_check``, on the logged SQL).

A top-k whose date moves below the aggregation is never served by an earlier instance's sketch (a
top-k reuses only identical constants or a smaller k); a HAVING whose threshold only rises always
is.  The template's frequency alone predicts both alike, so a dashboard's moving-date panel was
captured anew for every instance until the measured rule stopped it (six captures at TPC-H SF1).
With ``m`` instances that had a predecessor and ``s`` of them served, a capture now is expected to
serve ``prior * (s + 1) / (m + 1)`` later instances (Laplace's rule of succession on the prior,
which it equals while nothing is known); ``expected_reuses`` says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from advisor.caches import BoundedMemo
from advisor.errors import BadInput
from advisor.plan.parse import parse_sql
from advisor.safety.reuse_check import check_reuse

if TYPE_CHECKING:
    from advisor.warehouse.store import Store

WINDOW = 8  # latest instances of the template compared (pairs: at most WINDOW * (WINDOW - 1) / 2)
_SERVES = BoundedMemo("binding reuse verdicts", 4096)  # (earlier SQL, later SQL) -> bool


@dataclass(frozen=True)
class BindingReuse:
    """``served`` of ``tried`` instances (each after at least one earlier) an earlier one could serve."""
    served: int
    tried: int

    def expected_reuses(self, prior: float) -> float:
        """Later instances a sketch captured now is expected to serve.

        >>> BindingReuse(0, 0).expected_reuses(3.0), BindingReuse(0, 3).expected_reuses(3.0)
        (3.0, 0.75)
        >>> BindingReuse(4, 4).expected_reuses(3.0)
        3.0
        """
        return prior * (self.served + 1) / (self.tried + 1)

    def describe(self) -> str:
        return (f"{self.served} of the template's last {self.tried} instance(s) could reuse an earlier "
                f"instance's sketch (reuse test on their bindings)")


def logged_instances(store: Store, template: str, limit: int = WINDOW) -> list[str]:
    """The SQL of the template's latest logged runs, oldest first."""
    out = []
    for r in store.query("SELECT sql, record_json FROM runs WHERE kind='run' ORDER BY id DESC LIMIT 400"):
        try:
            tpl = json.loads(r["record_json"]).get("template")
        except ValueError:
            tpl = None
        if tpl == template and r["sql"]:
            out.append(r["sql"])
            if len(out) >= limit:
                break
    return out[::-1]


def _serves(earlier: str, later: str, schema: Callable) -> bool:
    key = (earlier, later)
    got = _SERVES.get(key)
    if got is None:
        try:
            a, b = parse_sql(earlier, schema), parse_sql(later, schema)
            got = a.template == b.template and check_reuse(a.root, b.root, {}).safe
        except BadInput:
            got = False
        _SERVES.put(key, got)
    return got


def binding_reuse(sqls: list[str], schema: Callable) -> BindingReuse:
    """How many of ``sqls`` (oldest first), after the first, an earlier one's sketch could serve
    (no statistics assumed: the test is conservative).

    >>> schema = {"t": [("g", "int"), ("v", "int"), ("d", "int")]}.get
    >>> rising = [f"SELECT g, sum(v) AS s FROM t GROUP BY g HAVING sum(v) > {c}" for c in (10, 20, 30)]
    >>> binding_reuse(rising, schema)
    BindingReuse(served=2, tried=2)
    >>> moving = [f"SELECT g, sum(v) AS s FROM t WHERE d > {d} GROUP BY g ORDER BY s DESC LIMIT 5" for d in (1, 2, 3)]
    >>> binding_reuse(moving, schema)
    BindingReuse(served=0, tried=2)
    """
    served = 0
    for j in range(1, len(sqls)):
        served += any(_serves(sqls[i], sqls[j], schema) for i in range(j))
    return BindingReuse(served, max(0, len(sqls) - 1))
