"""Narrow copies: a copy of the columns the templates read, sorted on the sketch attribute.

Differential: a sketched query served from a narrow copy returns exactly the rows of a plain run,
after any sequence of insert and delete batches (the copy is a snapshot; the batches since are read
on top, so it is never served stale), while reading a fraction of the rows.  A query reading a
column the copy lacks is never served from it.  Copies are widened by a later template's columns,
and dropped under a disk budget least predicted saving first.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.context import Context
from advisor.layout.clustered_copy import build_layout
from advisor.layout.registry import find_layout, layouts_of
from advisor.plan.parse import parse_sql
from advisor.plan.read_columns import read_columns
from advisor.selection import copy_budget
from advisor.selection.copy_pricing import copy_columns
from advisor.selection.decision_memory import remember
from advisor.sketch.capture import capture
from advisor.sketch.run import run_query

N = 20_000
HAVING = "SELECT k, sum(v) AS s FROM t GROUP BY k HAVING sum(v) > {x}"


def _frame(rng, n: int, start: int = 0) -> pd.DataFrame:
    k = rng.integers(0, 2_000, n)
    return pd.DataFrame({"k": k.astype("int64"), "v": np.where(k < 40, 40, 1).astype("int64"),
                         "w": rng.integers(0, 9, n).astype("int64"),
                         "note": [f"n{(start + i) % 31}" for i in range(n)]})


@pytest.fixture()
def ctx(spark, tmp_path):
    c = Context(tmp_path / "w", spark=spark)
    c.catalog.create_table("t", spark.createDataFrame(_frame(np.random.default_rng(3), N)), "test")
    return c


def _q(c, sql):
    return parse_sql(sql, c.schema_lookup())


def test_a_narrow_copy_serves_only_readers_of_its_columns(ctx):
    cat = ctx.catalog
    lay = build_layout(cat, "t", "k", columns=["v"])
    assert lay["columns"] == ["k", "v"]
    q = _q(ctx, HAVING.format(x=300))
    assert read_columns(q) == {"t": frozenset({"k", "v"})}
    assert find_layout(cat.store, "t", "k", None, read_columns(q)["t"])["id"] == lay["id"]
    assert find_layout(cat.store, "t", "k", None, {"k", "w"}) is None
    assert find_layout(cat.store, "t", "k") is None  # a reader of every column
    full = build_layout(cat, "t", "k")  # a full layout serves every reader: it replaces the narrow copy
    assert [x["id"] for x in layouts_of(cat.store, "t", "k")] == [full["id"]]
    assert find_layout(cat.store, "t", "k", None, {"k", "v"})["id"] == find_layout(cat.store, "t", "k")["id"] == full["id"]


def test_sketched_from_the_copy_equals_plain_and_reads_less(ctx):
    cat = ctx.catalog
    build_layout(cat, "t", "k", columns=["v"])
    q = _q(ctx, HAVING.format(x=300))
    sk = capture(cat, q, {"t": "k"}, 200).sketch
    plain = run_query(cat, q)
    got = run_query(cat, q, sketch=sk)
    assert sorted(got.rows) == sorted(plain.rows) and len(plain.rows) > 5
    assert got.metrics.rows_read < N / 5 <= plain.metrics.rows_read
    # a template reading a column the copy lacks is served from the table, still equal
    q2 = _q(ctx, "SELECT k, sum(v) AS s, max(w) AS m FROM t GROUP BY k HAVING sum(v) > 300")
    sk2 = capture(cat, q2, {"t": "k"}, 200).sketch
    assert sorted(run_query(cat, q2, sketch=sk2).rows) == sorted(run_query(cat, q2).rows)


batches = st.lists(st.tuples(st.integers(0, 300), st.integers(0, 300), st.integers(0, 2**16)), min_size=1, max_size=3)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seq=batches, x=st.sampled_from([300, 500, 800]))
def test_copy_served_equals_plain_under_update_sequences(spark, tmp_path_factory, seq, x):
    c = Context(tmp_path_factory.mktemp("narrow_seq"), spark=spark)
    cat = c.catalog
    cat.create_table("t", spark.createDataFrame(_frame(np.random.default_rng(5), N)), "test")
    build_layout(cat, "t", "k", columns=["v"])
    for ins_n, del_n, seed in seq:
        rng = np.random.default_rng(seed)
        ins = spark.createDataFrame(_frame(rng, ins_n, start=seed)) if ins_n else None
        rids = cat.read("t", with_rid=True).select("_rid").toPandas()["_rid"].to_numpy()
        dels = (spark.createDataFrame(pd.DataFrame({"_rid": rng.choice(rids, size=min(del_n, rids.size),
                                                                       replace=False).astype("int64")}))
                if del_n else None)
        cat.apply_frames("t", ins, dels)
        q = _q(c, HAVING.format(x=x))
        sk = capture(cat, q, {"t": "k"}, 200).sketch
        got, plain = run_query(cat, q, sketch=sk), run_query(cat, q)
        assert sorted(got.rows) == sorted(plain.rows)


def test_a_copy_is_never_served_stale(ctx, spark):
    """A batch inserts a group that passes the HAVING: the sketched answer read from the copy
    (written before the batch) must hold it, so the copy is brought to the current version."""
    cat = ctx.catalog
    lay = build_layout(cat, "t", "k", columns=["v"])
    new = pd.DataFrame({"k": [5_000] * 3, "v": [400, 400, 400], "w": [1, 2, 3], "note": ["x"] * 3})
    cat.apply_frames("t", spark.createDataFrame(new), None)
    q = _q(ctx, HAVING.format(x=1000))
    sk = capture(cat, q, {"t": "k"}, 200).sketch
    got = run_query(cat, q, sketch=sk)
    assert (5_000, 1200) in got.rows
    assert sorted(got.rows) == sorted(run_query(cat, q).rows)
    assert find_layout(cat.store, "t", "k", cat.current_version("t"), {"k", "v"})["table_version"] == lay["table_version"] < \
        cat.current_version("t")
    assert got.metrics.rows_read < N / 5  # read through the copy, not the table


def test_widened_copy_replaces_the_narrower_one(ctx):
    cat = ctx.catalog
    a = build_layout(cat, "t", "k", columns=["v"])
    b = build_layout(cat, "t", "k", columns=["v", "w"])
    ids = [x["id"] for x in layouts_of(cat.store, "t", "k")]
    assert ids == [b["id"]] and a["id"] != b["id"]
    assert b["columns"] == ["k", "v", "w"]


def test_a_copy_holds_the_columns_of_templates_sketched_on_its_attribute(ctx):
    """A template with a live sketch on t.k reads w: a copy priced for another template on t.k (which
    reads v only) holds w too, so the first template's next use does not rebuild it wider."""
    cat = ctx.catalog
    assert copy_columns(cat, "t", "k", {"k", "v"}) == ["k", "v"]
    other = _q(ctx, "SELECT k, max(w) AS m FROM t GROUP BY k HAVING max(w) > 7")
    capture(cat, other, {"t": "k"}, 200)
    assert copy_columns(cat, "t", "k", {"k", "v"}) == ["k", "v", "w"]
    assert copy_columns(cat, "t", "note", {"note", "v"}) == ["note", "v"]  # other attribute: not widened


def test_copies_over_the_budget_go_least_saving_first(ctx):
    cat = ctx.catalog
    cat.create_table("u", cat.read("t"), "test")
    keep = build_layout(cat, "t", "k", columns=["v"])
    cheap = build_layout(cat, "u", "w", columns=["v"])
    remember(cat.store, "tmpl-k", "CB-OPT-GB", go=True, reason="go", table="t", attr="k", horizon=20)
    remember(cat.store, "tmpl-w", "CB-OPT-GB", go=True, reason="go", table="u", attr="w", horizon=1)
    sizes = {x["id"]: copy_budget.layout_bytes(x) for x in (keep, cheap)}
    assert copy_budget.enforce(cat, sum(sizes.values())) == []  # within the budget: nothing dropped
    lines = copy_budget.enforce(cat, sizes[keep["id"]] + 1)
    assert len(lines) == 1 and f"narrow copy {cheap['id']} of u on w" in lines[0]
    assert find_layout(cat.store, "u", "w", None, {"v", "w"}) is None
    assert find_layout(cat.store, "t", "k", None, {"k", "v"})["id"] == keep["id"]
    # the copy just built is kept even when it alone exceeds the budget
    assert copy_budget.enforce(cat, 0, keep=keep["id"]) == []


@pytest.mark.parametrize("attr", ["k", "note"])
def test_the_manifest_from_the_footers_equals_sparks_statistics(ctx, spark, attr):
    from pyspark.sql import functions as F

    lay = build_layout(ctx.catalog, "t", attr, columns=["v"], rows_per_file=4_000)
    assert len(lay["manifest"]) >= 4
    got = {m["path"].rsplit("/", 1)[-1]: (m["min"], m["max"], m["nulls"], m["rows"]) for m in lay["manifest"]}
    stats = (spark.read.parquet(lay["path"]).withColumn("f", F.input_file_name()).groupBy("f")
             .agg(F.min(attr), F.max(attr), F.sum(F.col(attr).isNull().cast("int")), F.count(F.lit(1))).collect())
    want = {r[0].rsplit("/", 1)[-1]: (r[1], r[2], int(r[3]), int(r[4])) for r in stats}
    assert got == want
