"""`BaseSide` on Spark: evaluate an IR subtree on the table versions before/after a batch.

The engine asks for the non-delta side of a join (and a dry top-k's input). We generate the
subtree's SQL with the capture instrumentation (to_sql.gen), reading each table at the OLD or
NEW version; sketched scans carry their fragment id, aggregated subtrees a bitmap that is
decoded into a fragment set per row. A single-column KeyFilter becomes an IN list (pushed into
the scan); multi-column filters are ignored, which is always correct.
"""

from __future__ import annotations

from typing import Optional

import pandas as pd

from advisor.capture import FRAG
from advisor.execute import table_view
from advisor.partitions import assign_column
from advisor.plan import ir
from advisor.plan.to_sql import BM, Gen, Source, gen, q
from advisor.sketches import decode_bitmap

from .base import NEW, OLD, KeyFilter
from .frames import fcol

MAX_IN_LIST = 5000


class SparkBase:
    """BaseSide over the catalog: `versions[OLD|NEW]` maps table -> version."""

    def __init__(self, catalog, sketched: dict, old: dict[str, int], new: dict[str, int]):
        self.catalog = catalog
        self.sketched = sketched  # scan_id -> (internal attr name, RangePartition)
        self.versions = {OLD: old, NEW: new}
        self.calls = 0
        self.rows_fetched = 0

    def _source(self, version: str):
        vers = self.versions[version]

        def src(scan: ir.Scan) -> Source:
            v = vers[scan.table]
            if scan.scan_id in self.sketched:
                attr_internal, part = self.sketched[scan.scan_id]
                attr = scan.col(attr_internal).source
                name = self.catalog.view_name(scan.table, v, f"_cap{part.id}")
                if not self.catalog.spark.catalog.tableExists(name):
                    df = self.catalog.read(scan.table, v)
                    assign_column(df, attr, part, FRAG).createOrReplaceTempView(name)
                return Source(name, FRAG)
            return Source(table_view(self.catalog, scan.table, v))

        return src

    def rows(self, node: ir.Node, version: str, keys: Optional[KeyFilter] = None) -> pd.DataFrame:
        self.calls += 1
        g = Gen(self._source(version))
        sql, lams = gen(node, g)
        where = ""
        if keys is not None and len(keys.cols) == 1 and 0 < len(keys.values) <= MAX_IN_LIST:
            vals = [v[0] if isinstance(v, tuple) else v for v in keys.values]
            lits = ", ".join(_lit(v) for v in vals if v is not None)
            if lits:
                where = f" WHERE {q(keys.cols[0])} IN ({lits})"
        sid_of = {name: g.lams[name] for name in lams}
        cols = [q(c) for c in node.names] + [f"{q(name)} AS {q(fcol(sid_of[name]))}" for name in lams]
        df = self.catalog.spark.sql(f"SELECT {', '.join(cols)} FROM ({sql}) _b{where}").toPandas()
        for name, kind in lams.items():
            c = fcol(sid_of[name])
            if kind == BM:
                df[c] = [decode_bitmap(b) for b in df[c]]
        self.rows_fetched += len(df)
        return df


def _lit(v) -> str:
    import datetime as dt
    import decimal

    if hasattr(v, "item") and not isinstance(v, (dt.date, decimal.Decimal)):
        v = v.item()  # numpy scalar -> Python
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, decimal.Decimal)):
        return repr(v) if not isinstance(v, decimal.Decimal) else f"CAST('{v}' AS DECIMAL(38,10))"
    if isinstance(v, dt.datetime):
        return f"TIMESTAMP '{v.isoformat(sep=' ')}'"
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    return "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'"
