"""Evaluating a recognised recursive query on Spark, plainly or with a sketch on the link table.

Spark 4.2 evaluates ``WITH RECURSIVE`` with ``UNION ALL`` only (``UNION`` is rejected with
UNION_NOT_SUPPORTED_IN_RECURSIVE_CTE), i.e. with bag semantics: on cyclic links an unbounded
reachability query never reaches a fixpoint, and a hop-bounded one enumerates every walk.  So a
hop-bounded query whose walks are few runs in Spark's own recursive CTE in its UNION ALL form,
duplicates removed before the outer query (``native_sql``; the same answer under set semantics);
anything else runs in the semi-naive loop of ``advisor.recursive.linear`` over the query's own
text.  ``advisor bench recursive`` times both.  A sketch filters the link rows once, before the
recursion (a temp view of the link table read instead of it), so the base case and every
recursive step read only its fragments.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp

from advisor.engine.scan_metrics import collect_scan_metrics
from advisor.errors import BadInput, spark_rejected
from advisor.recursive.linear import parse_linear, run_linear
from advisor.warehouse.table_files import RID


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


def link_rows_frame(catalog, shape, version: int | None = None, condition: str | None = None,
                    view: str | None = None):
    """The link table's rows, every column but the row id (from ``view`` if given, e.g. a
    clustered layout), filtered by a sketch condition if given."""
    df = catalog.spark.table(view) if view is not None else catalog.read(shape.table, version)
    if condition is not None:
        df = df.where(condition)
    return df.select(*[c for c in df.columns if c != RID])


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
    spark = catalog.spark
    try:
        raw = link_rows_frame(catalog, shape, version, condition, view)
        links = raw.localCheckpoint()  # runs the scan once: its metrics are the rows read
        link_rows = links.count()
        scan = collect_scan_metrics(raw)
        if how == "auto":
            walks = walk_estimate(shape, link_rows, links.select(shape.src_col).distinct().count())
            how = "native" if walks is not None and walks <= NATIVE_MAX_WALKS else "loop"
        name = f"_rec_{uuid.uuid4().hex[:10]}"
        links.createOrReplaceTempView(name)
        made = [name]
        if how == "native":
            df = spark.sql(native_sql(shape, name))
            rows = [tuple(r) for r in df.collect()]
            rounds, view_rows, label = shape.max_hops, -1, "Spark recursive CTE (UNION ALL, hop-bounded)"
        else:
            df, vw, rounds, more = run_linear(spark, parse_linear(shape.sql), {shape.table: name})
            made += more
            rows = [tuple(r) for r in df.collect()]
            view_rows, label = vw.count(), "semi-naive loop"
        for v in made:
            spark.catalog.dropTempView(v)
    except BadInput:
        raise
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


def run_general(catalog, lq) -> RecursiveRun:
    """A linear recursive query no sketch shape covers: the semi-naive loop over the latest
    versions of the tables it reads (registered under their names, as plain runs read them)."""
    spark = catalog.spark
    t0 = time.perf_counter()
    try:
        for t in catalog.tables():
            catalog.read(t).createOrReplaceTempView(t)
        df, vw, rounds, made = run_linear(spark, lq)
        rows = [tuple(r) for r in df.collect()]
        view_rows = vw.count()
        scan = collect_scan_metrics(df)
        for v in made:
            spark.catalog.dropTempView(v)
    except BadInput:
        raise
    except Exception as e:
        raise spark_rejected(e) from None
    return RecursiveRun(df.columns, rows, time.perf_counter() - t0, -1, scan.rows_read, view_rows, rounds)
