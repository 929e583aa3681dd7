"""Sketches of queries with semi-joins, anti-joins or left outer joins have no incremental rule:
maintenance recaptures them, and the result equals a fresh capture on the new version."""

from __future__ import annotations

import pytest
from diffgen import make_dims, make_facts

from advisor.maintain.engine import not_incremental
from advisor.maintain.spark.service import maintain_sketch
from advisor.partition.range_partition import build_partition
from advisor.plan.parse import parse_sql
from advisor.sketch.capture import capture, capture_batch
from advisor.warehouse.catalog import Catalog
from advisor.warehouse.sketch_records import load_sketch
from advisor.warehouse.store import Store
from workloads.data.update_batches import batch_frames

SEMI = ("SELECT f.g1, sum(f.v) AS s FROM facts f WHERE f.g1 IN "
        "(SELECT g1 FROM facts GROUP BY g1 HAVING sum(v) > 1500) GROUP BY f.g1")
ANTI = ("SELECT d.region, count(*) AS n FROM dims d WHERE NOT EXISTS "
        "(SELECT * FROM facts f WHERE f.g1 = d.g1 AND f.v > 95) GROUP BY d.region")


def test_partial_joins_have_no_incremental_rule():
    schema = {"facts": [("g1", "int"), ("v", "int")], "dims": [("g1", "int"), ("region", "string")]}.get
    assert "SemiJoin" in not_incremental(parse_sql(SEMI, schema).root)
    assert not_incremental(parse_sql("SELECT g1, sum(v) AS s FROM facts GROUP BY g1", schema).root) is None


@pytest.mark.parametrize("sql, table, attr", [(SEMI, "facts", "g1"), (ANTI, "dims", "g1")])
def test_maintenance_recaptures(spark, tmp_path, sql, table, attr):
    cat = Catalog(spark, Store(tmp_path / "wh"))
    cat.create_table("facts", spark.createDataFrame(make_facts(3, 400)))
    cat.create_table("dims", spark.createDataFrame(make_dims()))
    q = parse_sql(sql, lambda t: cat.schema(t))
    parts = {table: build_partition(cat, table, attr, 6)}
    sk = capture(cat, q, {table: attr}, 6, partitions=parts).sketch
    ins, dels = batch_frames(cat, "facts", 30, 20, 7)
    cat.apply_frames("facts", ins, dels)
    res = maintain_sketch(cat, sk.id)
    assert res.how == "recapture"
    new = load_sketch(cat.store, res.new_id)
    versions = {t: cat.current_version(t) for t in ("facts", "dims")}
    (fresh,), _ = capture_batch(cat, [(q, {table: attr}, parts)], versions)
    assert new.parts[0].fragments == fresh.parts[0].fragments
    assert new.data_versions["facts"] == versions["facts"]
