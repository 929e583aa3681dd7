"""Generators for differential tests: seeded tables and a hypothesis grammar of supported queries."""

from __future__ import annotations

import datetime as dt
import decimal

import numpy as np
import pandas as pd
from hypothesis import strategies as st

FACT_ATTRS = ["k", "g1", "g2", "v", "d", "m"]


def make_facts(seed: int, n: int) -> pd.DataFrame:
    """Facts with skewed groups, negative values, NULLs, dates and decimals (deterministic per seed)."""
    rng = np.random.default_rng(seed)
    g1 = rng.zipf(1.6, n) % 12
    v = rng.integers(-20, 100, n).astype("float")
    v[rng.random(n) < 0.05] = np.nan
    return pd.DataFrame({
        "k": np.arange(n, dtype="int64") * 3 + seed,
        "g1": g1.astype("int32"),
        "g2": [f"c{x}" for x in rng.integers(0, 6, n)],
        "v": pd.array(np.where(np.isnan(v), None, v), dtype="Int64"),
        "w": rng.normal(0, 10, n),
        "d": [dt.date(2020, 1, 1) + dt.timedelta(days=int(x)) for x in rng.integers(0, 400, n)],
        "m": [decimal.Decimal(int(x)) / 100 for x in rng.integers(0, 100000, n)],
    })


def make_dims() -> pd.DataFrame:
    return pd.DataFrame({"g1": np.arange(12, dtype="int32"), "region": [f"r{i % 4}" for i in range(12)],
                         "weight": np.arange(12, dtype="int32") * 7 % 5})


AGGS = ["sum(v)", "count(*)", "count(v)", "avg(v)", "min(v)", "max(v)", "count(DISTINCT g2)", "sum(m)"]
OPS = [">", ">=", "<", "<=", "="]
WHERES = ["", "WHERE v > 10", "WHERE w < 5", "WHERE d >= DATE '2020-06-01'", "WHERE g2 IN ('c1', 'c2', 'c3')",
          "WHERE v BETWEEN 0 AND 50 AND w > -5", "WHERE NOT (g1 = 0)", "WHERE m > 300"]
GROUPS = ["g1", "g2", "g1, g2", "d"]


@st.composite
def queries(draw) -> str:
    shape = draw(st.sampled_from(["having", "topk", "join", "nested", "distinct", "union", "spj", "rowtopk",
                                  "global"]))
    agg = draw(st.sampled_from(AGGS))
    where = draw(st.sampled_from(WHERES))
    g = draw(st.sampled_from(GROUPS))
    c = draw(st.integers(-50, 400))
    op = draw(st.sampled_from(OPS))
    k = draw(st.integers(1, 8))
    desc = draw(st.sampled_from(["ASC", "DESC"]))
    if shape == "having":
        return f"SELECT {g}, {agg} AS a FROM facts {where} GROUP BY {g} HAVING {agg} {op} {c}"
    if shape == "topk":
        return f"SELECT {g}, {agg} AS a FROM facts {where} GROUP BY {g} ORDER BY a {desc} LIMIT {k}"
    if shape == "join":
        fwhere = where.replace("WHERE ", "AND f.") if where and " AND " not in where and "NOT" not in where \
            and "IN" not in where else ""
        tail = draw(st.sampled_from([f"HAVING {agg} {op} {c}", f"ORDER BY a {desc} LIMIT {k}"]))
        return (f"SELECT dm.region, {agg.replace('(v)', '(f.v)')} AS a FROM facts f JOIN dims dm ON f.g1 = dm.g1 "
                f"{('WHERE dm.weight > 0 ' + fwhere) if fwhere else ''} GROUP BY dm.region {tail}")
    if shape == "nested":
        outer = draw(st.sampled_from(["count(*)", "sum(a)", "max(a)"]))
        return (f"SELECT {outer} AS n FROM (SELECT {g}, {agg} AS a FROM facts {where} GROUP BY {g} "
                f"HAVING {agg} {op} {c}) x")
    if shape == "distinct":
        return f"SELECT DISTINCT g2, g1 FROM facts {where or 'WHERE v > ' + str(c % 90)}"
    if shape == "union":
        return (f"SELECT g1, v FROM facts WHERE v > {c % 90} UNION ALL "
                f"SELECT g1, v FROM facts WHERE w < {(c % 20) - 10}")
    if shape == "spj":
        return f"SELECT k, v, g2 FROM facts WHERE v {op} {c % 90} AND g1 <> 3"
    if shape == "rowtopk":
        return f"SELECT k, v FROM facts {where} ORDER BY v {desc}, k LIMIT {k}"
    return f"SELECT {agg} AS a FROM facts {where}"
