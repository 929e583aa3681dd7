"""Query generator for the advice accuracy harness: selective query *shapes* nobody tuned for.

``advice_templates`` draws the paper's templates with HAVING keeping 1-50 % of the groups, which
makes most sketches large.  This set is the other end: each query is drawn so that its best
sketch at 1,000 fragments should hold between 0.1 % and 20 % of the table, in the shape families
that a dashboard's selective queries take:

* ``extreme``    ``HAVING max(x) > c`` / ``HAVING min(x) < c`` over keys with few rows per group
* ``topk_sum``   ``ORDER BY sum(x) DESC LIMIT k`` over hundreds to tens of thousands of groups
* ``where_count`` ``WHERE p GROUP BY g HAVING count(*) > c`` (the filter not on the group key)
* ``count_many`` ``HAVING count(*) > c`` over thousands of groups
* ``sum_product`` ``HAVING sum(a * b) > c`` (partsupp's ``ps_availqty * ps_supplycost`` and kin)
* ``two_col``    two-column group-bys with count / sum / max
* ``mix``        the above combined (a WHERE with a two-column key and an extreme, top-k under a
  WHERE, a product sum under a WHERE)

A *combo* fixes table, keys, WHERE and aggregate; one Spark job brings every group's aggregate and
row count to the driver.  For each query a target size ``s ~ log-uniform(0.1 %, 20 %)`` is drawn
and the number of passing groups ``k`` is the smallest whose predicted sketch on the group key
reaches ``s`` (``predicted_share``: the rows of the ``k`` extreme groups plus one boundary fragment
each, capped by the share of fragments ``k`` random groups touch when groups are smaller than
fragments).  The threshold is the midpoint between the ``k``-th and ``k+1``-th aggregate (top-k:
``LIMIT k``).  The prediction is rough on purpose: the harness keeps a query only when the best real
sketch, captured, lies in the range (``in_range``).  Each query carries its own estimation seed.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from workloads.bench.advice_templates import GenQuery

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog

LOW, HIGH = 0.001, 0.20  # the range the best real sketch must lie in
FRAGMENTS = 1000
SEEDS = 5  # estimation seeds drawn per query from 0..SEEDS-1


@dataclass(frozen=True)
class Combo:
    """One family member: table, group keys, optional WHERE, aggregate SQL and the comparison."""

    family: str
    table: str
    keys: tuple
    agg: str
    op: str = ">"        # ">" (largest pass), "<" (smallest pass) or "topk"
    where: str | None = None


C = Combo
COMBOS = {
    "tpch": [
        C("extreme", "lineitem", ("l_orderkey",), "max(l_extendedprice)"),
        C("extreme", "lineitem", ("l_orderkey",), "min(l_discount)", "<"),
        C("extreme", "partsupp", ("ps_partkey",), "max(ps_supplycost)"),
        C("extreme", "orders", ("o_custkey",), "max(o_totalprice)"),
        C("topk_sum", "lineitem", ("l_suppkey",), "sum(l_extendedprice)", "topk"),
        C("topk_sum", "orders", ("o_custkey",), "sum(o_totalprice)", "topk"),
        C("topk_sum", "lineitem", ("l_partkey",), "sum(l_quantity)", "topk"),
        C("where_count", "lineitem", ("l_suppkey",), "count(*)", where="l_shipmode = 'AIR'"),
        C("where_count", "lineitem", ("l_partkey",), "count(*)", where="l_discount > 0.05"),
        C("where_count", "orders", ("o_custkey",), "count(*)", where="o_orderpriority = '1-URGENT'"),
        C("count_many", "orders", ("o_custkey",), "count(*)"),
        C("count_many", "lineitem", ("l_receiptdate",), "count(*)"),
        C("sum_product", "partsupp", ("ps_suppkey",), "sum(ps_availqty * ps_supplycost)"),
        C("sum_product", "partsupp", ("ps_partkey",), "sum(ps_availqty * ps_supplycost)"),
        C("sum_product", "lineitem", ("l_suppkey",), "sum(l_quantity * l_extendedprice)"),
        C("two_col", "lineitem", ("l_suppkey", "l_shipmode"), "sum(l_quantity)"),
        C("two_col", "orders", ("o_custkey", "o_orderpriority"), "count(*)"),
        C("mix", "lineitem", ("l_suppkey", "l_shipmode"), "max(l_extendedprice)", where="l_returnflag = 'R'"),
        C("mix", "orders", ("o_custkey",), "sum(o_totalprice)", "topk", where="o_orderstatus = 'F'"),
        C("mix", "partsupp", ("ps_suppkey",), "sum(ps_availqty * ps_supplycost)", where="ps_availqty > 5000"),
    ],
    "flights": [
        C("extreme", "flights", ("tailnum", "month"), "max(arr_delay)"),
        C("extreme", "flights", ("time_hour",), "max(dep_delay)"),
        C("extreme", "flights", ("carrier", "flight", "month"), "min(dep_delay)", "<"),
        C("topk_sum", "flights", ("tailnum",), "sum(distance)", "topk"),
        C("topk_sum", "flights", ("carrier", "flight"), "sum(air_time)", "topk"),
        C("where_count", "flights", ("dest", "month"), "count(*)", where="origin = 'JFK'"),
        C("where_count", "flights", ("tailnum",), "count(*)", where="dep_delay > 60"),
        C("count_many", "flights", ("tailnum",), "count(*)"),
        C("count_many", "flights", ("time_hour",), "count(*)"),
        C("sum_product", "flights", ("tailnum",), "sum(distance * air_time)"),
        C("sum_product", "flights", ("dest", "month"), "sum(distance * air_time)"),
        C("two_col", "flights", ("dest", "flight"), "count(*)"),
        C("two_col", "flights", ("carrier", "flight"), "sum(distance)"),
        C("two_col", "flights", ("dest", "hour"), "count(*)"),
        C("mix", "flights", ("dest", "month"), "max(arr_delay)", where="carrier = 'UA'"),
        C("mix", "flights", ("tailnum",), "sum(distance)", "topk", where="origin = 'EWR'"),
    ],
    "crimes": [
        C("extreme", "crimes", ("block",), "max(latitude)"),
        C("extreme", "crimes", ("block", "year"), "min(longitude)", "<"),
        C("topk_sum", "crimes", ("block",), "sum(CAST(arrest AS INT))", "topk"),
        C("topk_sum", "crimes", ("beat", "year"), "sum(ward)", "topk"),
        C("where_count", "crimes", ("beat",), "count(*)", where="primary_type = 'THEFT'"),
        C("where_count", "crimes", ("block",), "count(*)", where="arrest"),
        C("count_many", "crimes", ("block",), "count(*)"),
        C("count_many", "crimes", ("beat", "month"), "count(*)"),
        C("sum_product", "crimes", ("beat",), "sum(latitude * ward)"),
        C("two_col", "crimes", ("district", "year"), "count(*)"),
        C("two_col", "crimes", ("community_area", "month"), "sum(CAST(arrest AS INT))"),
        C("mix", "crimes", ("beat", "month"), "max(latitude)", where="year >= 2015"),
    ],
}
FAMILIES = ("extreme", "topk_sum", "where_count", "count_many", "sum_product", "two_col", "mix")


def _fmt(v: float) -> str:
    return format(float(v), ".12g")


def sql_of(c: Combo, k: int, threshold: float | None) -> str:
    """The query of combo ``c`` keeping its ``k`` extreme groups (``threshold`` for HAVING)."""
    g = ", ".join(c.keys)
    where = f" WHERE {c.where}" if c.where else ""
    head = f"SELECT {g}, {c.agg} AS r FROM {c.table}{where} GROUP BY {g}"
    if c.op == "topk":
        return f"{head} ORDER BY {c.agg} DESC LIMIT {k}"
    return f"{head} HAVING {c.agg} {c.op} {_fmt(threshold)}"


def _with_where(agg: str, where: str | None) -> str:
    """The aggregate over the rows passing ``where`` only, so a job grouped over all rows can also
    count each group's rows (a group's sketch holds the fragments of all its rows' key values)."""
    if not where:
        return agg
    f, arg = agg.split("(", 1)
    arg = arg[:-1]
    inner = "1" if arg.strip() == "*" else arg
    return f"{f}(CASE WHEN {where} THEN {inner} END)"


def group_stats(spark, c: Combo) -> tuple[np.ndarray, np.ndarray, int]:
    """(aggregate, rows) of every group the query returns, and the table's rows: one Spark job."""
    g = ", ".join(c.keys)
    agg = _with_where(c.agg, c.where)
    pdf = spark.sql(f"SELECT {agg} AS r, count(*) AS n FROM {c.table} GROUP BY {g}").toPandas()
    total = int(pdf["n"].sum())
    pdf = pdf[pdf["r"].notna()]
    if c.agg.startswith("count") and c.where:
        pdf = pdf[pdf["r"] > 0]
    return pdf["r"].to_numpy(dtype=float), pdf["n"].to_numpy(dtype=float), total


def predicted_share(rows_sorted: np.ndarray, total: int, groups: int) -> np.ndarray:
    """Predicted sketch share on the group key when the first ``k`` groups of ``rows_sorted`` pass,
    for every k (index k-1): their rows plus a boundary fragment each, capped by the share of
    fragments that k groups touch when ``groups`` exceed the fragments."""
    k = np.arange(1, rows_sorted.size + 1, dtype=float)
    by_rows = np.cumsum(rows_sorted) / max(total, 1) + k / FRAGMENTS
    per_frag = max(groups / FRAGMENTS, 1.0)
    by_frags = 1.0 - (1.0 - k / max(groups, 1)) ** per_frag
    return np.minimum(by_rows, np.maximum(by_frags, np.cumsum(rows_sorted) / max(total, 1)))


def draw(c: Combo, r: np.ndarray, n: np.ndarray, total: int, rng: random.Random) -> tuple[int, float | None] | None:
    """(k, threshold) for one query of combo ``c`` at a log-uniform target size, or None when no
    threshold separates the k-th from the next group (ties)."""
    order = np.argsort(-r if c.op in (">", "topk") else r, kind="stable")
    rs, ns = r[order], n[order]
    if rs.size < 2:
        return None
    target = math.exp(rng.uniform(math.log(LOW), math.log(HIGH)))
    share = predicted_share(ns, total, rs.size)
    k = int(np.searchsorted(share, target) + 1)
    k = min(max(k, 1), rs.size - 1)
    if c.op == "topk":
        return k, None
    a, b = rs[k - 1], rs[k]
    while k < rs.size - 1 and a == b:  # ties at the boundary: keep them all
        k += 1
        a, b = rs[k - 1], rs[k]
    if a == b:
        return None
    return k, float((a + b) / 2.0)


def generate_shapes(catalog: Catalog, dataset: str, n: int, seed: int = 0) -> list[GenQuery]:
    """About ``n`` queries for ``dataset`` spread evenly over its combos (tables registered as views
    by name); the harness keeps those whose best real sketch lies in [LOW, HIGH]."""
    for t in catalog.tables():
        catalog.read(t).createOrReplaceTempView(t)
    rng = random.Random(f"shapes:{dataset}:{seed}")
    combos = COMBOS[dataset]
    per = max(1, math.ceil(n / len(combos)))
    out: list[GenQuery] = []
    for c in combos:
        r, cnt, total = group_stats(catalog.spark, c)
        seen = set()
        for _ in range(per * 3):
            got = draw(c, r, cnt, total, rng)
            if got is None:
                continue
            sql = sql_of(c, *got)
            if sql in seen:
                continue
            seen.add(sql)
            out.append(GenQuery(dataset, c.family, sql, got[0] / r.size, int(r.size), rng.randrange(SEEDS)))
            if len(seen) >= per:
                break
    return out


def in_range(real: dict) -> bool:
    """Whether the best real sketch (smallest selectivity over the candidates) lies in [LOW, HIGH]."""
    best = min(real.values()) if real else None
    return best is not None and LOW <= best <= HIGH
