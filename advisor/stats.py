"""Per-column min/max/NDV statistics per table version, cached in the store (input to Z3 checks)."""

from __future__ import annotations

import json

from advisor.partitions import decode_value, encode_value, kind_of


def column_stats(catalog, table: str, version: int | None = None) -> dict[str, tuple]:
    """{column: (min, max, ndv)} for orderable columns of table at version; one Spark job, then cached."""
    from pyspark.sql import functions as F

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
    df = catalog.read(table, v)
    aggs = []
    for c in cols:
        aggs += [F.min(c).alias(f"mn_{c}"), F.max(c).alias(f"mx_{c}"), F.approx_count_distinct(c).alias(f"nd_{c}")]
    r = df.agg(*aggs).first() if aggs else None
    out = {}
    with catalog.store.tx() as conn:
        for c in cols:
            mn, mx, nd = r[f"mn_{c}"], r[f"mx_{c}"], r[f"nd_{c}"]
            conn.execute("INSERT OR REPLACE INTO colstats VALUES (?,?,?,?,?,?,?)",
                         (table, v, c, json.dumps(encode_value(mn)), json.dumps(encode_value(mx)), nd, None))
            out[c] = (mn, mx, nd)
    return out


def stats_for_query(catalog, query, versions: dict[str, int] | None = None) -> dict[tuple[str, str], tuple]:
    """(table, column) -> (min, max) for every table the query scans (format used by safety/reuse)."""
    out = {}
    for t in {s.table for s in query.scans()}:
        for c, (mn, mx, _) in column_stats(catalog, t, (versions or {}).get(t)).items():
            if mn is not None and mx is not None:
                out[(t, c)] = (mn, mx)
    return out
