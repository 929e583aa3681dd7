"""Net deltas: batch runs folded into one insert and one delete file must read exactly the rows the
batches read one by one, in the same Spark types, and open fewer files."""

import datetime as dt
import decimal
import random
from pathlib import Path

import pandas as pd
import pytest

from advisor.engine.scan_metrics import collect_scan_metrics
from advisor.warehouse import net_delta as netdelta
from advisor.warehouse.catalog import Catalog
from advisor.warehouse.store import Store


@pytest.mark.parametrize("start,end,expected", [
    (1, 41, [(1, 33), (33, 41)]),
    (0, 7, [(0, 4), (4, 6), (6, 7)]),
    (5, 6, [(5, 6)]),
    (3, 3, []),
    (2, 18, [(2, 18)]),
])
def test_blocks_are_aligned_powers_of_two_largest_first(start, end, expected):
    assert netdelta.blocks(start, end) == expected


def test_blocks_cover_every_version_once_and_are_reused_as_versions_grow():
    seen = set()
    for end in range(1, 200):
        bs = netdelta.blocks(0, end)
        covered = [v for lo, hi in bs for v in range(lo + 1, hi + 1)]
        assert covered == list(range(1, end + 1))
        assert len(bs) == bin(end).count("1")          # one block per set bit
        seen.update(bs)
    # every block is a power of two long and aligned to its length: a binary counter's blocks
    assert all((hi - lo) & (hi - lo - 1) == 0 and lo % (hi - lo) == 0 for lo, hi in seen)
    assert len(seen) < 200 * 2                          # n log n blocks would be ~1,500


def _reference(cat, name, version):
    """The snapshot read batch by batch, without net blocks (each batch's own files)."""
    spark = cat.spark
    vs = [x for x in cat.versions(name) if x.version <= version]
    base = max((x for x in vs if x.kind == "base"), key=lambda x: x.version)
    df = spark.read.parquet(base.base_path)
    for b in vs:
        if b.version <= base.version:
            continue
        if b.ins_path:
            df = df.unionByName(spark.read.parquet(b.ins_path).select(*df.columns))
        if b.del_path:
            df = df.join(spark.read.parquet(b.del_path).select("_rid"), on="_rid", how="left_anti")
    return df


def _rows(df):
    return sorted(tuple(r) for r in df.collect())


@pytest.fixture()
def typed(spark, tmp_path):
    c = Catalog(spark, Store(tmp_path / "wh"))
    n = 60
    pdf = pd.DataFrame({
        "k": list(range(n)),
        "amount": [decimal.Decimal(i) / 4 for i in range(n)],
        "day": [dt.date(2020, 1, 1) + dt.timedelta(days=i) for i in range(n)],
        "at": [dt.datetime(2021, 3, 1, 12, 0) + dt.timedelta(minutes=7 * i) for i in range(n)],
        "s": [None if i % 9 == 0 else f"v{i % 5}" for i in range(n)],
    })
    df = spark.createDataFrame(pdf, "k long, amount decimal(15,2), day date, at timestamp, s string")
    c.create_table("t", df, "test")
    return c


def test_net_blocks_read_the_same_rows_and_types_as_the_batches(spark, typed):
    rng = random.Random(7)
    cat = typed
    key = 1000
    for b in range(11):
        live = [r["_rid"] for r in cat.read("t", with_rid=True).select("_rid").collect()]
        dels = rng.sample(live, 3)          # base rows and rows inserted by earlier batches
        ins = pd.DataFrame({
            "k": list(range(key, key + 4)),
            "amount": [decimal.Decimal(rng.randint(0, 999)) / 100 for _ in range(4)],
            "day": [dt.date(2022, 5, 1) + dt.timedelta(days=rng.randint(0, 90)) for _ in range(4)],
            "at": [dt.datetime(2022, 5, 1, 8, 30, 15) + dt.timedelta(seconds=rng.randint(0, 10**6)) for _ in range(4)],
            "s": [rng.choice([None, "a", "b"]) for _ in range(4)],
        })
        key += 4
        ins_df = spark.createDataFrame(ins, "k long, amount decimal(15,2), day date, at timestamp, s string")
        cat.apply_frames("t", ins_df, spark.createDataFrame([(r,) for r in dels], "_rid long"))
    for v in range(1, cat.current_version("t") + 1):
        got = cat.read("t", v, with_rid=True)
        ref = _reference(cat, "t", v)
        assert got.schema.simpleString() == ref.schema.simpleString()
        assert _rows(got) == _rows(ref.select(*got.columns))
    # versions 1..12: (1, 9] and (9, 12] are net blocks of 8 and 2 batches plus one single batch
    stored = {(r["from_version"], r["to_version"]) for r in cat.store.query("SELECT * FROM net_deltas")}
    assert {(1, 9), (9, 11)} <= stored
    assert cat.read("t").count() == 60 + 11 * 4 - 11 * 3


def test_a_deleted_insert_nets_out_and_fewer_files_are_opened(spark, tmp_path):
    cat = Catalog(spark, Store(tmp_path / "wh"))
    cat.create_table("t", spark.createDataFrame(pd.DataFrame({"k": range(20), "g": [i % 3 for i in range(20)]})), "test")
    for i in range(8):
        cat.apply_frames("t", spark.createDataFrame(pd.DataFrame({"k": [100 + i], "g": [i % 3]})), None)
    doomed = cat.read("t", with_rid=True).filter("k = 103").first()["_rid"]
    cat.apply_frames("t", None, spark.createDataFrame([(doomed,)], "_rid long"))   # version 10
    ins, dels = netdelta.delta_files(cat, "t", 1, [x for x in cat.versions("t") if x.kind == "batch"])
    # (1, 9] is one net block: 8 inserts in one file; batch 10 deletes one of them, read as its own
    assert len(ins) == 1 and len(dels) == 1
    df = cat.read("t")
    assert sorted(r["k"] for r in df.collect()) == list(range(20)) + [100, 101, 102, 104, 105, 106, 107]
    m = collect_scan_metrics(df)
    assert m.files_read <= len(list(Path(cat.version("t", 1).base_path).glob("*.parquet"))) + 3
    # a read at version 9 uses the same block, and a block of inserts with none deleted has no delete file
    r = cat.store.one("SELECT n_ins, n_del, del_path FROM net_deltas WHERE from_version=1 AND to_version=9")
    assert (r["n_ins"], r["n_del"], r["del_path"]) == (8, 0, None)
    assert cat.read("t", 9).count() == 28
    cat.drop("t")                                        # dropping the table forgets its blocks
    assert cat.store.query("SELECT * FROM net_deltas WHERE table_name='t'") == []
