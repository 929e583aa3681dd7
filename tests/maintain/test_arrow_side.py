"""Join sides read on the driver (``advisor.maintain.arrow_side``) hold exactly the rows the Spark
side reads: every column, multiplicity and fragment set, before and after a batch, on the own store
and on a Delta table, for key sets drawn by hypothesis; and sketches maintained with them equal
recaptures when both tables of a join change."""

from __future__ import annotations

import datetime as dt
import decimal
import math

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.maintain.arrow_side import arrow_rows, single_scan
from advisor.maintain.base_side import NEW, OLD, KeyFilter, to_annotated
from advisor.maintain.frames import M, fcol
from advisor.maintain.spark.service import maintain_sketch
from advisor.maintain.spark.spark_side import SparkBase
from advisor.partition.range_partition import build_partition
from advisor.plan import ir
from advisor.plan.parse import parse_sql
from advisor.sketch.capture import capture, capture_batch
from advisor.warehouse.catalog import Catalog
from advisor.warehouse.imports import import_table
from advisor.warehouse.sketch_records import load_sketch
from advisor.warehouse.store import Store
from workloads.data.update_batches import batch_frames

from diffgen import make_dims, make_facts

SIDE_QUERIES = [
    "SELECT f.k, f.v, f.m, f.d, f.g2, f.w FROM facts f JOIN dims dm ON f.g1 = dm.g1 WHERE f.w > -3",
    "SELECT dm.region, sum(f.v) AS s FROM facts f JOIN dims dm ON f.g1 = dm.g1 GROUP BY dm.region",
]


def _canon(v):
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, (decimal.Decimal, float)):
        return float(format(float(v), ".9g"))
    if isinstance(v, (dt.date, pd.Timestamp)):
        return pd.Timestamp(v).date().isoformat()
    if isinstance(v, frozenset):
        return tuple(sorted(v))
    return v.item() if hasattr(v, "item") else v


def _rows(df: pd.DataFrame, cols: list[str]) -> list[tuple]:
    return sorted((tuple(_canon(x) for x in r) for r in zip(*(df[c].tolist() for c in cols))), key=repr)


def _sides(cat, sql: str):
    """(node, key column, sketched) for each input of each join of ``sql``, the facts scan sketched on g1."""
    q = parse_sql(sql, lambda t: cat.schema(t))
    part = build_partition(cat, "facts", "g1", 6)
    out = []
    for j in (n for n in q.root.walk() if isinstance(n, ir.Join)):
        for side in (j.left, j.right):
            scan = single_scan(side)
            key = next(c.name for c in scan.cols if c.source == "g1")
            facts = next(s for s in q.root.walk() if isinstance(s, ir.Scan) and s.table == "facts")
            g1 = next(c.name for c in facts.cols if c.source == "g1")
            out.append((side, key, {facts.scan_id: (g1, part)}))
    return out


def _compare(cat, old: dict, new: dict, keys: list[int]) -> int:
    checked = 0
    for sql in SIDE_QUERIES:
        for node, key, sketched in _sides(cat, sql):
            base = SparkBase(cat, sketched, old, new)
            base.arrow = False
            kf = KeyFilter((key,), frozenset((k,) for k in keys)) if keys else None  # None: the whole side
            for version, vers in ((OLD, old), (NEW, new)):
                got = arrow_rows(cat, node, vers, sketched, kf)
                assert got is not None, (sql, key)
                want = to_annotated(base.rows(node, version, kf), node, sketched)
                got = to_annotated(got, node, sketched)
                cols = node.names + [M] + [fcol(s) for s in sketched if fcol(s) in want.columns]
                assert _rows(got, cols) == _rows(want, cols), (sql, version, keys)
                checked += 1
    return checked


@pytest.fixture(scope="module")
def own(spark, tmp_path_factory):
    c = Catalog(spark, Store(tmp_path_factory.mktemp("arrow_own")))
    c.create_table("facts", spark.createDataFrame(make_facts(7, 400)))
    c.create_table("dims", spark.createDataFrame(make_dims()))
    ins, dels = batch_frames(c, "facts", 40, 25, 3)
    c.apply_frames("facts", ins, dels)
    ins, dels = batch_frames(c, "dims", 2, 3, 4)
    c.apply_frames("dims", ins, dels)
    return c


@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(keys=st.lists(st.integers(-2, 14), max_size=6, unique=True))
def test_driver_side_equals_spark_side_on_the_own_store(own, keys):
    versions = {t: own.current_version(t) for t in ("facts", "dims")}
    old = {t: v - 1 for t, v in versions.items()}
    assert _compare(own, old, versions, keys) == 2 * 2 * len(SIDE_QUERIES)


def test_driver_side_equals_spark_side_on_delta(spark, tmp_path):
    d = tmp_path / "facts_delta"
    spark.createDataFrame(make_facts(9, 300)).write.format("delta").option(
        "delta.enableChangeDataFeed", "true").option("delta.enableDeletionVectors", "true").save(str(d))
    spark.sql(f"DELETE FROM delta.`{d}` WHERE k % 7 = 2")
    spark.sql(f"UPDATE delta.`{d}` SET v = v + 1 WHERE k % 5 = 1")
    cat = Catalog(spark, Store(tmp_path / "wh"))
    import_table(cat, "facts", str(d), "delta", key=["k"], as_of=1)
    cat.create_table("dims", spark.createDataFrame(make_dims()))
    dims = cat.current_version("dims")
    for keys in ([0, 1, 2], [3, 11, 40], [5], []):
        assert _compare(cat, {"facts": 1, "dims": dims}, {"facts": 2, "dims": dims}, keys) == 2 * 2 * len(SIDE_QUERIES)


def test_join_sketch_maintained_with_driver_sides_equals_recapture_when_both_tables_change(spark, tmp_path):
    cat = Catalog(spark, Store(tmp_path / "wh"))
    cat.create_table("facts", spark.createDataFrame(make_facts(11, 500)))
    cat.create_table("dims", spark.createDataFrame(make_dims()))
    sql = ("SELECT f.g1, sum(f.v) AS s FROM facts f JOIN dims dm ON f.g1 = dm.g1 WHERE dm.weight < 4 "
           "GROUP BY f.g1 HAVING sum(f.v) > 900")
    q = parse_sql(sql, lambda t: cat.schema(t))
    parts = {"facts": build_partition(cat, "facts", "g1", 6)}
    sk = capture(cat, q, {"facts": "g1"}, 6, check=False, partitions=parts).sketch
    for seed in range(3):
        for t, n_ins, n_del in (("facts", 30, 20), ("dims", 1, 1)):
            ins, dels = batch_frames(cat, t, n_ins, n_del, 100 + seed)
            cat.apply_frames(t, ins, dels)
        res = maintain_sketch(cat, sk.id, buy=True)
        sk = load_sketch(cat.store, res.new_id)
        v = {t: cat.current_version(t) for t in ("facts", "dims")}
        (fresh,), _ = capture_batch(cat, [(q, {"facts": "g1"}, parts)], v)
        assert res.how == "incremental" and sk.parts[0].fragments == fresh.parts[0].fragments
