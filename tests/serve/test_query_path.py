"""The advise path's decision branches, each checked against a plain run of the same query.

Table ``t`` (30,000 rows in random order, so its one base file spreads every group over all rows):
150 groups ``g`` of 200 rows; groups 0-14 are heavy (``val`` in [50, 60), else [0, 10)), so
``HAVING sum(val) > 5000`` keeps the 15 heavy groups (10 % of the rows).  A sketch on ``g`` can
skip only once a layout clusters ``g``: the path must price and build it, or say why not.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from advisor.context import Context
from advisor.layout import clustered_copy
from advisor.serve.decision_record import RECORD_VERSION, one_line
from advisor.serve.query_path import serve_query, serve_update
from advisor.serve.settings import AdviseSettings
from advisor.sketch.capture import capture
from advisor.plan.parse import parse_sql

HAVING = "SELECT g, sum(val) AS s FROM t GROUP BY g HAVING sum(val) > {x}"
PLAIN = AdviseSettings(use=False)


def table(spark, seed=5):
    rng = np.random.default_rng(seed)
    g = rng.permutation(np.repeat(np.arange(150), 200))
    heavy = g < 15
    return spark.createDataFrame(pd.DataFrame({
        "g": g, "val": np.where(heavy, rng.uniform(50, 60, g.size), rng.uniform(0, 10, g.size)),
        "k": rng.integers(0, 1_000_000, g.size)}))


@pytest.fixture
def ctx(spark, tmp_path):
    c = Context(tmp_path / "wh", spark=spark)
    c.catalog.create_table("t", table(spark), "test")
    return c


def same_rows(ctx, sql, served):
    plain = serve_query(ctx, sql, PLAIN)
    assert plain.record["sketch_id"] is None and plain.record["scan"]["rows"] == 30_000
    # doubles summed in another order differ in the last bits: the digest rounds them to 9 digits
    assert served.record["result"] == plain.record["result"]
    return plain


def test_a_sketch_keeping_every_group_is_declined_and_says_why(ctx):
    sql = HAVING.format(x=100)  # every group sums to more than 100: a sketch would keep the table
    got = serve_query(ctx, sql)
    rec = got.record
    assert rec["version"] == RECORD_VERSION and rec["decision"]["action"] == "no-go"
    assert rec["decision"]["reason"].startswith("no-go") and rec["sketch_id"] is None
    # sized by the capture job that answered it (cheaper than the prior's two scans of sampling)
    assert "sized exactly by its capture job" in rec["decision"]["reason"]
    assert "covers ~100.0%" in rec["decision"]["reason"]
    assert one_line(rec).startswith("no sketch: read 30,000 rows of tables holding 30,000; no-go")
    same_rows(ctx, sql, got)


def test_go_builds_the_layout_captures_then_reuses(ctx):
    s = AdviseSettings(uses=60)  # a query expected to run often: the layout pays for itself
    sql = HAVING.format(x=5000)
    first = serve_query(ctx, sql, s)
    d = first.record["decision"]
    assert d["action"] == "capture" and d["attr"] == "t.g", d["reason"]
    assert d["layout"]["built"] and d["layout"]["table"] == "t" and d["layout"]["attr"] == "g"
    # the query reads g and val: a narrow copy of those two columns, not a rewrite of every column
    assert "narrow copy of t (g, val) sorted on g" in d["reason"] and d["layout"]["columns"] == ["g", "val"]
    same_rows(ctx, sql, first)
    second = serve_query(ctx, sql, s)
    assert second.record["decision"]["action"] == "reuse"
    assert second.record["sketch_id"] == first.record["sketch_id"]
    assert second.record["scan"]["rows"] <= 0.3 * 30_000  # the heavy groups' pages, not the table
    # the skip prediction (the copy's blocks) within 10 points of the rows the scan read
    assert abs(second.record["predicted_read"] - second.record["scan"]["rows"] / 30_000) <= 0.10
    assert one_line(second.record).startswith(f"used sketch {first.record['sketch_id']} (t.g,")
    same_rows(ctx, sql, second)
    # a new binding: reuse proven by Z3 (a stricter HAVING keeps a subset of the groups)
    third = serve_query(ctx, HAVING.format(x=5500), s)
    assert third.record["decision"]["action"] == "reuse" and "proven by Z3" in third.record["decision"]["reason"]
    same_rows(ctx, HAVING.format(x=5500), third)


def test_a_stale_sketch_is_caught_up_before_use(ctx, tmp_path):
    s = AdviseSettings(uses=60)
    sql = HAVING.format(x=5000)
    sid = serve_query(ctx, sql, s).record["sketch_id"]
    batch = tmp_path / "b.parquet"
    pd.DataFrame({"op": ["I"] * 80, "g": [77] * 80, "val": [60.0] * 80, "k": range(80)}).to_parquet(batch)
    v = ctx.catalog.apply_batch("t", str(batch))
    assert serve_update(ctx, "t", v.n_ins, s) == []  # the default policy is lazy: nothing yet
    got = serve_query(ctx, sql, s)
    assert got.record["decision"]["action"] == "reuse" and got.maintenance
    assert got.maintenance[0]["sketch_id"] == sid and got.maintenance[0]["trigger"] == "query"
    assert f"caught sketch {sid} up to the current data" in got.record["decision"]["reason"]
    assert 77 in {r[0] for r in got.rows}  # group 77 now passes: 200 * ~5 + 80 * 60 > 5000
    plain = serve_query(ctx, sql, PLAIN)
    assert plain.record["scan"]["rows"] == 30_080 and got.record["result"] == plain.record["result"]


@pytest.mark.parametrize("on_driver", [False, True])
def test_a_stored_sketch_the_files_cannot_skip_gets_its_copy_priced(ctx, monkeypatch, on_driver):
    """Priced as a narrow copy of the two columns the query reads (written by Spark, or on the
    driver: ``arrow_copy``); with building off the line says after how many uses it would pay and
    which command builds it, at the default settings the copy is built and serves the sketch."""
    monkeypatch.setattr(clustered_copy, "ARROW_BUILD", on_driver)
    sql = HAVING.format(x=5000)
    sk = capture(ctx.catalog, parse_sql(sql, ctx.schema_lookup()), {"t": "g"}, 100).sketch
    declined = serve_query(ctx, sql, AdviseSettings(advise=False, build_layouts=False))
    d = declined.record["decision"]
    assert d["action"] == "no-go" and f"sketch {sk.id} (t.g) reads 100% of t" in d["reason"]
    assert "pays after" in d["reason"] and "`advisor layout t g`" in d["reason"]
    assert "a narrow copy of t (g, val) sorted on g" in d["reason"]
    built = serve_query(ctx, sql, AdviseSettings(advise=False))
    d = built.record["decision"]
    assert d["action"] == "reuse" and d["layout"]["built"] and built.record["sketch_id"] == sk.id
    assert d["layout"]["columns"] == ["g", "val"]
    assert ("written on the driver" in d["reason"]) == on_driver
    assert built.record["scan"]["rows"] <= 0.3 * 30_000
    same_rows(ctx, sql, built)


def test_reuse_only_and_plain_runs_say_so(ctx):
    sql = HAVING.format(x=5000)
    only = serve_query(ctx, sql, AdviseSettings(advise=False)).record["decision"]
    assert only["action"] == "plain" and "--no-advise" in only["reason"]
    assert "no stored sketch of this template" in only["reason"]
    plain = serve_query(ctx, sql, PLAIN).record["decision"]
    assert plain["action"] == "plain" and "--no-use" in plain["reason"]


def test_an_unsupported_query_runs_plainly_with_the_reason(ctx):
    got = serve_query(ctx, "SELECT g, rank() OVER (PARTITION BY g ORDER BY val) AS r FROM t")
    assert got.record["decision"]["action"] == "unsupported" and "window" in got.record["decision"]["reason"]
    assert len(got.rows) == 30_000
