"""A join side read on the driver: one table's scan (under selections and projections) at the
version before or after a batch, read with pyarrow from the table's files, cut to the batch's join
keys and evaluated by the reference evaluator.

Why: the other side of a join whose both tables changed is never cached (its versions move with
every commit), and a Spark job with an IN list of the batch's keys took ~1.1 s per side at TPC-H
SF1 (a lineitem ⋈ orders template after a Delta commit to each: 2.2 s of a 3.2 s step).  Reading
the key column and the few pruned columns of the table's files is a pass the driver makes in a
fraction of that; the rows come in the same forms as a batch's delta rows (``to_nullable_pandas``,
then ``relops.scan_frame``'s coercion to the scan's types), so the engine sees one representation.

Only where it is plainly the same answer: a single scan below ``Select`` / ``Project`` nodes, a
one-column key filter on a column the scan itself produces (or none: a small side read whole for
the side cache), a table of at most ``MAX_ROWS`` rows; anything else (``None``) goes to Spark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from advisor.maintain import reference
from advisor.maintain.base_side import KeyFilter
from advisor.plan import ir
from advisor.warehouse.arrow_to_pandas import to_nullable_pandas

if TYPE_CHECKING:
    from advisor.maintain.relops import Sketched
    from advisor.warehouse.catalog import Catalog

MAX_ROWS = 50_000_000  # a table the driver reads a few columns of (TPC-H SF1 lineitem: 6M rows)


def single_scan(node: ir.Node) -> Optional[ir.Scan]:
    """The one scan under a chain of ``Select`` / ``Project`` nodes, else None.

    >>> from advisor.plan.parse import parse_sql
    >>> q = parse_sql("SELECT a FROM t WHERE b > 1", {"t": [("a", "int"), ("b", "int")]}.get)
    >>> single_scan(q.root).table
    't'
    """
    while isinstance(node, (ir.Select, ir.Project)):
        node = node.child
    return node if isinstance(node, ir.Scan) else None


def _key_values(keys: KeyFilter, typ: pa.DataType) -> Optional[pa.Array]:
    vals = [v[0] if isinstance(v, tuple) else v for v in keys.values]
    try:
        return pa.array([v for v in vals if v is not None and v is not pd.NA], type=typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return None


def arrow_rows(catalog: Catalog, node: ir.Node, versions: dict[str, int], sketched: Sketched,
               keys: Optional[KeyFilter]) -> Optional[pd.DataFrame]:
    """The annotated rows of ``node`` on its table at its version in ``versions`` whose key is in ``keys`` (None:
    all of them, for a small side cached whole), read with pyarrow; None where the Spark side must
    answer (module docstring)."""
    scan = single_scan(node)
    if scan is None or (keys is not None and (len(keys.cols) != 1 or not keys.values)):
        return None
    key = None
    if keys is not None:
        key = next((c for c in scan.cols if c.name == keys.cols[0]), None)
        if key is None or keys.cols[0] not in node.names:  # renamed or computed above the scan
            return None
    version = versions[scan.table]
    if catalog.version(scan.table, version).rows > MAX_ROWS:
        return None
    cols = list(dict.fromkeys(c.source or c.name for c in scan.cols))
    tab = catalog.read_arrow(scan.table, version, columns=cols)
    if key is not None:
        src = key.source or key.name
        values = _key_values(keys, tab.schema.field(src).type)
        if values is None:
            return None
        tab = tab.filter(pc.is_in(tab.column(src), value_set=values))
    df = to_nullable_pandas(tab)
    return reference.annotated(node, {scan.table: df}, {s: v for s, v in sketched.items() if s == scan.scan_id})
