"""A sketch as SQL over its attribute: merged range conditions, IN lists of few values, NULLs.

Adjacent fragments are merged into one `a >= lo AND a < hi` run (an infinite end drops its bound),
and runs of a few integer or date values are listed in one `a IN (...)` instead; the NULL fragment
adds `a IS NULL` (and NaN for floating columns). An empty sketch becomes `false`.

>>> from advisor.partition.range_partition import RangePartition
>>> part = RangePartition(0, "t", "a", "int", (10, 20, 30, 40), (5, 5, 5, 5, 5, 0))
>>> range_condition(part, frozenset({1, 3, 5}), "a")
'(`a` >= 10 AND `a` < 20) OR (`a` >= 30 AND `a` < 40) OR `a` IS NULL'
"""

from __future__ import annotations

import datetime as dt

from advisor.partition.fragment_runs import MAX_RUNS, capped_runs
from advisor.partition.range_partition import RangePartition
from advisor.plan.to_sql import in_lists, q
from advisor.warehouse.value_kinds import decode_value, encode_value, kind_of, sql_literal

# Runs OR'd flat at the leaves of ``range_condition``'s search tree.
TREE_LEAF = 4
# A bounded run over an integer or date column holding at most POINT_WIDTH values is written as those
# values, all such runs in one IN list (at most MAX_POINTS values; the rest stay ranges).  Spark
# tests an IN list per row in a hash set, and pushes it to Parquet as a value set when it holds at
# most ``spark.sql.parquet.pushdown.inFilterThreshold`` values; longer lists are cut into such
# lists (``in_lists``).  A sketch on l_suppkey at 10,002 fragments is mostly one-value runs: at SF1, 216 of
# them as a search tree took 0.73-1.5 s per sketched run, as one IN list 0.64-0.75 s, and counting
# the layout's rows 0.34-0.50 s against 0.17-0.22 s (BENCHMARKS.md).
POINT_WIDTH = 4
MAX_POINTS = 1024


def _points(part: RangePartition, i: int, j: int) -> list | None:
    """The values of run [i, j] if it is a bounded run of at most ``POINT_WIDTH`` integer or date values."""
    kind = kind_of(part.dtype)
    if kind not in ("int", "date") or i == 0 or j >= len(part.boundaries):
        return None
    lo, hi = (decode_value(part.boundaries[k], part.dtype) for k in (i - 1, j))
    width = (hi - lo).days if kind == "date" else int(hi) - int(lo)
    if width > POINT_WIDTH:
        return None
    if kind == "date":  # encoded like the boundaries, for ``sql_literal``
        return [encode_value(lo + dt.timedelta(days=d)) for d in range(width)]
    return list(range(int(lo), int(hi)))


def range_condition(part: RangePartition, fragments: frozenset, column: str, max_runs: int = MAX_RUNS) -> str:
    """SQL condition selecting the rows in the given fragments of `part` (exactly, unless more than
    `max_runs` runs forced bridging of small gaps, which only adds rows)."""
    return ranges_text(part, capped_runs(fragments, part, max_runs), fragments, column)


def ranges_text(part: RangePartition, runs: list[tuple[int, int]], fragments, column: str) -> str:
    """``range_condition`` over already bridged ``runs`` of ``fragments`` (whose NULL fragment adds
    ``IS NULL``)."""
    col = q(column)
    nb = len(part.boundaries)
    lit = lambda i: sql_literal(part.boundaries[i], part.dtype)  # noqa: E731

    def leaf(i: int, j: int) -> str:
        conds = ([f"{col} >= {lit(i - 1)}"] if i > 0 else []) + ([f"{col} < {lit(j)}"] if j < nb else [])
        return "(" + " AND ".join(conds or [f"{col} IS NOT NULL"]) + ")"

    def tree(rs: list[tuple[int, int]]) -> str:
        # runs are sorted and disjoint: a value below run m's lower bound can only be in runs < m,
        # one at or above it only in runs >= m, so each row tests O(log runs) bounds, not all of them
        m = len(rs) // 2
        cut = lit(rs[m][0] - 1)
        return f"(({col} < {cut} AND {branch(rs[:m])}) OR ({col} >= {cut} AND {branch(rs[m:])}))"

    def branch(rs: list[tuple[int, int]]) -> str:
        return " OR ".join(leaf(i, j) for i, j in rs) if len(rs) <= TREE_LEAF else tree(rs)

    points, ranged = [], []
    for i, j in runs:
        vals = _points(part, i, j)
        if vals is not None and len(points) + len(vals) <= MAX_POINTS:
            points += vals
        else:
            ranged.append((i, j))
    terms = [in_lists(col, [sql_literal(v, part.dtype) for v in points])] if points else []
    terms += [branch(ranged)] if ranged else []
    if part.null_id in fragments:
        nulls = f"{col} IS NULL"
        if kind_of(part.dtype) == "float":
            nulls = f"({nulls} OR isnan({col}))"
        terms.append(nulls)
    return " OR ".join(terms) if terms else "false"
