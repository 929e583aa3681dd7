"""A sketched scan of a clustered layout opens only the layout files its fragments can touch
(``advisor.layout.file_selection``), with the plain answer, also once batches sit on top."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from advisor.context import Context
from advisor.engine.execute import versions_now
from advisor.layout.clustered_copy import build_layout
from advisor.plan.parse import parse_sql
from advisor.sketch.capture import capture
from advisor.sketch.run import run_query

VALUES, PER_VALUE, PASSING = 500, 40, 10  # 20,000 rows; the 10 smallest values pass (400 rows)


@pytest.fixture(scope="module")
def ctx(spark, tmp_path_factory):
    hour = np.random.default_rng(5).permutation(np.repeat(np.arange(VALUES), PER_VALUE))
    pdf = pd.DataFrame({"i": hour * 7 - 1000, "s": [f"k{h:04d}" for h in hour],
                        "v": np.where(hour < PASSING, 50, 1)})
    c = Context(tmp_path_factory.mktemp("files") / "wh", spark=spark)
    c.catalog.create_table("u", spark.createDataFrame(pdf))
    return c


def _query(ctx, col):
    return parse_sql(f"SELECT {col}, sum(v) AS s FROM u GROUP BY {col} HAVING sum(v) > 1000", ctx.schema_lookup())


@pytest.mark.parametrize("col", ["i", "s"])
def test_a_sketched_scan_opens_only_the_files_it_touches(ctx, col):
    cat = ctx.catalog
    lay = build_layout(cat, "u", col, rows_per_file=2000)
    assert len(lay["manifest"]) >= 8
    q = _query(ctx, col)
    sk = capture(cat, q, {"u": col}, 100).sketch
    versions = versions_now(cat, q)
    sketched, plain = run_query(cat, q, versions, sk), run_query(cat, q, versions)
    assert sorted(sketched.rows) == sorted(plain.rows) and len(plain.rows) == PASSING
    # the 400 passing rows sit at the start of the sorted copy: one file, two if a fragment straddles
    assert 1 <= sketched.metrics.files_read <= 2 < len(lay["manifest"])


def test_rows_inserted_after_the_layout_are_still_read(ctx, spark):
    cat = ctx.catalog
    build_layout(cat, "u", "i", rows_per_file=2000)
    # a new passing value above every layout file's range, and more rows of a passing one
    ins = spark.createDataFrame(pd.DataFrame({"i": [10**6] * 30 + [-1000] * 3, "s": ["z"] * 33, "v": [50] * 33}))
    cat.apply_frames("u", ins, None)
    q = _query(ctx, "i")
    versions = versions_now(cat, q)
    sk = capture(cat, q, {"u": "i"}, 100, versions).sketch
    sketched, plain = run_query(cat, q, versions, sk), run_query(cat, q, versions)
    assert sorted(sketched.rows) == sorted(plain.rows) and len(plain.rows) == PASSING + 1
    assert (10**6, 1500) in [tuple(r) for r in plain.rows]
