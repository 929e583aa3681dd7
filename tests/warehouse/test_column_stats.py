"""Column statistics per table version: a version reached by small batches derives its bounds from
the previous version's plus the inserted rows (a superset of the true domain), a big change or a new
base recomputes them."""

from __future__ import annotations

import datetime as dt

import pandas as pd

from advisor.warehouse.catalog import Catalog
from advisor.warehouse.column_stats import column_stats
from advisor.warehouse.store import Store


def _frame(lo: int, n: int) -> pd.DataFrame:
    return pd.DataFrame({"k": range(lo, lo + n), "d": [dt.date(2020, 1, 1) + dt.timedelta(days=i % 30) for i in range(n)],
                         "s": [f"v{i % 7}" for i in range(n)]})


def test_small_batches_widen_old_bounds(spark, tmp_path):
    cat = Catalog(spark, Store(tmp_path))
    cat.create_table("t", spark.createDataFrame(_frame(100, 200)))
    v1 = column_stats(cat, "t")
    assert v1["k"][:2] == (100, 299) and v1["d"][:2] == (dt.date(2020, 1, 1), dt.date(2020, 1, 30))
    # insert one row beyond both ends of k and d; delete the row holding k's minimum
    ins = spark.createDataFrame(pd.DataFrame({"k": [5000], "d": [dt.date(2021, 6, 1)], "s": ["zz"]}))
    dels = cat.read("t", with_rid=True).filter("k = 100").select("_rid")
    v2 = cat.apply_frames("t", ins, dels).version
    got = column_stats(cat, "t", v2)
    assert got["k"][:2] == (100, 5000)          # old minimum kept: a superset of the true [101, 5000]
    assert got["d"][1] == dt.date(2021, 6, 1) and got["s"][1] == "zz"
    assert got["k"][2] == v1["k"][2]              # NDV carried over
    # cached under the new version
    rows = cat.store.query("SELECT col FROM colstats WHERE table_name='t' AND version=?", (v2,))
    assert {r["col"] for r in rows} == set(got)


def test_large_change_recomputes_exactly(spark, tmp_path):
    cat = Catalog(spark, Store(tmp_path))
    cat.create_table("t", spark.createDataFrame(_frame(100, 50)))
    column_stats(cat, "t")
    dels = cat.read("t", with_rid=True).filter("k < 120").select("_rid")   # 40% of the rows
    v2 = cat.apply_frames("t", None, dels).version
    assert column_stats(cat, "t", v2)["k"][:2] == (120, 149)
