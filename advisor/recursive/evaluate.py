"""Evaluating a recognised recursive query on Spark, plainly or with a sketch on the link table.

Spark 4.2 evaluates ``WITH RECURSIVE`` with ``UNION ALL`` only (``UNION`` is rejected with
UNION_NOT_SUPPORTED_IN_RECURSIVE_CTE), i.e. with bag semantics: on cyclic links an unbounded
reachability query never reaches a fixpoint, and a hop-bounded one enumerates every walk.  So a
hop-bounded query whose walks are few runs in Spark's own recursive CTE in its UNION ALL form,
duplicates removed before the outer query (``native_sql``; the same answer under set semantics).
Otherwise the link rows Spark read (the sketch's filter applied) are, when they fit the driver
(``DRIVER_MAX_LINKS``, the bound under which capture and maintenance keep them there anyway),
evaluated by the shape's semi-naive rule in Python (``advisor.recursive.derive``: one Spark job
instead of several per round) and handed back to Spark as the view; larger ones run in the
semi-naive loop of ``advisor.recursive.linear`` over the query's own text.  The outer query runs
in Spark SQL either way.  ``advisor bench recursive`` times the Spark evaluations.  A sketch filters the link rows once, before the
recursion (a temp view of the link table read instead of it), so the base case and every
recursive step read only its fragments.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

import sqlglot
from pyspark.sql.types import IntegerType, StructField, StructType
from sqlglot import exp

from advisor.engine.scan_metrics import collect_scan_metrics
from advisor.errors import BadInput, spark_rejected
from advisor.recursive.derive import LinkGraph, Spec, rounds_fixpoint
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
    schema: object = field(default=None, repr=False)  # the answer's Spark schema

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


DRIVER_MAX_LINKS = 2_000_000  # link rows up to which the recursion runs on the driver
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
    """Answer the query (module docstring): on the driver when the link table fits
    ``DRIVER_MAX_LINKS``, else in Spark's own recursive CTE (``native_sql``) when it has a hop
    bound and the walks it would enumerate are few (``walk_estimate`` up to ``NATIVE_MAX_WALKS``),
    else in the Spark loop; ``how`` = driver | native | loop forces one.  The outer query runs in
    Spark SQL either way; the link rows are read (and filtered) once."""
    if how == "auto" and catalog.version(shape.table, version).rows <= DRIVER_MAX_LINKS:
        how = "driver"
    t0 = time.perf_counter()
    spark = catalog.spark
    made: list = []
    try:
        raw = link_rows_frame(catalog, shape, version, condition, view)
        if how == "driver":
            sel = raw.selectExpr(*link_exprs(shape))
            links = link_tuples(sel.toArrow().to_pydict(), shape)  # the one scan of the link rows
            scan, link_rows = collect_scan_metrics(sel), len(links)
            vw, rounds, view_rows = driver_view(spark, shape, links, raw.schema)
            made.append(f"_view_{uuid.uuid4().hex[:10]}")
            vw.createOrReplaceTempView(made[-1])
            df = spark.sql(shape.outer_sql(made[-1]))
            label = f"semi-naive loop on the driver over the {link_rows:,} link rows read"
        else:
            links = raw.localCheckpoint()  # runs the scan once: its metrics are the rows read
            link_rows = links.count()
            scan = collect_scan_metrics(raw)
            if how == "auto":
                walks = walk_estimate(shape, link_rows, links.select(shape.src_col).distinct().count())
                how = "native" if walks is not None and walks <= NATIVE_MAX_WALKS else "loop"
            made.append(f"_rec_{uuid.uuid4().hex[:10]}")
            links.createOrReplaceTempView(made[0])
            if how == "native":
                df = spark.sql(native_sql(shape, made[0]))
                rounds, view_rows, label = shape.max_hops, -1, "Spark recursive CTE (UNION ALL, hop-bounded)"
            else:
                df, vw, rounds, more = run_linear(spark, parse_linear(shape.sql), {shape.table: made[0]})
                made += more
                view_rows, label = vw.count(), "semi-naive loop on Spark"
        rows = [tuple(r) for r in df.collect()]
        for v in made:
            spark.catalog.dropTempView(v)
    except BadInput:
        raise
    except Exception as e:
        raise spark_rejected(e) from None
    secs = time.perf_counter() - t0
    return RecursiveRun(
        df.columns, rows, secs, link_rows, scan.rows_read, view_rows, rounds, how=label, sketch=sketch,
        schema=df.schema,
    )


def link_exprs(shape) -> list:
    """The link columns the recursion reads as SQL: s, d, c (0 without a cost column) and, with
    link-row selections, their flags b (base) and k (step), computed from the query's predicates."""
    exprs = [f"`{shape.src_col}` AS s", f"`{shape.dst_col}` AS d",
             (f"`{shape.cost_col}`" if shape.cost_col else "0") + " AS c"]
    if shape.base_filter or shape.step_filter:
        exprs += [f"coalesce(({p or 'true'}), false) AS {n}" for n, p in (("b", shape.base_filter),
                                                                             ("k", shape.step_filter))]
    return exprs


def link_tuples(tab: dict, shape, keys=None) -> dict:
    """Key (``keys``, default the row position) -> link tuple from the columns of ``link_exprs``."""
    flagged = bool(shape.base_filter or shape.step_filter)
    rows = zip(tab["s"], tab["d"], tab["c"], tab["b"], tab["k"]) if flagged else zip(tab["s"], tab["d"], tab["c"])
    return dict(zip(keys, rows)) if keys is not None else dict(enumerate(rows))


def driver_view(spark, shape, links: dict, schema):
    """The recursive view of ``shape`` over ``links``, evaluated on the driver, as a Spark
    DataFrame typed as Spark types the CTE (node and cost columns as the link table's ``schema``
    has them, the hop count INT); and the rounds and the view's size."""
    view, rounds = rounds_fixpoint(Spec.of(shape), LinkGraph(links))
    types = {f.name.lower(): f.dataType for f in schema.fields}
    cols = list(shape.columns)
    kinds = ([shape.dst_col] if shape.nodes else [shape.src_col, shape.dst_col]) + (
        [shape.cost_col] if shape.cost_col else []
    )
    fields = [StructField(c, types[k], True) for c, k in zip(cols, kinds)]
    if shape.has_hops:
        fields.append(StructField(cols[-1], IntegerType(), False))
    return spark.createDataFrame(sorted(view, key=repr), StructType(fields)), rounds, len(view)


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
    return RecursiveRun(df.columns, rows, time.perf_counter() - t0, -1, scan.rows_read, view_rows, rounds,
                        schema=df.schema)
