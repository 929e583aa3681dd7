"""A small clustered facts table with one captured sketch, shared by the tests of maintenance
decisions and of dropping tables (a real store and Spark)."""

from __future__ import annotations

from advisor.sketch.capture import capture
from advisor.warehouse.catalog import Catalog
from advisor.layout.clustered_copy import build_layout
from advisor.partition.range_partition import build_partition
from advisor.plan.parse import parse_sql
from advisor.warehouse.store import Store

from diffgen import make_facts


def clustered_sketch(spark, path, sql: str, seed: int = 5, n: int = 500):
    """(catalog, query, partitions, sketch): facts clustered on g1 (files of 50 rows, so a sketch of
    a few groups reads a fraction of them), and the query's sketch on g1 over 6 ranges."""
    cat = Catalog(spark, Store(path))
    cat.create_table("facts", spark.createDataFrame(make_facts(seed, n)))
    build_layout(cat, "facts", "g1", rows_per_file=50)
    q = parse_sql(sql, lambda t: cat.schema(t))
    parts = {"facts": build_partition(cat, "facts", "g1", 6)}
    sk = capture(cat, q, {"facts": "g1"}, 6, check=False, partitions=parts).sketch
    return cat, q, parts, sk


def nullable_facts(seed: int, n: int, x_values: int, groups: int, null_share: float):
    """A pandas table (x nullable Int64 in [0, x_values), a NULL with probability ``null_share``;
    g an int32 group in [0, groups); y an int32 in 1..10), deterministic per seed."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    x = rng.integers(0, x_values, n).astype("float")
    x[rng.random(n) < null_share] = np.nan
    return pd.DataFrame({"x": pd.array(np.where(np.isnan(x), None, x), dtype="Int64"),
                         "g": rng.integers(0, groups, n).astype("int32"),
                         "y": rng.integers(1, 11, n).astype("int32")})


def partitioned_facts(spark, path, df, fragments: int):
    """(catalog, range partition of x into ``fragments``, df): ``df`` stored as table t."""
    cat = Catalog(spark, Store(path))
    cat.create_table("t", spark.createDataFrame(df))
    return cat, build_partition(cat, "t", "x", fragments), df
