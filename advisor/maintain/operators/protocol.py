"""The incremental operator protocol and the per-batch context.

Every operator consumes the annotated delta of its children and emits the annotated delta of its
own output (digest §2.0: below the final merge the plan outputs exactly the bag delta of the
query, each row annotated with a sketch sufficient to produce it). Stateless operators
(scan, select, project, union) live in `engine`, stateful ones in `ops_agg`
(MIN/MAX, DISTINCT aggregates), `ops_agg_plain` (COUNT/SUM/AVG and DISTINCT), `ops_join`, `ops_topk`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import pandas as pd

from advisor.plan import ir

from advisor.maintain.base_side import BaseSide, KeyFilter, to_annotated
from advisor.maintain.frames import deep_size
from advisor.maintain.relops import Sketched, sketched_under


class MaintenanceError(RuntimeError):
    """The delta contradicts the state (e.g. deleting a row that was never inserted)."""


class NeedsRecapture(RuntimeError):
    """Incremental maintenance cannot continue (a top-k buffer ran dry and refilling is off).

    The state is no longer usable: capture the sketch again (e.g. `Maintainer.init`)."""


@dataclass
class Ctx:
    """What one `apply` call hands to every operator."""

    deltas: dict            # base table -> (inserted rows or None, deleted rows or None)
    base: Optional[BaseSide]
    sketched: Sketched
    stats: dict = field(default_factory=dict)

    def bump(self, key: str, n: int = 1) -> None:
        self.stats[key] = self.stats.get(key, 0) + n

    def fetch(self, node: ir.Node, version: str, keys: Optional[KeyFilter] = None) -> pd.DataFrame:
        """Rows of subtree `node` from the base side, in annotated-frame form."""
        if self.base is None:
            raise MaintenanceError("this batch needs the base side (join or top-k refill) but none was given")
        self.bump("base_calls")
        df = self.base.rows(node, version, keys)
        self.bump("base_rows", len(df))
        return to_annotated(df, node, self.sketched)


class Op:
    """An incremental operator bound to an IR node; `sids` are the sketched scans below it."""

    node: ir.Node
    children: list["Op"]
    sids: list[int]

    def __init__(self, node: ir.Node, children: list["Op"], sketched: Sketched):
        self.node = node
        self.children = children
        self.sids = sketched_under(node, sketched)

    @property
    def names(self) -> list[str]:
        return self.node.names

    def step(self, ctx: Ctx) -> pd.DataFrame:
        raise NotImplementedError

    def snapshot(self):
        """A plain, comparable picture of the operator's state (None if stateless)."""
        return None

    def state_bytes(self) -> int:
        """Approximate memory held by this operator's own state."""
        return 0

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()


def state_size(*objs) -> int:
    return sum(deep_size(o) for o in objs)
