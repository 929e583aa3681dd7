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
