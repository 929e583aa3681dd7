"""Incremental maintenance of provenance sketches (IMP, seed 000) in pure Python/pandas.

Public API:
* `Maintainer.init(root, sketched, tables, **opts) -> MaintState` - capture by feeding all rows;
  `Maintainer.empty(root, sketched, **opts)` - a state for empty tables.
* `MaintState.apply(delta_tables, base) -> {scan_id: frozenset(fragment ids)}`, `.sketch()`,
  `.last_change`, `.last_stats`, `.snapshot()`, `.memory_bytes()`, `.to_bytes()` /
  `MaintState.from_bytes(data)`.
* `BaseSide` / `PandasBase` / `KeyFilter` / `OLD` / `NEW` (base.py): how joins and top-k refills
  read the non-delta side.
* `reference.evaluate / sketch / annotated / restrict`: full evaluation with lineage sketches.
* `exprs.evaluate / mask`: sqlglot expressions over pandas frames.
* `fragments.assign(values, part)`: fragment ids by binary search.
* `pushdown.pushdown_predicates / rewrite`: delta selection push-down.
* `policy`: Eager, Lazy, Batched, ArrivalAware, make_policy.
"""

from advisor.maintain.base_side import NEW, OLD, BaseSide, KeyFilter, PandasBase
from advisor.maintain.engine import Maintainer, MaintState
from advisor.maintain.operators.protocol import MaintenanceError, NeedsRecapture

__all__ = ["Maintainer", "MaintState", "BaseSide", "PandasBase", "KeyFilter", "OLD", "NEW",
           "MaintenanceError", "NeedsRecapture"]
