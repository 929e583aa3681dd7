"""Any linear recursive CTE with set semantics (``UNION``), evaluated by a semi-naive loop on Spark.

Spark 4 evaluates ``WITH RECURSIVE`` only with ``UNION ALL`` (``UNION`` is rejected with
UNION_NOT_SUPPORTED_IN_RECURSIVE_CTE), i.e. bag semantics, which never reaches a fixpoint on cyclic
data.  So every linear recursive CTE whose body is ``UNION`` runs here, whatever its columns,
tables and selections: the base branches once, then each round the recursive branches with the
recursive view replaced by the previous round's new rows; the new rows are those not seen before
(``EXCEPT DISTINCT``: set semantics, NULLs equal, as ``UNION`` has), and the loop ends when a
round adds nothing.  Non-recursive sibling CTEs become temp views; the outer query runs in Spark
SQL over the result.  A recursion that keeps producing new rows (a column growing along a cycle)
stops after ``MAX_ROUNDS`` with bad input naming the cause.

Shapes the loop cannot evaluate soundly are named and refused before Spark sees them
(``CannotEvaluate``): several recursive CTEs or mutual recursion, non-linear recursion (the step
reads the view twice), aggregation, negation, outer joins, windows or LIMIT inside the recursion.
A recursive CTE with ``UNION ALL`` is Spark's own (``union_all``), and a ``WITH RECURSIVE`` without
a self-reference is a plain query.

>>> lq = parse_linear("WITH RECURSIVE r(n) AS (SELECT 1 UNION SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r")
>>> lq.cte, lq.columns, len(lq.bases), len(lq.steps), lq.union_all
('r', ('n',), 1, 1, False)
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import sqlglot
from pyspark.sql import functions as F
from sqlglot import exp

from advisor.errors import BadInput, Unsupported
from advisor.plan.read_only import check_read_only

MAX_ROUNDS = 1000
CHECKPOINT_EVERY = 4  # rounds between checkpoints of the accumulated view (bounds the plan's depth)


class CannotEvaluate(BadInput):
    """A recursive shape neither the semi-naive loop nor Spark evaluates (the message names it)."""


@dataclass
class LinearQuery:
    """A linear recursive query: the recursive CTE's name and columns, its base and recursive
    branches, the non-recursive sibling CTEs (in order) and the outer query without its WITH."""

    sql: str
    cte: str
    columns: tuple
    bases: list
    steps: list
    siblings: list = field(default_factory=list)  # [(name, select expression, column names or ())]
    outer: exp.Expression | None = None
    union_all: bool = False


def _branches(u: exp.Expression) -> list:
    if isinstance(u, exp.Union):
        return _branches(u.this) + _branches(u.expression)
    if isinstance(u, exp.Subquery):
        return _branches(u.this)
    return [u]


def _reads(e: exp.Expression, name: str) -> int:
    return sum(1 for t in e.find_all(exp.Table) if t.name.lower() == name)


def parse_linear(sql: str) -> LinearQuery:
    """The linear recursion of ``sql`` (module docstring); ``Unsupported`` when it has none."""
    try:
        stmts = [s for s in sqlglot.parse(sql, read="spark") if s is not None]
    except sqlglot.errors.SqlglotError as e:
        raise BadInput(f"malformed SQL: {str(e).splitlines()[0]}") from None
    if len(stmts) != 1 or not isinstance(stmts[0], (exp.Select, exp.Union)):
        raise BadInput("expected exactly one SELECT statement")
    tree = stmts[0]
    check_read_only(tree)
    with_ = tree.args.get("with_") or tree.args.get("with")
    if with_ is None or not with_.args.get("recursive"):
        raise Unsupported("not a recursive query")
    ctes = list(with_.expressions)
    names = [c.alias_or_name.lower() for c in ctes]
    reads = {n: {t.name.lower() for t in c.this.find_all(exp.Table)} & set(names) for n, c in zip(names, ctes)}
    closure = {n: set(reads[n]) for n in names}
    for _ in names:
        for n in names:
            closure[n] |= {x for m in closure[n] for x in closure[m]}
    recursive = [n for n in names if n in reads[n]]
    cyc = [n for n in names if n in closure[n] and n not in reads[n]]
    if not recursive and not cyc:
        raise Unsupported("WITH RECURSIVE without a self-reference: not a recursive query")
    if len(recursive) > 1 or cyc:
        which = ", ".join(sorted(set(recursive) | set(cyc)))
        raise CannotEvaluate(
            f"cannot evaluate mutual or multiple recursion across CTEs {which}: the semi-naive loop "
            "evaluates one linearly recursive CTE"
        )
    name = recursive[0]
    cte = ctes[names.index(name)]
    if any(name in reads[n] for n in names if n != name):
        raise CannotEvaluate(f"cannot evaluate a CTE that reads the recursive view {name} inside the WITH")
    body = cte.this
    branches = _branches(body)
    bases = [b for b in branches if not _reads(b, name)]
    steps = [b for b in branches if _reads(b, name)]
    if not isinstance(body, exp.Union) or not bases:
        raise BadInput(f"recursive CTE {name} has no base case: its body must be a base query UNION a recursive step")
    union_all = any(isinstance(u, exp.Union) and not u.args.get("distinct") for u in body.find_all(exp.Union))
    if not union_all:
        for s in steps:
            _check_step(s, name)
    cols = list(_names(cte))
    first = bases[0]
    if not cols and isinstance(first, exp.Select):
        cols = [e.alias_or_name.lower() for e in first.expressions]
    for b in branches:
        if isinstance(b, exp.Select) and len(b.expressions) != len(cols):
            raise BadInput(f"recursive CTE {name} names {len(cols)} column(s) but a branch outputs {len(b.expressions)}")
    outer = tree.copy()
    outer.set("with_", None)
    outer.set("with", None)
    sib = [(n, c.this, _names(c)) for n, c in zip(names, ctes) if n != name]
    return LinearQuery(sql, name, tuple(cols), bases, steps, sib, outer, union_all)


def _names(cte: exp.CTE) -> tuple:
    """The column names a CTE declares (``name(a, b) AS ...``), or () when it declares none."""
    alias = cte.args.get("alias")
    return tuple(c.name.lower() for c in (alias.columns if alias else []))


def _check_step(s: exp.Expression, name: str) -> None:
    """Refuse a recursive branch the loop cannot evaluate (module docstring)."""
    n = _reads(s, name)
    if n > 1:
        raise CannotEvaluate(
            f"cannot evaluate non-linear recursion: a step of {name} reads {name} {n} times "
            "(the semi-naive loop evaluates linear recursion)"
        )
    if not isinstance(s, exp.Select):
        raise CannotEvaluate(f"cannot evaluate a recursive branch of {name} that is not a plain SELECT")
    if s.args.get("group") or any(a.find_ancestor(exp.Select) is s for a in s.find_all(exp.AggFunc)):
        raise CannotEvaluate(f"cannot evaluate aggregation inside the recursion of {name} (not monotone)")
    if any(_reads(n, name) for n in s.find_all(exp.Not, exp.Except, exp.Intersect, exp.Exists)):
        raise CannotEvaluate(f"cannot evaluate negation of {name} inside its recursion (not monotone)")
    if any(True for _ in s.find_all(exp.Window)) or s.args.get("limit") or s.args.get("order"):
        raise CannotEvaluate(f"cannot evaluate a window, ORDER BY or LIMIT inside the recursion of {name}")
    for j in s.find_all(exp.Join):
        if j.args.get("side"):
            raise CannotEvaluate(f"cannot evaluate an outer join inside the recursion of {name} (not monotone)")
        if (j.args.get("kind") or "").upper() == "ANTI":
            raise CannotEvaluate(f"cannot evaluate an anti-join inside the recursion of {name} (negation)")


def substitute(e: exp.Expression, views: dict) -> str:
    """``e`` as Spark SQL with each table named in ``views`` read from its temp view instead (its
    alias, or its old name as the alias, kept so qualified columns still resolve)."""
    tree = e.copy()
    for t in list(tree.find_all(exp.Table)):
        to = views.get(t.name.lower())
        if to is not None and not t.args.get("db"):
            alias = t.alias or t.name
            t.set("this", exp.to_identifier(to))
            t.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
    return tree.sql(dialect="spark")


def _frame(spark, branches: list, views: dict, cols: tuple):
    df = None
    for b in branches:
        d = spark.sql(substitute(b, views))
        d = d.toDF(*cols)
        df = d if df is None else df.union(d)
    return df


def _unseen(step, total, cols: tuple):
    """Distinct rows of ``step`` not in ``total`` (which is distinct), NULLs equal as in UNION."""
    a, b = step.distinct().alias("_n"), total.alias("_t")
    cond = None
    for c in cols:
        e = F.col(f"_n.`{c}`").eqNullSafe(F.col(f"_t.`{c}`"))
        cond = e if cond is None else cond & e
    return a.join(b, cond, "left_anti")


def run_linear(spark, lq: LinearQuery, views: dict | None = None, max_rounds: int = MAX_ROUNDS):
    """Evaluate ``lq``: (outer query's DataFrame, the recursive view's DataFrame, rounds).  ``views``
    maps table names to the temp views to read instead (a sketch's filtered link rows)."""
    views = dict(views or {})
    tag = uuid.uuid4().hex[:10]
    made = []
    for i, (n, e, names) in enumerate(lq.siblings):
        v = f"_cte_{tag}_{i}"
        df = spark.sql(substitute(e, views))
        (df.toDF(*names) if names else df).createOrReplaceTempView(v)
        views[n] = v
        made.append(v)
    cols = lq.columns
    total = delta = _frame(spark, lq.bases, views, cols).distinct().coalesce(1).localCheckpoint()
    rounds = 1
    dname = f"_delta_{tag}"
    made.append(dname)
    while True:
        delta.createOrReplaceTempView(dname)
        step = _frame(spark, lq.steps, views | {lq.cte: dname}, cols)
        new = _unseen(step, total, cols).coalesce(1).localCheckpoint()
        if new.isEmpty():
            break
        total = total.union(new)
        if rounds % CHECKPOINT_EVERY == 0:
            total = total.coalesce(1).localCheckpoint()
        delta = new
        rounds += 1
        if rounds > max_rounds:
            raise BadInput(
                f"recursive CTE {lq.cte} did not reach a fixpoint in {max_rounds} rounds: a column grows "
                "along cycles (bound it, e.g. WHERE r.hops < K)"
            )
    total = total.coalesce(1).localCheckpoint()
    vname = f"_view_{tag}"
    total.createOrReplaceTempView(vname)
    made.append(vname)
    out = spark.sql(substitute(lq.outer, views | {lq.cte: vname}))
    return out, total, rounds, made


def describe_loop(lq: LinearQuery) -> str:
    """One line naming the plan of ``run_linear``."""
    return (
        f"semi-naive loop on Spark: {len(lq.bases)} base and {len(lq.steps)} recursive branch(es) of "
        f"{lq.cte}({', '.join(lq.columns)}), set semantics (each round adds only rows not seen), "
        "until a round adds nothing; the outer query in Spark SQL"
    )
