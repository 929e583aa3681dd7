"""Value-aligned layout blocks (``advisor.layout.blocks``): a sketch becomes ``__blk IN (ids)``.

Pure: starts and ids worked by hand; for random data, partitions and sketches, the chosen blocks
hold every row of the sketch's fragments and no block splits a value.  Spark, differential: over a
layout with blocks and later insert/delete batches, the sketched query (whose filter is the block
list) returns exactly the plain answer, counts rows inserted after the layout, and reads less.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.layout import blocks
from advisor.partition.range_partition import RangePartition


def test_starts_cut_at_value_changes_after_each_multiple_of_the_block_rows():
    # rows before each value: 0, 600, 1200, 3700, 3710 -> blocks 0, 0, 1, 3, 3 (value 3 alone holds 2,500)
    starts = blocks.starts_from_counts(np.array([8, 1, 3, 5, 2]), np.array([10, 600, 2500, 10, 600]), rows=1000)
    assert starts.tolist() == [1, 3, 5]
    assert blocks.assign(starts, [0, 1, 2, 3, 4, 5, 9]).tolist() == [0, 0, 0, 1, 1, 2, 2]
    assert blocks.assign(starts, [4, 0], nulls=[False, True]).tolist() == [1, blocks.NULL_BLOCK]


def test_a_sketch_maps_to_the_blocks_its_fragments_overlap():
    starts = np.array([0, 10, 20, 30])           # blocks [.., 10), [10, 20), [20, 30), [30, ..)
    part = RangePartition(1, "t", "a", "bigint", (5, 12, 25), (1, 1, 1, 1, 0), 1, 4)
    # fragments: 0 = (.., 5), 1 = [5, 12), 2 = [12, 25), 3 = [25, ..), 4 = NULL
    assert blocks.sketch_blocks(starts, part, {0}) == [0]
    assert blocks.sketch_blocks(starts, part, {1}) == [0, 1]       # 5..11
    assert blocks.sketch_blocks(starts, part, {2}) == [1, 2]       # 12..24
    assert blocks.sketch_blocks(starts, part, {3, 4}) == [blocks.NULL_BLOCK, 2, 3]
    assert blocks.condition(starts, part, set()) == "false"
    assert blocks.condition(starts, part, {1}) == "__blk IN (0, 1)"


def test_date_sketches_use_day_numbers():
    d0 = dt.date(2020, 1, 1)
    days = lambda d: (d - dt.date(1970, 1, 1)).days  # noqa: E731
    starts = np.array([days(d0), days(d0 + dt.timedelta(days=7))])   # blocks from Jan 1 and Jan 8
    part = RangePartition(1, "t", "d", "date", ("2020-01-05", "2020-01-11"), (1, 1, 1, 0), 1, 3)
    assert blocks.sketch_blocks(starts, part, {1}) == [0, 1]       # Jan 5 .. Jan 10
    assert blocks.sketch_blocks(starts, part, {2}) == [1]           # Jan 11 on
    assert blocks.sketch_blocks(starts, part, {0}) == [0]           # before Jan 5


def test_predicted_reads_follow_the_blocks():
    from advisor.layout.skip_prediction import ReadUnit

    starts = np.array([0, 10, 20])
    units = [ReadUnit(100, 0, 9), ReadUnit(100, 10, 19), ReadUnit(100, 15, 25), ReadUnit(50, None, None, 50),
             ReadUnit(30, always=True)]
    total = 380
    assert blocks.read_fraction(units, starts, "bigint", [0]) == pytest.approx(130 / total)
    assert blocks.read_fraction(units, starts, "bigint", [1]) == pytest.approx(230 / total)
    assert blocks.read_fraction(units, starts, "bigint", [blocks.NULL_BLOCK]) == pytest.approx(80 / total)
    assert blocks.read_fraction(units, np.array([], dtype=np.int64), "bigint", [blocks.NULL_BLOCK]) == \
        pytest.approx(80 / total)


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.integers(-50, 50), min_size=1, max_size=300),
       cuts=st.lists(st.integers(-60, 60), min_size=1, max_size=8, unique=True),
       rows=st.integers(1, 40), data=st.data())
def test_blocks_cover_the_sketch_and_never_split_a_value(values, cuts, rows, data):
    v = np.array(values)
    keys, counts = np.unique(v, return_counts=True)
    starts = blocks.starts_from_counts(keys, counts, rows)
    ids = blocks.assign(starts, v)
    for x in keys:                                        # a value lives in one block, inside its range
        b = set(ids[v == x].tolist())
        assert len(b) == 1
        (b,) = b
        assert b == 0 or starts[b] <= x
        assert b == len(starts) - 1 or x < starts[b + 1]
    bounds = tuple(sorted(cuts))
    part = RangePartition(1, "t", "a", "bigint", bounds, (), 1, len(bounds) + 1)
    frags = data.draw(st.sets(st.integers(0, len(bounds)), max_size=len(bounds) + 1))
    chosen = set(blocks.sketch_blocks(starts, part, frags))
    frag_of = np.searchsorted(np.array(bounds), v, side="right")  # fragment i = [b_{i-1}, b_i)
    for x, f, b in zip(v.tolist(), frag_of.tolist(), ids.tolist()):
        if f in frags:
            assert b in chosen, (x, f, b)


# ---------------- Spark ----------------
@pytest.fixture()
def laid_out(spark, tmp_path):
    from advisor.sketch.capture import capture
    from advisor.context import Context
    from advisor.layout.clustered_copy import build_layout
    from advisor.partition.range_partition import build_partition
    from advisor.plan.parse import parse_sql

    rng = np.random.default_rng(3)
    n = 4000
    g = pd.array(rng.integers(0, 400, n), dtype="Int64")
    g[rng.random(n) < 0.02] = pd.NA
    pdf = pd.DataFrame({"g": g, "v": rng.integers(1, 10, n)})
    c = Context(tmp_path / "wh", spark=spark)
    cat = c.catalog
    cat.create_table("t", spark.createDataFrame(pdf).selectExpr("CAST(g AS BIGINT) AS g", "CAST(v AS BIGINT) AS v"), "test")
    lay = build_layout(cat, "t", "g", rows_per_file=200)   # 20 files, blocks of 50 rows
    sql = "SELECT g, sum(v) AS s FROM t GROUP BY g HAVING sum(v) > 90"
    q = parse_sql(sql, c.schema_lookup())
    parts = {"t": build_partition(cat, "t", "g", 200)}
    sk = capture(cat, q, {"t": "g"}, 200, check=False, partitions=parts).sketch
    return c, lay, q, sk


def _sorted(rows):
    return sorted(rows, key=repr)


def test_sketched_runs_filter_by_blocks_and_answer_exactly(spark, laid_out):
    from advisor.sketch.run import run_query
    from advisor.engine.execute import versions_now
    from advisor.sketch.apply import sketch_source

    c, lay, q, sk = laid_out
    cat = c.catalog
    assert blocks.load_starts(lay["path"]) is not None
    assert "__blk" not in cat.read("t").columns
    # later batches: rows added to groups in the sketch (their sums only grow, so the sketch still
    # holds every passing group), zero-valued rows elsewhere and in the NULL group, and deletions
    sketched_groups = sorted(r[0] for r in run_query(cat, q, versions_now(cat, q)).rows if r[0] is not None)
    assert sketched_groups
    for i in range(3):
        live = cat.read("t", with_rid=True).select("_rid").limit(40).collect()
        ins = spark.createDataFrame(pd.DataFrame({"g": [sketched_groups[i % len(sketched_groups)], 999, None],
                                                  "v": [9, 0, 0]}), "g bigint, v bigint")
        cat.apply_frames("t", ins, spark.createDataFrame([(r["_rid"],) for r in live[i::7]], "_rid long"))
    v = versions_now(cat, q)
    plain = run_query(cat, q, v)
    sketched = run_query(cat, q, v, sk)
    assert _sorted(sketched.rows) == _sorted(plain.rows)
    scan = next(s for s in q.scans() if s.table == "t")
    where = sketch_source(cat, sk, v)(scan).from_sql.split(" WHERE ", 1)[1]
    # the block list leads (the sketch's ranges are ANDed when finer than its blocks)
    assert where.startswith("__blk IN (") or where.startswith("(__blk IN (")
    assert sketched.metrics.rows_read < plain.metrics.rows_read
    # the rows inserted after the layout were numbered once, in copies beside the layout
    assert len(list((Path(lay["path"]) / blocks.ONTOP_DIR).glob("*.parquet"))) >= 1
