"""Per-column min/max/NDV statistics per table version, cached in the store (input to Z3 checks).
A version reached from a stats-bearing one by small batches derives its stats without a Spark job;
a Delta table's later versions take theirs from the log's file statistics (``delta_stats``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pyarrow.compute as pc
from pyspark.sql import functions as F

from advisor.safety.static_check import NOT_NULL
from advisor.warehouse import delta_stats
from advisor.warehouse.table_files import parquet_files, read_columns
from advisor.warehouse.value_kinds import decode_value, encode_value, kind_of

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog
    from advisor.warehouse.store import Store


def column_stats(catalog: Catalog, table: str, version: int | None = None) -> dict[str, tuple]:
    """{column: (min, max, ndv)} for orderable columns of table at version; one Spark job (unless
    derived from an earlier version's or, on Delta, the log's), then cached."""
    table = catalog.require(table)
    v = catalog.version(table, version).version
    rows = catalog.store.query("SELECT * FROM colstats WHERE table_name=? AND version=?", (table, v))
    schema = dict(catalog.schema(table))
    if rows:
        return {r["col"]: (decode_value(json.loads(r["min_json"]), schema[r["col"]]),
                           decode_value(json.loads(r["max_json"]), schema[r["col"]]), r["ndv"])
                for r in rows}
    cols = []
    for c, t in schema.items():
        try:
            if kind_of(t) in ("int", "dec", "float", "date", "ts", "str"):
                cols.append(c)
        except Exception:
            continue
    derived = (delta_stats.from_log(catalog, table, v, cols) if catalog.is_delta(table)
               else _derive_from_earlier(catalog, table, v, schema))
    if derived is not None:
        return derived
    df = catalog.read(table, v)
    aggs = []
    for c in cols:
        aggs += [F.min(c).alias(f"mn_{c}"), F.max(c).alias(f"mx_{c}"), F.approx_count_distinct(c).alias(f"nd_{c}"),
                 F.sum(F.col(c).isNull().cast("long")).alias(f"nu_{c}")]
    r = df.agg(*aggs).first() if aggs else None
    out = {}
    with catalog.store.tx() as conn:
        for c in cols:
            mn, mx, nd = r[f"mn_{c}"], r[f"mx_{c}"], r[f"nd_{c}"]
            conn.execute("INSERT OR REPLACE INTO colstats VALUES (?,?,?,?,?,?,?)",
                         (table, v, c, json.dumps(encode_value(mn)), json.dumps(encode_value(mx)), nd,
                          int(r[f"nu_{c}"] or 0)))
            out[c] = (mn, mx, nd)
    return out


def stored_ndv(catalog: Catalog, table: str, col: str, version: int | None = None) -> int | None:
    """The column's approximate NDV from the statistics stored for ``version`` or an earlier one
    (the latest stored without a version), or None: no Spark job."""
    return store_ndv(catalog.store, table, col, version)


def store_ndv(store: Store, table: str, col: str, version: int | None = None) -> int | None:
    """``stored_ndv`` for callers holding only the store."""
    r = store.one("SELECT ndv FROM colstats WHERE table_name=? AND col=? AND version<=? "
                          "ORDER BY version DESC LIMIT 1", (table, col, (1 << 62) if version is None else version))
    return None if r is None or r["ndv"] is None else int(r["ndv"])


DERIVE_MAX_CHANGE = 0.1  # batches since the stats' version may change at most this share of rows


def _derive_from_earlier(catalog: Catalog, table: str, v: int, schema: dict) -> dict | None:
    """Stats for version ``v`` from an earlier version's, widened by the inserted rows' min/max
    (pyarrow over the batch files; no Spark job), when only small batches lie in between.  Deleted
    rows leave the old bounds as a superset of the true domain, which keeps Z3 safety proofs sound
    (they assume values lie within the bounds); NDV keeps the old approximate count."""

    vs = [x for x in catalog.versions(table) if x.version <= v]
    prev = catalog.store.one("SELECT max(version) AS u FROM colstats WHERE table_name=? AND version<?", (table, v))
    u = prev["u"] if prev else None
    if u is None:
        return None
    between = [x for x in vs if x.version > u]
    rows = max(1, catalog.version(table, v).rows)
    if any(x.kind != "batch" for x in between) or sum(x.n_ins + x.n_del for x in between) > DERIVE_MAX_CHANGE * rows:
        return None
    old = column_stats(catalog, table, u)
    old_nulls = {r["col"]: r["nulls"] for r in catalog.store.query(
        "SELECT col, nulls FROM colstats WHERE table_name=? AND version=?", (table, u))}
    files = parquet_files([x.ins_path for x in between])  # local or on a Hadoop file system
    ins = read_columns(files, list(old)) if files else None
    out, nulls = {}, {}
    for c, (mn, mx, nd) in old.items():
        nulls[c] = old_nulls.get(c)  # deleted rows leave an upper bound; unknown stays unknown
        if ins is not None and ins.num_rows and nulls[c] is not None:
            nulls[c] += ins.column(c).null_count
        if ins is not None and ins.num_rows:
            mm = pc.min_max(ins.column(c))
            for x in (mm["min"].as_py(), mm["max"].as_py()):
                if x is None or (isinstance(x, float) and x != x):
                    continue
                try:
                    mn = x if mn is None or x < mn else mn
                    mx = x if mx is None or x > mx else mx
                except TypeError:  # e.g. zoned vs naive timestamps: compute afresh
                    return None
        out[c] = (mn, mx, nd)
    with catalog.store.tx() as conn:
        for c, (mn, mx, nd) in out.items():
            conn.execute("INSERT OR REPLACE INTO colstats VALUES (?,?,?,?,?,?,?)",
                         (table, v, c, json.dumps(encode_value(mn)), json.dumps(encode_value(mx)), nd, nulls[c]))
    return out


def stats_for_query(catalog: Catalog, query, versions: dict[str, int] | None = None) -> dict[tuple[str, str], tuple]:
    """(table, column) -> (min, max) for every table the query scans (format used by safety/reuse),
    plus ``safety.NOT_NULL`` -> the (table, column) pairs without NULLs at those versions."""

    out, not_null = {}, set()
    for t in {s.table for s in query.scans()}:
        v = (versions or {}).get(t)
        for c, (mn, mx, _) in column_stats(catalog, t, v).items():
            if mn is not None and mx is not None:
                out[(t, c)] = (mn, mx)
        v = catalog.version(t, v).version
        not_null |= {(t, r["col"]) for r in catalog.store.query(
            "SELECT col FROM colstats WHERE table_name=? AND version=? AND nulls=0", (t, v))}
    out[NOT_NULL] = frozenset(not_null)
    return out
