"""Candidate attributes of a query for sketching (seed 002 §3.3): every partitionable column of the
sampled table with its Z3 safety verdict, NDV and roles (gb / rel / agg / pk), plus the group-by
columns of the tables joined below the aggregation (``dim_candidates``, beyond the paper)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.estimation.candidate_sizes import Candidate
from advisor.plan import ir
from advisor.safety.static_check import check_safety
from advisor.selection.join_keys import key_deps
from advisor.warehouse.column_stats import column_stats, stats_for_query
from advisor.warehouse.value_kinds import kind_of

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog

KNOWN_PK = {"lineitem": ("l_orderkey", "l_linenumber"), "orders": ("o_orderkey",), "customer": ("c_custkey",),
            "part": ("p_partkey",), "supplier": ("s_suppkey",), "partsupp": ("ps_partkey", "ps_suppkey"),
            "nation": ("n_nationkey",), "region": ("r_regionkey",), "crimes": ("id",), "airlines": ("carrier",),
            "airports": ("faa",), "planes": ("tailnum",), "flights": ("year", "month", "day", "carrier", "flight")}


def primary_key(catalog: Catalog, table: str, ndvs: dict) -> set:
    """Known TPC-H/crimes/flights keys, else columns whose NDV is about the row count."""
    if table in KNOWN_PK:
        return set(KNOWN_PK[table])
    rows = catalog.version(table).rows
    return {c for c, n in ndvs.items() if rows and n >= 0.95 * rows}


def enumerate_candidates(catalog: Catalog, query, shape, versions: dict) -> list:
    """Every partitionable column of the sampled table with its Z3 safety verdict, NDV and roles,
    then the group-by columns of the other tables joined below the aggregation (``dim_candidates``)."""

    table = shape.fact.table
    stats = stats_for_query(catalog, query, versions)
    ndvs = {c: int(v[2] or 0) for c, v in column_stats(catalog, table, versions[table]).items()}
    pk = primary_key(catalog, table, ndvs)
    # keys of the joined tables only: the sampled table's own key decides its groups trivially (one
    # row each) and is the PK pool's business
    deps = key_deps(shape.inner, {t: c for t, c in unique_columns(catalog, query, versions).items() if t != table})
    out = []
    for col in candidate_columns(catalog, table):
        if col not in shape.fact_cols or col not in ndvs:
            continue
        v = check_safety(query.root, every_read(query, table, col), stats)
        # a join key that decides the groups keeps them whole, as a group-by attribute does
        gb = shape.determined(col) or deps.decides(shape.fact_cols[col], shape.keys)
        roles = {r for r, hit in (("gb", gb), ("rel", col in shape.relevant),
                                  ("agg", col in shape.agg_inputs), ("pk", col in pk)) if hit}
        out.append(Candidate(table, col, bool(v.safe), v.reason, ndvs[col], frozenset(roles)))
    return out + dim_candidates(catalog, query, shape, versions, stats)


def every_read(query, table: str, col: str) -> set:
    """The internal names of ``col`` in every access of ``table``: a sketch filters them all, so its
    safety is proven over all of them (a semi-join subquery may read the sampled table again)."""
    return {c.name for s in query.scans() if s.table == table for c in s.cols if c.source == col}


def unique_columns(catalog: Catalog, query, versions: dict) -> dict:
    """Table -> the columns that are a key on their own, for the tables the query reads: a known
    single-column primary key, else columns whose (approximate, HyperLogLog) NDV is about the row
    count, as ``primary_key`` judges.  Only the pools use this; every candidate's safety is proven
    on its own (``check_safety``), so a column wrongly taken for a key can cost a poorer pick,
    never a wrong answer."""
    out = {}
    for t in {s.table for s in query.scans()}:
        if t in KNOWN_PK:
            out[t] = set(KNOWN_PK[t]) if len(KNOWN_PK[t]) == 1 else set()
            continue
        rows = catalog.version(t, versions.get(t)).rows
        stats = column_stats(catalog, t, versions.get(t))
        out[t] = {c for c, v in stats.items() if rows and int(v[2] or 0) >= 0.95 * rows}
    return out


def dim_candidates(catalog: Catalog, query, shape, versions: dict, stats) -> list:
    """Group-by columns of a joined table other than the sampled one, read once below the aggregation
    (beyond the paper's fact-only candidates; seed 002 sizes per relation).  Such a sketch skips that
    table's rows; in a join it also shrinks the build side, which can turn a shuffle join into a
    broadcast join (TPC-H SF1 lineitem JOIN orders by o_orderdate: 1.5-3.1 s plain, 0.5-0.8 s with a
    13-day sketch on orders; BENCHMARKS.md).  Every group's rows share the column's value,
    so its fragments follow from the estimated groups' keys alone."""

    scans = [n for n in shape.inner.child.walk() if isinstance(n, ir.Scan) and n.table != shape.fact.table]
    out = []
    for t in sorted({s.table for s in scans}):
        mine = [s for s in scans if s.table == t]
        if sum(s.table == t for s in query.scans()) != 1:
            continue  # a table read twice would need one sketch over both reads
        cols = {c.source: c.name for c in mine[0].cols if c.name in shape.keys}
        if not cols:
            continue
        ndvs = {c: int(v[2] or 0) for c, v in column_stats(catalog, t, versions[t]).items()}
        rows = float(catalog.version(t, versions[t]).rows)
        for col in candidate_columns(catalog, t):
            if col not in cols or col not in ndvs:
                continue
            v = check_safety(query.root, {cols[col]}, stats)
            out.append(Candidate(t, col, bool(v.safe), v.reason, ndvs[col], frozenset({"gb", "rel"}),
                                 dim=True, rows=rows))
    return out


def candidate_columns(catalog: Catalog, table: str) -> list[str]:
    out = []
    for c, t in catalog.schema(table):
        try:
            if kind_of(t) in ("int", "dec", "float", "date", "ts", "str"):
                out.append(c)
        except Exception:
            continue
    return out
