"""`BaseSide` on Spark: evaluate an IR subtree on the table versions before/after a batch.

The engine asks for the non-delta side of a join (and a dry top-k's input). We generate the
subtree's SQL with the capture instrumentation (to_sql.gen), reading each table at the OLD or
NEW version; sketched scans carry their fragment id, aggregated subtrees a bitmap that is
decoded into a fragment set per row. A single-column KeyFilter becomes an IN list (pushed into
the scan); multi-column filters are ignored, which is always correct.

Side cache: the same subtree on the same table versions (identical generated SQL: view names
carry the versions) asked for a second time in this process is read once in full and kept in
memory (LRU, at most ``SIDE_CACHE_ROWS`` rows in all; only sides over at most ``SIDE_MAX_ROWS``
table rows, so the one full read stays cheap); later requests look keys up in pandas. A
dimension side that no batch touches (orders under a stream of lineitem batches) then costs a
lookup instead of a Spark job (0.2-0.5 s at TPC-H SF1) per batch. A side whose tables change with
every batch never repeats its SQL, so it never fills the cache. State initialisation
(``warm_sides``) reads the small sides without a sketched scan at once, so no batch pays the two
warm-up reads.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import TYPE_CHECKING, Optional

import numpy as np
import pandas as pd

from advisor import memory
from advisor.caches import BoundedMemo
from advisor.engine.execute import table_view
from advisor.maintain.arrow_side import arrow_rows
from advisor.maintain.base_side import NEW, OLD, KeyFilter
from advisor.maintain.frames import fcol, normalize_frame, py_scalar
from advisor.maintain.operators.join import JoinOp
from advisor.partition.range_partition import assign_column
from advisor.plan import ir
from advisor.plan.to_sql import BM, Gen, Source, gen, q
from advisor.sketch.capture import FRAG
from advisor.warehouse.sketch_records import decode_bitmap

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog

MAX_IN_LIST = 5000
SIDE_CACHE_ROWS = 8_000_000   # all cached sides together
SIDE_MAX_ROWS = 2_000_000     # a side over tables with more rows is never read whole (TPC-H SF1 orders: 1.5M)
SEEN_MAX = 10_000  # sides of changing tables never repeat: forget them all beyond this many
_sides = BoundedMemo("join sides", max_bytes=SIDE_CACHE_ROWS, size_of=len, rank=6)  # bytes: rows here
_seen = BoundedMemo("join sides asked for", None)  # side key -> times asked while not cached


class _Side:
    """A cached side: the frame and, per filtered key column, a hash index built on first use
    (a lookup of a batch's few keys instead of a pass over every row)."""

    def __init__(self, df: pd.DataFrame):
        self.df = df
        self.index: dict[str, pd.Index] = {}

    def __len__(self) -> int:
        return len(self.df)

    def index_on(self, col: str) -> pd.Index:
        """The hash index on `col`, built (with its hash table) on first use: ~50 ms for TPC-H
        SF1's 1.5M orders, which `prefetch` pays at state initialisation instead of a batch."""
        ix = self.index.get(col)
        if ix is None:
            ix = self.index[col] = pd.Index(self.df[col])
            ix.get_indexer_for(ix[:1])  # builds the hash table now
        return ix

    def rows(self, keys: Optional[KeyFilter]) -> pd.DataFrame:
        if keys is None:
            return self.df
        if len(keys.cols) != 1:
            return self.df[keys.mask(self.df)]
        ix = self.index_on(keys.cols[0])
        vals = [py_scalar(v[0] if isinstance(v, tuple) else v) for v in keys.values]
        pos = ix.get_indexer_for([v for v in vals if v is not None])
        return self.df.iloc[np.sort(pos[pos >= 0])]


def _cache_side(key: tuple, side: _Side) -> None:
    _sides.put(key, side)
    memory.relieve()


class SparkBase:
    """BaseSide over the catalog: `versions[OLD|NEW]` maps table -> version."""
    def __init__(self, catalog: Catalog, sketched: dict, old: dict[str, int], new: dict[str, int]):
        self.catalog = catalog
        self.sketched = sketched  # scan_id -> (internal attr name, RangePartition)
        self.versions = {OLD: old, NEW: new}
        self.calls = 0
        self.rows_fetched = 0
        self.cache_hits = 0
        self.arrow = True  # sides a driver-side read can answer skip Spark (``advisor.maintain.arrow_side``)

    def source(self, version: str, register: bool = True):
        """How each scan reads its table at OLD or NEW (sketched scans with their fragment column).

        With ``register=False`` only the view names are produced (no Spark call): enough to
        build the SQL text that keys the side cache."""
        vers = self.versions[version]

        def src(scan: ir.Scan) -> Source:
            v = vers[scan.table]
            if scan.scan_id in self.sketched:
                attr_internal, part = self.sketched[scan.scan_id]
                attr = scan.col(attr_internal).source
                name = self.catalog.view_name(scan.table, v, f"_cap{part.id}")
                if register and not self.catalog.spark.catalog.tableExists(name):
                    df = self.catalog.read(scan.table, v)
                    assign_column(df, attr, part, FRAG).createOrReplaceTempView(name)
                return Source(name, FRAG)
            if not register:
                return Source(self.catalog.view_name(scan.table, self.catalog.version(scan.table, v).version))
            return Source(table_view(self.catalog, scan.table, v))

        return src

    def _side_key(self, node: ir.Node, version: str):
        """(cache key, full SQL, Λ columns, sid per Λ column, small?) of a subtree at OLD or NEW."""
        g = Gen(self.source(version, register=False))  # names only: a cache hit needs no Spark call
        sql, lams = gen(node, g)
        sid_of = {name: g.lams[name] for name in lams}
        cols = [q(c) for c in node.names] + [f"{q(name)} AS {q(fcol(sid_of[name]))}" for name in lams]
        full = f"SELECT {', '.join(cols)} FROM ({sql}) _b"
        vers = self.versions[version]
        tv = {n.table: self.catalog.version(n.table, vers[n.table]) for n in node.walk() if isinstance(n, ir.Scan)}
        ident = tuple(sorted((t, x.version, x.base_path) for t, x in tv.items()))
        ck = (str(self.catalog.store.path), full, ident)  # a replaced table has a new base path
        small = sum(x.rows for x in tv.values()) <= SIDE_MAX_ROWS
        return ck, full, lams, sid_of, small

    def prefetch(self, node: ir.Node, version: str, key_cols: tuple = ()) -> bool:
        """Read a small side whole into the cache now (at state initialisation), so the first
        batches do not pay an IN-list job and then the full read, and index it on its join key
        (`key_cols`, if one column); False when it is too large."""
        ck, full, lams, sid_of, small = self._side_key(node, version)
        if not small:
            return False
        if ck not in _sides:
            _cache_side(ck, _Side(self._whole(node, version, full, lams, sid_of)))
        if len(key_cols) == 1:
            _sides[ck].index_on(key_cols[0])
        return True

    def rows(self, node: ir.Node, version: str, keys: Optional[KeyFilter] = None) -> pd.DataFrame:
        self.calls += 1
        ck, full, lams, sid_of, small = self._side_key(node, version)
        where = ""
        if keys is not None and len(keys.cols) == 1 and 0 < len(keys.values) <= MAX_IN_LIST:
            vals = [v[0] if isinstance(v, tuple) else v for v in keys.values]
            lits = ", ".join(_lit(v) for v in vals if v is not None)
            if lits:
                where = f" WHERE {q(keys.cols[0])} IN ({lits})"
        side = _sides.get(ck)
        if side is None and small and _seen.get(ck, 0) >= 1:  # asked before: read it whole, once
            side = _Side(self._whole(node, version, full, lams, sid_of))
            _cache_side(ck, side)
        elif side is not None:
            _sides.move_to_end(ck)
        if side is not None:
            self.cache_hits += 1
            df = side.rows(keys).reset_index(drop=True)
        else:
            if len(_seen) > SEEN_MAX:
                _seen.clear()
            _seen[ck] = _seen.get(ck, 0) + 1
            df = self._arrow(node, version, keys)
            if df is None:
                df = self._read(node, version, full + where, lams, sid_of)
        self.rows_fetched += len(df)
        return df

    def _whole(self, node: ir.Node, version: str, full: str, lams: dict, sid_of: dict) -> pd.DataFrame:
        """A small side read whole, values in the engine's forms: on the driver where it can be."""
        df = self._arrow(node, version, None)
        return df if df is not None else normalize_frame(self._read(node, version, full, lams, sid_of))

    def _arrow(self, node: ir.Node, version: str, keys: Optional[KeyFilter]) -> Optional[pd.DataFrame]:
        """The side read on the driver (``advisor.maintain.arrow_side``), None where Spark must read it."""
        return arrow_rows(self.catalog, node, self.versions[version], self.sketched, keys) if self.arrow else None

    def _read(self, node: ir.Node, version: str, sql: str, lams: dict, sid_of: dict) -> pd.DataFrame:
        gen(node, Gen(self.source(version)))  # register the views the SQL names
        df = self.catalog.spark.sql(sql).toPandas()
        for name, kind in lams.items():
            c = fcol(sid_of[name])
            if kind == BM:
                df[c] = [decode_bitmap(b) for b in df[c]]
        return df


def _lit(v) -> str:
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


def warm_sides(state, base: "SparkBase") -> int:
    """Prefetch, for every join in `state`, each input side that holds no sketched scan and reads
    at most ``SIDE_MAX_ROWS`` table rows (a dimension under a stream of fact batches); returns how
    many sides were cached."""

    n = 0
    for op in state.root_op.walk():
        if not isinstance(op, JoinOp):
            continue
        for side, keys in zip(op.children, (op.lkeys, op.rkeys)):
            scans = [s for s in side.node.walk() if isinstance(s, ir.Scan)]
            if scans and not any(s.scan_id in base.sketched for s in scans):
                n += base.prefetch(side.node, OLD, tuple(keys))
    return n
