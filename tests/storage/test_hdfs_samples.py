"""Samples of a table whose warehouse is on HDFS: drawn by Spark, widened, maintained across
batches and read back by the driver's estimators through HDFS, never from the driver's disk; the
maintained sample equals a fresh draw row for row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from advisor.estimation.sample_eval import local_rows
from advisor.estimation.sample_store import get_sample
from advisor.warehouse.catalog import Catalog
from advisor.warehouse.store import Store
from estimators.sampling.reservoir_spark import stratified_sample

pytestmark = pytest.mark.storage

THETA, SEED = 0.1, 3


def _sampled(df) -> pd.DataFrame:
    pdf = df.filter("_in").select("_rid", "_n_g", "_stratum").toPandas()
    return pdf.sort_values("_rid").reset_index(drop=True)


def test_a_sample_on_hdfs_is_drawn_widened_maintained_and_read_through_hdfs(spark, hdfs, tmp_path):
    rng = np.random.default_rng(0)
    g = np.repeat(["a", "b", "c", "d"], [500, 150, 40, 9])
    cat = Catalog(spark, Store(f"{hdfs}/samples-warehouse", local_dir=tmp_path / "store"))
    cat.create_table("t", spark.createDataFrame(pd.DataFrame({"g": g, "h": rng.integers(0, 2, len(g)),
                                                             "v": rng.normal(size=len(g))})), "test")
    s = get_sample(cat, "t", ["g"], THETA, SEED, 1, columns=["g"])
    assert s.path.startswith(f"{hdfs}/samples-warehouse/tables/t/samples/") and s.meta["drawn_on"] == "spark"
    assert "v" not in spark.read.parquet(s.path).columns
    wide = get_sample(cat, "t", ["g"], THETA, SEED, 1, columns=["g", "v"])  # rewritten on HDFS with v
    assert wide.cached and wide.path == s.path and "v" in spark.read.parquet(s.path).columns
    version, maintained = 1, 0
    for _ in range(3):
        rids = [r["_rid"] for r in cat.read("t", version, with_rid=True).select("_rid").collect()]
        gone = [int(x) for x in rng.choice(rids, 6, replace=False)]
        adds = pd.DataFrame({"g": rng.choice(list("abcd"), 8), "h": rng.integers(0, 2, 8), "v": rng.normal(size=8)})
        version = cat.apply_frames("t", spark.createDataFrame(adds),
                                   spark.createDataFrame(pd.DataFrame({"_rid": gone}))).version
        s = get_sample(cat, "t", ["g"], THETA, SEED, version, columns=["g", "v"])
        maintained += s.meta.get("maintained_from") == version - 1
        fresh = stratified_sample(cat.read("t", version, with_rid=True), ["g"], THETA, SEED, id_col="_rid",
                                  reserve=True).df
        want = _sampled(fresh)
        pd.testing.assert_frame_equal(_sampled(spark.read.parquet(s.path)), want)
        # the estimators' reader: the sampled rows, through HDFS
        rows = local_rows(s.path, ["g", "v"])
        assert sorted(rows["_rid"].astype(int)) == want["_rid"].astype(int).tolist()
    assert maintained >= 2  # maintained from the delta (read and written through HDFS), not redrawn
    assert not [p for p in tmp_path.rglob("*") if p.suffix == ".parquet" or p.name.startswith("part-")]
