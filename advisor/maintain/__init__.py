"""Incremental maintenance of provenance sketches (IMP, seed 000).

The pure engine lives in this package's own modules and ``operators`` (pandas and numpy, no
Spark): ``Maintainer.init(root, sketched, tables)`` captures by feeding all rows,
``MaintState.apply(delta_tables, base)`` brings a sketch forward by a batch, ``reference``
evaluates a plan in full with lineage sketches (the differential oracle), ``exprs`` evaluates
sqlglot expressions over frames, ``pushdown`` pushes selections into deltas and ``base_side``
says how joins and top-k refills read the non-delta side.  ``spark`` is the engine's Spark side
and persistence; ``policy`` decides when to maintain.  The engine imports ``plan``, ``partition``
and the leaf modules only.
"""

from advisor.maintain.base_side import NEW, OLD, BaseSide, KeyFilter, PandasBase
from advisor.maintain.engine import Maintainer, MaintState
from advisor.maintain.operators.protocol import MaintenanceError, NeedsRecapture

__all__ = ["Maintainer", "MaintState", "BaseSide", "PandasBase", "KeyFilter", "OLD", "NEW",
           "MaintenanceError", "NeedsRecapture"]
