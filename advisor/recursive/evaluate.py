"""Evaluating a recognised recursive query on Spark, plainly or with a sketch on the link table.

Spark 4.2 evaluates ``WITH RECURSIVE`` with ``UNION ALL`` only (``UNION`` is rejected with
UNION_NOT_SUPPORTED_IN_RECURSIVE_CTE), i.e. with bag semantics: on cyclic links an unbounded
reachability query never reaches a fixpoint, and a hop-bounded one enumerates every walk.  So a
hop-bounded query whose walks are few runs in Spark's own recursive CTE in its UNION ALL form,
duplicates removed before the outer query (``native_sql``; the same answer under set semantics);
anything else runs in a semi-naive DataFrame loop (each round joins only the new tuples with the
links, removes duplicates and known tuples, and checkpoints), with the outer query in Spark SQL
over its result.  ``advisor bench recursive`` times both.  A sketch filters the link rows once,
before the recursion, so the base case and every recursive step read only its fragments.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

import sqlglot
from pyspark.sql import functions as F
from sqlglot import exp

from advisor.engine.scan_metrics import collect_scan_metrics
from advisor.errors import spark_rejected

CHECKPOINT_EVERY = 4  # rounds between checkpoints of the accumulated view (bounds the plan's depth)


@dataclass
class RecursiveRun:
    """A recursive query's answer and what it read: link rows that entered the recursion (after
    the sketch's filter), rows Spark's Parquet scan produced, view size and rounds."""

    columns: list
    rows: list
    seconds: float
    link_rows: int
    scan_rows: int
    view_rows: int
    rounds: int
    how: str = "semi-naive loop"
    sketch: dict | None = field(default=None)

    def to_json(self) -> dict:
        return {
            "columns": self.columns,
            "rows": [list(r) for r in self.rows],
            "seconds": round(self.seconds, 4),
            "link_rows": self.link_rows,
            "scan_rows": self.scan_rows,
            "view_rows": self.view_rows,
            "rounds": self.rounds,
            "how": self.how,
            "sketch": self.sketch,
        }


def link_frame(
    catalog, shape, version: int | None = None, condition: str | None = None, view: str | None = None
):
    """The link table's (src, dst[, cost]) rows (from ``view`` if given, e.g. a clustered layout),
    filtered by a sketch condition if given."""
    df = catalog.spark.table(view) if view is not None else catalog.read(shape.table, version)
    if condition is not None:
        df = df.where(condition)
    cols = [F.col(shape.src_col).alias("l_src"), F.col(shape.dst_col).alias("l_dst")]
    if shape.cost_col:
        cols.append(F.col(shape.cost_col).alias("l_cost"))
    return df.select(*cols)


def semi_naive(shape, links):
    """The recursive view as a checkpointed DataFrame (columns named as the CTE's), and the rounds."""
    c = list(shape.columns)
    base = links
    if shape.base_sources is not None or (shape.forward and shape.sources is not None):
        base = base.where(F.col("l_src").isin(list(shape.sources)))
    outs = [F.col("l_src").alias(c[0]), F.col("l_dst").alias(c[1])]
    if shape.cost_col:
        outs.append(F.col("l_cost").alias(c[2]))
    if shape.has_hops:
        outs.append(F.lit(1).cast("int").alias(c[-1]))
    total = delta = base.select(*outs).distinct().coalesce(1).localCheckpoint()
    rounds = 1
    while not delta.isEmpty() and (shape.max_hops is None or rounds < shape.max_hops):
        if shape.forward:
            step = delta.join(links, F.col(c[1]) == F.col("l_src"))
            outs = [F.col(c[0]), F.col("l_dst").alias(c[1])]
            cost = (F.col(c[2]) + F.col("l_cost")) if shape.cost_col else None
        else:
            step = delta.join(links, F.col("l_dst") == F.col(c[0]))
            outs = [F.col("l_src").alias(c[0]), F.col(c[1])]
            cost = (F.col("l_cost") + F.col(c[2])) if shape.cost_col else None
        if cost is not None:
            outs.append(cost.alias(c[2]))
        if shape.has_hops:
            outs.append((F.col(c[-1]) + 1).cast("int").alias(c[-1]))
        new = step.select(*outs).distinct().join(total, on=c, how="left_anti").coalesce(1).localCheckpoint()
        total = total.unionByName(new)
        if rounds % CHECKPOINT_EVERY == 0:
            total = total.coalesce(1).localCheckpoint()
        delta = new
        rounds += 1
    return total, rounds


NATIVE_MAX_WALKS = 2_000_000  # estimated walks up to which Spark's own (UNION ALL) recursion is used


def walk_estimate(shape, link_rows: int, sources_n: int) -> float | None:
    """Rows Spark's UNION ALL recursion would produce (every walk up to the hop bound): base rows
    times the mean out-degree to the power of the further hops; None without a hop bound (on
    cyclic links it never ends).

    >>> from advisor.recursive.shape import recognise
    >>> s = recognise("WITH RECURSIVE r(src, dst, hops) AS (SELECT src, dst, 1 FROM link UNION SELECT "
    ...               "r.src, l.dst, r.hops + 1 FROM r JOIN link l ON r.dst = l.src WHERE r.hops < 3) "
    ...               "SELECT * FROM r")
    >>> walk_estimate(s, 400, 100)
    8400.0
    """
    if shape.max_hops is None:
        return None
    degree = link_rows / max(1, sources_n)
    base = link_rows if shape.sources is None else len(shape.sources) * degree
    return float(sum(base * degree**h for h in range(shape.max_hops)))


def run_recursive(
    catalog,
    shape,
    version: int | None = None,
    condition: str | None = None,
    sketch: dict | None = None,
    view: str | None = None,
    how: str = "auto",
) -> RecursiveRun:
    """Answer the query.  The recursion runs in Spark's own recursive CTE (``native_sql``) when
    it has a hop bound and the walks it would enumerate are few (``walk_estimate`` up to
    ``NATIVE_MAX_WALKS``), else in the semi-naive loop; ``how`` = native | loop forces one.  The
    outer query runs in Spark SQL either way; the link rows are read (and filtered) once."""
    t0 = time.perf_counter()
    try:
        raw = link_frame(catalog, shape, version, condition, view)
        links = raw.localCheckpoint()  # runs the scan once: its metrics are the rows read
        link_rows = links.count()
        scan = collect_scan_metrics(raw)
        if how == "auto":
            walks = walk_estimate(shape, link_rows, links.select("l_src").distinct().count())
            how = "native" if walks is not None and walks <= NATIVE_MAX_WALKS else "loop"
        name = f"_rec_{uuid.uuid4().hex[:10]}"
        if how == "native":
            named = [F.col("l_src").alias(shape.src_col), F.col("l_dst").alias(shape.dst_col)]
            if shape.cost_col:
                named.append(F.col("l_cost").alias(shape.cost_col))
            links.select(*named).createOrReplaceTempView(name)
            df = catalog.spark.sql(native_sql(shape, name))
            rows = [tuple(r) for r in df.collect()]
            rounds, view_rows, label = shape.max_hops, -1, "Spark recursive CTE (UNION ALL, hop-bounded)"
        else:
            vw, rounds = semi_naive(shape, links)
            vw.createOrReplaceTempView(name)
            df = catalog.spark.sql(shape.outer_sql(name))
            rows = [tuple(r) for r in df.collect()]
            view_rows, label = vw.count(), "semi-naive loop"
        catalog.spark.catalog.dropTempView(name)
    except Exception as e:
        raise spark_rejected(e) from None
    secs = time.perf_counter() - t0
    return RecursiveRun(
        df.columns, rows, secs, link_rows, scan.rows_read, view_rows, rounds, how=label, sketch=sketch
    )


def native_sql(shape, link_view: str) -> str:
    """Spark's own recursive CTE for a hop-bounded shape: ``UNION ALL`` in the recursion (bag
    semantics, every walk), duplicates removed before the outer query."""
    if shape.max_hops is None:
        raise ValueError("Spark's recursive CTE needs UNION ALL, which terminates only with a hop bound")
    tree = sqlglot.parse_one(shape.sql, read="spark")
    for u in tree.find_all(exp.Union):
        u.set("distinct", False)
    for t in list(tree.find_all(exp.Table)):
        if t.name.lower() == shape.table:
            t.set("this", exp.to_identifier(link_view))
            if not t.alias:
                t.set("alias", exp.TableAlias(this=exp.to_identifier(shape.table)))
    src = tree.args["from_"].this
    dedup = exp.select("*").distinct().from_(shape.cte).subquery(src.alias_or_name)
    tree.args["from_"].set("this", dedup)
    return tree.sql(dialect="spark")


def run_native(catalog, shape, version: int | None = None) -> RecursiveRun:
    """The hop-bounded query through Spark's own recursive CTE (``native_sql``)."""
    return run_recursive(catalog, shape, version, how="native")
