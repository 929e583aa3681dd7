"""The sample query on the driver (`advisor.estimation.sample_eval`) against the same query run by Spark.

Table ``s``: 6,000 rows, 40 groups ``g``, a DECIMAL price and discount, a string with NULLs, a
date and a double with NULLs.  For each query the frame the estimators read (keys, arguments,
which sample rows reach the aggregation) must be the same from both paths, and so must every
candidate's estimated size.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from advisor.context import Context
from advisor.estimation.size_estimates import SID, U, analyze, estimate, get_sample, sample_frame
from advisor.plan.parse import parse_sql
from advisor.estimation.sample_eval import local_frame
from advisor.maintain import relops
from advisor.partition.refine import fine_partition


@pytest.fixture(scope="module")
def ctx(spark, tmp_path_factory):
    rng = np.random.default_rng(11)
    n = 6000
    g = rng.integers(0, 40, n)
    pdf = pd.DataFrame({
        "g": g, "k": rng.integers(0, 5000, n),
        "price": np.round(rng.uniform(1, 1000, n), 2), "disc": np.round(rng.integers(0, 11, n) / 100, 2),
        "tag": pd.Series(rng.choice(["a", "b", "c", None], n), dtype=object),
        "d": [dt.date(2020, 1, 1) + dt.timedelta(days=int(x)) for x in rng.integers(0, 700, n)],
        "x": np.where(rng.random(n) < 0.1, np.nan, rng.normal(10, 3, n))})
    c = Context(tmp_path_factory.mktemp("sq"), spark=spark)
    df = spark.createDataFrame(pdf).selectExpr(
        "CAST(g AS INT) AS g", "k", "CAST(price AS DECIMAL(12,2)) AS price", "CAST(disc AS DECIMAL(4,2)) AS disc",
        "tag", "d", "CASE WHEN isnan(x) THEN NULL ELSE x END AS x")
    c.catalog.create_table("s", df, "test")
    c.catalog.create_table("dim", spark.createDataFrame(pd.DataFrame({"g": np.arange(40), "w": np.arange(40) % 3})),
                           "test")
    # a joined table with 0-2 rows per key: sample rows dropped, kept once, or multiplied
    dim2 = pd.DataFrame({"g": [i for i in range(40) for _ in range(i % 3)],
                         "z": [j for i in range(40) for j in range(i % 3)]})
    c.catalog.create_table("dim2", spark.createDataFrame(dim2).selectExpr("CAST(g AS BIGINT) AS g", "z"), "test")
    return c


QUERIES = [
    "SELECT g, sum(price * (1 - disc)) FROM s WHERE tag = 'a' AND d >= DATE '2020-06-01' GROUP BY g "
    "HAVING sum(price * (1 - disc)) > 3000",
    "SELECT g, avg(x), count(*) FROM s WHERE x IS NOT NULL AND disc BETWEEN 0.02 AND 0.07 GROUP BY g "
    "HAVING avg(x) > 10 AND count(*) > 20",
    "SELECT g, tag, max(price) FROM s WHERE tag IN ('a', 'b') OR price > 900 GROUP BY g, tag "
    "HAVING max(price) > 950",
    "SELECT g, sum(CASE WHEN disc > 0.05 THEN price ELSE 0 END) AS t FROM s GROUP BY g ORDER BY t DESC LIMIT 5",
    "SELECT count(*) FROM (SELECT g, d, sum(price) AS sp FROM s WHERE k < 4000 GROUP BY g, d "
    "HAVING sum(price) > 400) i GROUP BY g HAVING count(*) > 3",
    "SELECT g, min(x) FROM s WHERE x * 2 + 1 > 20 OR tag IS NULL GROUP BY g HAVING min(x) < 3",
    "SELECT g, sum(v) FROM (SELECT g, price * 2 - k AS v FROM s WHERE d < DATE '2021-03-01') t "
    "GROUP BY g HAVING sum(v) > 5000",  # a projection below the aggregation
    # joins: the joined table read in full on the driver (sample_query.dimension_frame)
    "SELECT s.g, sum(price) FROM s JOIN dim ON s.g = dim.g WHERE w = 1 GROUP BY s.g HAVING sum(price) > 100",
    "SELECT s.g, w, count(*) FROM s JOIN dim ON s.g = dim.g AND k > 2000 GROUP BY s.g, w HAVING count(*) > 20",
    "SELECT s.g, z, avg(price) FROM s JOIN dim2 ON s.g = dim2.g WHERE tag = 'b' GROUP BY s.g, z "
    "HAVING avg(price) > 450",
    # comma joins: the WHERE equalities are the join's keys
    "SELECT s.g, sum(price) FROM s, dim WHERE s.g = dim.g AND w = 1 GROUP BY s.g HAVING sum(price) > 100",
    "SELECT s.g, z, avg(price) FROM s, dim2, dim WHERE s.g = dim2.g AND dim.g = s.g AND tag = 'b' "
    "AND w < 2 GROUP BY s.g, z HAVING avg(price) > 450",
]


def _frame(ctx, sql, local):
    cat = ctx.catalog
    q = parse_sql(sql, ctx.schema_lookup())
    shape = analyze(q, lambda t: cat.version(t).rows)
    v = cat.current_version("s")
    sample = get_sample(cat, "s", shape.strata, 0.2, 0, v)
    parts = {("k", 50): fine_partition(cat, "s", "k", 50, v)}
    pdf, _ = sample_frame(cat, shape, sample, parts, {"s": v}, local=local)
    # a sample row joined to several rows: compare them in key order, not in each engine's own
    keys = [k for k in shape.keys if k in pdf.columns and pd.api.types.is_numeric_dtype(pdf[k])]
    return shape, sample, pdf.sort_values([SID, *keys], kind="stable").reset_index(drop=True)


def _norm(v):
    """A key value compared across paths: Spark's left merge turns integer keys into floats."""
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
        return float(v)
    return str(pd.Timestamp(v).date()) if isinstance(v, (dt.date, pd.Timestamp)) else v


@pytest.mark.parametrize("sql", QUERIES)
def test_driver_frame_equals_spark_frame(ctx, sql):
    shape, sample, loc = _frame(ctx, sql, True)
    assert local_frame(shape, sample.path, SID, _dimension(ctx)) is not None  # the driver path was taken
    _, _, spk = _frame(ctx, sql, False)
    assert len(loc) == len(spk) and loc[U].sum() == spk[U].sum()
    assert loc[U].to_numpy().tolist() == spk[U].to_numpy().tolist()
    if " WHERE " in sql:
        assert 0 < loc[U].sum() < len(loc)  # the WHERE both keeps and drops sample rows
    live_l, live_s = loc[loc[U]], spk[spk[U]]
    for k in shape.keys:
        a = live_l[k].astype(object).where(live_l[k].notna(), None).tolist()
        b = live_s[k].astype(object).where(live_s[k].notna(), None).tolist()
        assert [_norm(v) for v in a] == [_norm(v) for v in b], k
    for c in shape.args:
        np.testing.assert_allclose(live_l[c].to_numpy(float), live_s[c].to_numpy(float), rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize("sql", [QUERIES[0], QUERIES[3], QUERIES[4], QUERIES[9]])
def test_estimated_sizes_do_not_depend_on_the_path(ctx, sql):
    cat = ctx.catalog
    q = parse_sql(sql, ctx.schema_lookup())
    shape = analyze(q, lambda t: cat.version(t).rows)
    plan = {"k": (50,), "g": (20,)}
    a = estimate(cat, shape, plan, 0.2, 0, local=True)
    b = estimate(cat, shape, plan, 0.2, 0, local=False)
    for key in plan.items():
        key = (key[0], key[1][0])
        x, y = a.sizes[key], b.sizes[key]
        assert x.rows_expected == pytest.approx(y.rows_expected, rel=1e-9, abs=1e-9)
        assert x.rows_point == y.rows_point and x.point_fragments == y.point_fragments
        assert (x.ci_lo, x.ci_hi) == pytest.approx((y.ci_lo, y.ci_hi), rel=1e-9, abs=1e-9)
    assert a.groups == b.groups


def _dimension(ctx):
    from advisor.estimation.sample_eval import dimension_frame

    cat = ctx.catalog
    return lambda scan: dimension_frame(cat, scan, cat.current_version(scan.table))


def test_cached_joined_table_frames_are_shared_unchanged(ctx):
    """The joined table's frame is cached across estimates (``dimension_frame``): a query must not
    modify it, and the next query must get the very same frame."""
    cat = ctx.catalog
    sql = QUERIES[8]  # JOIN dim ... AND k > 2000: a residual condition on top of the equality
    shape = analyze(parse_sql(sql, ctx.schema_lookup()), lambda t: cat.version(t).rows)
    sample = get_sample(cat, "s", shape.strata, 0.2, 0, cat.current_version("s"))
    dim = _dimension(ctx)
    scan = next(n for n in shape.inner.child.walk() if getattr(n, "table", None) == "dim")
    before = dim(scan).copy()
    first = local_frame(shape, sample.path, SID, dim)
    assert dim(scan) is dim(scan)
    pd.testing.assert_frame_equal(dim(scan), before)
    pd.testing.assert_frame_equal(local_frame(shape, sample.path, SID, dim), first)


def test_unreadable_joins_and_date_arguments_take_the_spark_path(ctx, monkeypatch):
    import advisor.estimation.sample_eval as sq

    cat = ctx.catalog
    join = ("SELECT s.g, sum(price) FROM s JOIN dim ON s.g = dim.g WHERE w = 1 GROUP BY s.g "
            "HAVING sum(price) > 100")
    for sql, dimension in [(join, None),  # no way to read the joined table
                           ("SELECT g, count(*), max(d) FROM s GROUP BY g HAVING count(*) > 100", _dimension(ctx))]:
        shape = analyze(parse_sql(sql, ctx.schema_lookup()), lambda t: cat.version(t).rows)
        sample = get_sample(cat, "s", shape.strata, 0.2, 0, cat.current_version("s"))
        assert local_frame(shape, sample.path, SID, dimension) is None
    monkeypatch.setattr(sq, "DIM_ROWS_MAX", 39)  # dim has 40 rows: too large to read on the driver
    sq._DIMS.clear()  # the limit is checked when a table is read
    shape = analyze(parse_sql(join, ctx.schema_lookup()), lambda t: cat.version(t).rows)
    sample = get_sample(cat, "s", shape.strata, 0.2, 0, cat.current_version("s"))
    assert local_frame(shape, sample.path, SID, _dimension(ctx)) is None


def test_driver_fragment_ids_equal_spark_assign_column(ctx, spark):
    """``estimate._fragment_ids`` assigns the sample's fragments on the driver; every id must be
    the one Spark's ``assign_column`` gives the same sample row, for each column type (int,
    decimal, date, double with NULLs, string with NULLs, timestamp), boundary values included."""
    from advisor.estimation.sample_frame import _fragment_ids
    from advisor.partition.range_partition import assign_column

    cat = ctx.catalog
    if "ts" not in cat.tables():
        rng = np.random.default_rng(5)
        base = dt.datetime(2021, 3, 27, 22, 0, 0)
        stamps = [base + dt.timedelta(minutes=int(m)) for m in rng.integers(0, 60 * 24 * 5, 3000)]
        pdf = pd.DataFrame({"g": rng.integers(0, 10, 3000), "t": stamps})
        cat.create_table("ts", spark.createDataFrame(pdf).selectExpr("CAST(g AS INT) AS g", "CAST(t AS TIMESTAMP) AS t"),
                         "test")
    for table, attrs in [("s", ["k", "price", "d", "x", "tag", "g"]), ("ts", ["t"])]:
        v = cat.current_version(table)
        sample = get_sample(cat, table, ["g"], 0.2, 0, v)
        parts = {(a, 30): fine_partition(cat, table, a, 30, v) for a in attrs}
        got, fcols = _fragment_ids(sample.path, parts)
        df = spark.read.parquet(sample.path)
        df = df.filter("_in") if "_in" in df.columns else df
        for i, (k, p) in enumerate(sorted(parts.items())):
            df = assign_column(df, p.attr, p, f"__s{i}")
        want = df.select("_rid", "_n_g", *[f"__s{i}" for i in range(len(parts))]).toPandas()
        want = want.set_index("_rid").loc[got[SID].to_numpy()]
        assert len(got) == len(want) > 100
        assert got["_n_g"].tolist() == want["_n_g"].tolist()
        for i, (k, p) in enumerate(sorted(parts.items())):
            ours = got[fcols[k]].to_numpy()
            assert ours.tolist() == want[f"__s{i}"].astype(np.int64).tolist(), k
            assert len(set(ours.tolist())) > 3, k  # the partition really splits the sample
        if table == "s":  # integer values sitting exactly on a boundary were among those compared
            from advisor.warehouse.value_kinds import decode_value
            bounds = {decode_value(b, parts[("g", 30)].dtype) for b in parts[("g", 30)].boundaries}
            assert df.filter(df.g.isin(list(bounds))).count() > 0


def test_a_comma_join_joins_on_its_where_equalities(ctx, monkeypatch):
    """No cross product on the driver: every join gets a condition, and the frame equals that of
    the same query written with JOIN ... ON."""
    conds = []
    real = relops.join
    monkeypatch.setattr(relops, "join", lambda a, b, cond, *rest: conds.append(cond) or real(a, b, cond, *rest))
    comma = "SELECT s.g, z, count(*) FROM s, dim2, dim WHERE s.g = dim2.g AND dim.g = s.g AND w = 1 " \
            "GROUP BY s.g, z HAVING count(*) > 3"
    on = "SELECT s.g, z, count(*) FROM s JOIN dim2 ON s.g = dim2.g JOIN dim ON dim.g = s.g WHERE w = 1 " \
         "GROUP BY s.g, z HAVING count(*) > 3"
    _, _, a = _frame(ctx, comma, True)
    assert len(conds) == 2 and all(c is not None for c in conds)
    _, _, b = _frame(ctx, on, True)
    assert len(a) == len(b) > 0
    assert sorted(map(tuple, a.astype(str).to_numpy())) == sorted(map(tuple, b.astype(str).to_numpy()))
