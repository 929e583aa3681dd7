"""Query generator for the advice accuracy harness: the paper's templates over TPC-H, flights, crimes.

Templates (digest §4.2, plus top-k which the paper only motivates):

* ``Q-AGH``  ``SELECT G, f(x) AS r FROM R GROUP BY G HAVING f(x) > $1``
* ``Q-AJGH`` the same over ``lineitem JOIN orders ON l_orderkey = o_orderkey`` (TPC-H only)
* ``Q-AAGH`` nested: ``SELECT A, count(*) FROM (SELECT A, B, f(x) ... GROUP BY A, B HAVING f(x) > $1)
  GROUP BY A HAVING count(*) > $2``
* ``Q-TOPK`` ``SELECT G, f(x) AS r FROM R GROUP BY G ORDER BY f(x) DESC LIMIT k``

A *combo* fixes the template, group-by and aggregate; one Spark job computes the exact per-group
aggregate distribution (50 quantiles from 0.5 to 0.99 and the number of groups), and several
queries are drawn from it: ``$1`` is the q-quantile with q ~ U(0.5, 0.99) (the digest's C12 rule,
so HAVING keeps 1-50 % of the groups and selectivities vary), ``k = ceil((1-q) * groups)``; for the
nested template a second job gives, per drawn ``$1``, the distribution of passing inner groups per
outer group and ``$2`` is its q2-quantile with q2 ~ U(0.3, 0.9).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog

PROBS = [0.5 + 0.49 * i / 49 for i in range(50)]
LJO = "lineitem JOIN orders ON l_orderkey = o_orderkey"
SPECS = {
    "tpch": {
        "table": "lineitem",
        "gb": [["l_suppkey"], ["l_shipdate"], ["l_receiptdate"], ["l_commitdate"], ["l_suppkey", "l_returnflag"],
               ["l_shipdate", "l_shipmode"], ["l_suppkey", "l_linestatus"]],
        "aggs": [("sum", "l_quantity"), ("sum", "l_extendedprice"), ("avg", "l_extendedprice"), ("avg", "l_discount"),
                 ("count", None), ("sum", "l_extendedprice * (1 - l_discount)")],
        "join_gb": [["o_orderdate"], ["l_suppkey", "o_orderpriority"], ["l_shipdate", "o_orderstatus"],
                    ["l_receiptdate", "o_orderpriority"]],
        "join_aggs": [("sum", "l_quantity"), ("sum", "o_totalprice"), ("avg", "l_extendedprice"), ("count", None)],
        "nested": [("l_suppkey", "l_returnflag"), ("l_shipdate", "l_linestatus"), ("l_receiptdate", "l_shipmode"),
                   ("l_suppkey", "l_shipinstruct")],
        "topk": [["l_suppkey"], ["l_shipdate"], ["l_receiptdate"], ["l_suppkey", "l_returnflag"]],
        "mix": {"Q-AGH": 0.4, "Q-AJGH": 0.2, "Q-AAGH": 0.2, "Q-TOPK": 0.2},
    },
    "flights": {
        "table": "flights",
        "gb": [["origin", "dest"], ["carrier", "month"], ["month", "day"], ["tailnum"], ["dest", "month"],
               ["carrier", "flight"], ["time_hour"], ["dest", "hour"]],
        "aggs": [("sum", "distance"), ("sum", "air_time"), ("avg", "arr_delay"), ("avg", "dep_delay"),
                 ("count", None), ("sum", "dep_delay")],
        "nested": [("dest", "origin"), ("tailnum", "month"), ("carrier", "flight"), ("month", "day")],
        "topk": [["tailnum"], ["dest"], ["carrier", "flight"], ["month", "day"], ["time_hour"]],
        "mix": {"Q-AGH": 0.5, "Q-AAGH": 0.25, "Q-TOPK": 0.25},
    },
    "crimes": {
        "table": "crimes",
        "gb": [["district", "year"], ["community_area", "month"], ["ward", "year"], ["beat"], ["district", "month"],
               ["community_area", "year"], ["beat", "year"]],
        "aggs": [("count", None), ("sum", "CAST(arrest AS INT)"), ("avg", "latitude"), ("avg", "longitude"),
                 ("sum", "ward")],
        "nested": [("district", "beat"), ("community_area", "year"), ("ward", "month"), ("year", "district")],
        "topk": [["beat"], ["community_area", "year"], ["district", "year"], ["ward", "month"]],
        "mix": {"Q-AGH": 0.5, "Q-AAGH": 0.25, "Q-TOPK": 0.25},
    },
}


@dataclass
class GenQuery:
    """One generated query: dataset, template name, SQL and the drawn quantile(s)."""

    dataset: str
    template: str
    sql: str
    q: float
    groups: int
    seed: int | None = None  # the estimation seed of this query (None: the run's)


def _fmt(v: float) -> str:
    return format(float(v), ".12g")


def _call(f: str, x) -> str:
    return "count(*)" if x is None else f"{f}({x})"


def _quantiles(spark, sql: str) -> tuple[np.ndarray, int]:
    probs = ", ".join(_fmt(p) for p in PROBS)
    r = spark.sql(f"SELECT percentile_approx(r, array({probs}), 10000) AS q, count(*) AS g FROM ({sql}) t").first()
    return np.array([float(v) if v is not None else np.nan for v in (r["q"] or [])]), int(r["g"])


def _combo(spark, ds: str, spec: dict, template: str, rng: random.Random, k: int) -> list[GenQuery]:
    if template == "Q-AAGH":
        outer, extra = rng.choice(spec["nested"])
        f, x = rng.choice(spec["aggs"])
        inner = f"SELECT {outer}, {extra}, {_call(f, x)} AS r FROM {spec['table']} GROUP BY {outer}, {extra}"
        qs, G = _quantiles(spark, inner)
        draws = [rng.uniform(0.5, 0.99) for _ in range(k)]
        cs = [float(np.interp(q, PROBS, qs)) for q in draws]
        sums = ", ".join(f"sum(CASE WHEN r > {_fmt(c)} THEN 1 ELSE 0 END) AS n{i}" for i, c in enumerate(cs))
        probs = ", ".join(_fmt(p) for p in (0.3, 0.45, 0.6, 0.75, 0.9))
        aggs = ", ".join(f"percentile_approx(n{i}, array({probs}), 10000) AS p{i}" for i in range(k))
        row = spark.sql(f"SELECT {aggs} FROM (SELECT {outer}, {sums} FROM ({inner}) t GROUP BY {outer}) u").first()
        out = []
        for i, (q, c) in enumerate(zip(draws, cs)):
            c2 = row[f"p{i}"][rng.randrange(5)]
            sql = (f"SELECT {outer}, count(*) AS n FROM (SELECT {outer}, {extra}, {_call(f, x)} AS r FROM "
                   f"{spec['table']} GROUP BY {outer}, {extra} HAVING {_call(f, x)} > {_fmt(c)}) t "
                   f"GROUP BY {outer} HAVING count(*) > {int(c2)}")
            out.append(GenQuery(ds, template, sql, q, G))
        return out
    join = template == "Q-AJGH"
    src = LJO if join else spec["table"]
    gb = rng.choice(spec["join_gb" if join else ("topk" if template == "Q-TOPK" else "gb")])
    f, x = rng.choice(spec["join_aggs" if join else "aggs"])
    g = ", ".join(gb)
    qs, G = _quantiles(spark, f"SELECT {_call(f, x)} AS r FROM {src} GROUP BY {g}")
    out = []
    for _ in range(k):
        q = rng.uniform(0.5, 0.99)
        if template == "Q-TOPK":
            lim = max(1, math.ceil((1 - q) * G))
            sql = f"SELECT {g}, {_call(f, x)} AS r FROM {src} GROUP BY {g} ORDER BY {_call(f, x)} DESC LIMIT {lim}"
        else:
            c = float(np.interp(q, PROBS, qs))
            sql = f"SELECT {g}, {_call(f, x)} AS r FROM {src} GROUP BY {g} HAVING {_call(f, x)} > {_fmt(c)}"
        out.append(GenQuery(ds, template, sql, q, G))
    return out


def generate(catalog: Catalog, dataset: str, n: int, seed: int = 0) -> list[GenQuery]:
    """``n`` queries for ``dataset`` (its tables must be loaded and registered as views by name)."""
    spec = SPECS[dataset]
    for t in catalog.tables():
        catalog.read(t).createOrReplaceTempView(t)
    rng = random.Random(f"{dataset}:{seed}")
    per = max(2, n // 30)
    names, weights = zip(*spec["mix"].items())
    out: list[GenQuery] = []
    while len(out) < n:
        template = rng.choices(names, weights)[0]
        out += _combo(catalog.spark, dataset, spec, template, rng, min(per, n - len(out)))
    return out
