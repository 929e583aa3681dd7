"""A workload's step list: which template or update batch comes when, and the drawn bindings.

The order is drawn once per workload (seeded), so every strategy replays exactly the same steps.
Quantile parameters are evaluated on the data as loaded, in one Spark job per parameter, before any
update batch is applied.  A query log's statements are replayed in the order written, as written.
"""

from __future__ import annotations

import datetime as dt
import decimal
import random
from typing import TYPE_CHECKING

import numpy as np

from advisor.errors import BadInput, spark_rejected
from advisor.plan.read_only import check_query_text

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog

GRID = [i / 200 for i in range(201)]  # quantile grid, interpolated between points


def plan_order(wl, limits: dict[int, int] | None = None) -> list[dict]:
    """[{"kind": "query", "template"} | {"kind": "update", "table", "inserts", "deletes"}] in order
    (a sequence's steps, its queries counted by the update rules given with it).

    A query log's steps also carry its statement ("sql", "at", "line"); a change-file update its
    "file", a Delta-history update ``"delta": True``.  A rule stops after ``limits[i]`` updates
    (its Delta commits; by default its change files), when given."""
    if wl.sequence is not None:
        queries = [({"kind": "query", "template": s["query"]} if "query" in s else {"kind": "update", **s["update"]})
                   for s in wl.sequence]
        if not wl.updates:
            return queries
    elif wl.query_log is not None:
        queries = [{"kind": "query", "template": e["template"], "sql": e["sql"], "at": e["at"], "line": e["line"]}
                   for e in wl.statements]
    else:
        rng = random.Random(f"order:{wl.seed}")
        names = list(wl.templates)
        weights = [wl.templates[n].weight for n in names]
        queries = [{"kind": "query", "template": rng.choices(names, weights)[0]} for _ in range(wl.queries)]
    used = [0] * len(wl.updates)
    out, n = [], 0
    for q in queries:
        out.append(q)
        if q["kind"] != "query":  # a sequence's own update step
            continue
        n += 1
        for j, u in enumerate(wl.updates):
            cap = (limits or {}).get(j, u.limit)
            if n % u.every == 0 and (cap is None or used[j] < cap):
                out.append(_update(u, used[j]))
                used[j] += 1
    return out


def _update(u, n: int) -> dict:
    """The ``n``-th update step of rule ``u`` (its counts are filled in when a file or commit is applied)."""
    step = {"kind": "update", "table": u.table, "inserts": u.inserts, "deletes": u.deletes}
    if u.changes is not None:
        step["file"] = u.changes[n]
    elif u.delta_history:
        step["delta"] = True
    return step


def literal(v) -> str:
    """A Python value as a Spark SQL literal."""
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return format(v, ".12g")
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, dt.datetime):
        return f"TIMESTAMP '{v.isoformat(sep=' ')}'"
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    return "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'"


def _jsonable(v):
    if isinstance(v, (dt.date, dt.datetime)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, np.generic):
        return v.item()
    return v


def _quantile_grid(spark, catalog: Catalog, wl, tname: str, p) -> list:
    """The column's (or query's) values at the GRID quantiles, as Python values."""
    spec = p.spec
    for t in catalog.tables():
        catalog.read(t).createOrReplaceTempView(t)
    if "column" in spec:
        t, col = spec["column"].lower().split(".")
        if not catalog.exists(t):
            raise BadInput(f"{wl.path}: template {tname}, param {p.name}: unknown table {t!r}")
        catalog.column_type(t, col)  # BadInput for an unknown column
        src, col_expr = t, f"`{col}`"
    else:
        try:
            check_query_text(spec["sql"], "the quantile sql")
        except BadInput as e:
            raise BadInput(f"{wl.path}: template {tname}, param {p.name}: {e}") from None
        try:
            cols = spark.sql(spec["sql"]).columns
        except Exception as e:
            raise BadInput(f"{wl.path}: template {tname}, param {p.name}: "
                           f"{spark_rejected(e, 'the quantile sql', 200)}") from None
        src, col_expr = f"({spec['sql']}) q", f"`{cols[0]}`"
    probs = ", ".join(format(g, ".6g") for g in GRID)
    try:
        row = spark.sql(f"SELECT percentile_approx({col_expr}, array({probs}), 10000) AS q FROM {src}").first()
    except Exception as e:
        raise BadInput(f"{wl.path}: template {tname}, param {p.name}: cannot take quantiles "
                       f"({str(e).splitlines()[0][:200]})") from None
    vals = list(row["q"] or [])
    if not vals:
        raise BadInput(f"{wl.path}: template {tname}, param {p.name}: the quantile source has no rows")
    return vals


def _draw(rng: random.Random, p, grid):
    if p.kind == "uniform":
        lo, hi = p.spec
        v = rng.uniform(lo, hi)
        return int(round(v)) if p.integer else v
    if p.kind == "choice":
        return rng.choice(p.spec)
    lo, hi = p.spec.get("between", [0.0, 1.0])
    q = rng.uniform(lo, hi)
    i = min(int(q * (len(grid) - 1)), len(grid) - 2)
    a, b = grid[i], grid[i + 1]
    if isinstance(a, (dt.date, dt.datetime)):
        return a if q * (len(grid) - 1) - i < 0.5 else b
    w = q * (len(grid) - 1) - i
    v = float(a) + w * (float(b) - float(a))
    return int(round(v)) if p.integer or (isinstance(a, int) and isinstance(b, int)) else v


def plan_steps(catalog: Catalog, wl, limits: dict[int, int] | None = None) -> list[dict]:
    """The full step list with bindings and rendered SQL (run before any batch is applied);
    ``limits`` as in ``plan_order``."""
    spark = catalog.spark
    grids = {}
    for tname, t in wl.templates.items():
        for p in t.params:
            if p.kind == "quantile":
                grids[(tname, p.name)] = _quantile_grid(spark, catalog, wl, tname, p)
    steps = []
    for i, s in enumerate(plan_order(wl, limits)):
        if s["kind"] == "update":
            steps.append({"step": i, **s})
            continue
        if "sql" in s:  # a query log's statement, as written
            steps.append({"step": i, "kind": "query", "template": s["template"], "bindings": {}, "sql": s["sql"],
                          "at": s["at"], "line": s["line"]})
            continue
        t = wl.templates[s["template"]]
        rng = random.Random(f"bind:{wl.seed}:{i}")
        vals = {p.name: _draw(rng, p, grids.get((t.name, p.name))) for p in t.params}
        sql = t.sql
        for k, v in vals.items():
            sql = sql.replace("{" + k + "}", literal(v))
        steps.append({"step": i, "kind": "query", "template": t.name,
                      "bindings": {k: _jsonable(v) for k, v in vals.items()}, "sql": sql})
    return steps
