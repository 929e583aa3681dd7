"""A sketch of many scattered layout blocks runs on Spark's default stack: Parquet gets its block
ids as lists short enough to deserialize (one flat list of ~700 ids overflowed an executor's stack)."""

from __future__ import annotations

import numpy as np

from advisor.layout import blocks
from advisor.partition.range_partition import RangePartition


def test_a_sketch_of_900_scattered_blocks_runs_and_counts_right(spark, tmp_path):
    n_blocks = 2000
    starts = np.arange(0, 10 * n_blocks, 10)                 # block b holds a in [10b, 10b + 10)
    bounds = tuple(int(x) for x in range(5, 10 * n_blocks, 10))  # fragment f = [10f - 5, 10f + 5)
    part = RangePartition(1, "t", "a", "bigint", bounds, (1,) * (len(bounds) + 1) + (0,), 1, len(bounds) + 1)
    frags = {f for f in range(1, len(bounds), 4)}            # every fourth fragment: two blocks each
    ids = blocks.sketch_blocks(starts, part, frags)
    assert len(ids) > 900
    cond = blocks.condition(starts, part, frags)
    path = str(tmp_path / "layout")
    spark.range(0, 10 * n_blocks).selectExpr("id AS a", f"CAST(id DIV 10 AS INT) AS {blocks.BLK}") \
        .repartition(1).sortWithinPartitions("a").write.option("parquet.block.size", 4096).parquet(path)
    got = spark.sql(f"SELECT count(*) AS n FROM parquet.`{path}` WHERE {cond}").collect()[0]["n"]
    assert got == 10 * len(set(ids))
