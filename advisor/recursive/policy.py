"""Choosing how to maintain a recursive view for one batch of link changes, by measured cost:
absorption (incremental on the provenance state), DRed (over-delete and re-derive on the bare
view) or recomputation (the fixpoint from scratch).

Costs are measured, not modelled: each method's seconds on earlier batches, scaled by the batch's
number of changed links for the incremental methods (their work grows with the change) and taken
as they are for recomputation (its work is the whole view).  The estimate is the median over the
last ``window`` measurements; a method not measured lately is tried (so a one-off slow batch does
not exclude a method for good), absorption first.  The choice comes with its reason.

>>> c = Costs()
>>> choose(c, ["absorption", "recompute"], 2)[0]
'absorption'
>>> c.add("absorption", 2, 0.5, 1); c.add("recompute", 0, 0.1, 1)
>>> m, why = choose(c, ["absorption", "recompute"], 2, batch=2)
>>> m, why.split(":")[0]
('recompute', 'recomputation')
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

ORDER = ("absorption", "dred", "recompute")
LABEL = {"absorption": "absorption", "dred": "DRed", "recompute": "recomputation"}
STALE = 8  # batches after which a method's measurements no longer count (it is tried again)


@dataclass
class Costs:
    """Measured (batch index, changed links, seconds) per method."""

    seen: dict = field(default_factory=dict)

    def add(self, method: str, links: int, seconds: float, batch: int) -> None:
        self.seen.setdefault(method, []).append((batch, links, seconds))

    def estimate(self, method: str, links: int, window: int, batch: int) -> float | None:
        """Seconds ``method`` is expected to take on a batch of ``links`` changed links."""
        recent = [m for m in self.seen.get(method, []) if batch - m[0] <= STALE][-window:]
        if not recent:
            return None
        if method == "recompute":
            return statistics.median(s for _, _, s in recent)
        return statistics.median(s / max(1, n) for _, n, s in recent) * max(1, links)


def choose(costs: Costs, available: list, window: int, links: int = 1, batch: int = 0) -> tuple[str, str]:
    """(method, reason) for the next batch (module docstring)."""
    est = {m: costs.estimate(m, links, window, batch) for m in available}
    for m in ORDER:
        if m in available and est[m] is None:
            known = ", ".join(f"{LABEL[k]} {_ms(v)}" for k, v in est.items() if v is not None)
            return m, f"{LABEL[m]}: not measured lately" + (f" (measured: {known})" if known else "")
    best = min(available, key=lambda m: (est[m], ORDER.index(m)))
    others = ", ".join(f"{LABEL[m]} {_ms(est[m])}" for m in available if m != best)
    return best, f"{LABEL[best]}: {_ms(est[best])} expected for {links} link(s), vs {others}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3g} ms"
