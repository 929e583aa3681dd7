"""A stored stratified sample maintained from a delta equals a fresh draw on the new version."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from advisor.warehouse.catalog import Catalog
from advisor.estimation.size_estimates import get_sample
from advisor.warehouse.store import Store
from estimators.sampling.sample_delta import maintain
from estimators.sampling.reservoir_spark import stratified_sample

THETA, SEED = 0.1, 3


@pytest.fixture()
def cat(spark, tmp_path):
    rng = np.random.default_rng(0)
    # strata of very different sizes: 400, 120, 30, 7, 1 rows
    g = np.repeat(["a", "b", "c", "d", "e"], [400, 120, 30, 7, 1])
    df = pd.DataFrame({"g": g, "h": rng.integers(0, 2, len(g)), "v": rng.normal(size=len(g))})
    c = Catalog(spark, Store(tmp_path / "wh"))
    c.create_table("t", spark.createDataFrame(df), "test")
    return c


def _apply(spark, cat, inserts: list[tuple], delete_rids: list[int]):
    ins = spark.createDataFrame(pd.DataFrame(inserts, columns=["g", "h", "v"])) if inserts else None
    dels = spark.createDataFrame(pd.DataFrame({"_rid": delete_rids})) if delete_rids else None
    return cat.apply_frames("t", ins, dels).version


def _sampled(df) -> pd.DataFrame:
    """The sampled rows (not the reserve) in a canonical order: row id, stratum size, stratum."""
    pdf = df.filter("_in").select("_rid", "_n_g", "_stratum").toPandas()
    return pdf.sort_values("_rid").reset_index(drop=True)


def _fresh(cat, version: int, strata: list):
    return stratified_sample(cat.read("t", version, with_rid=True), strata, THETA, SEED, id_col="_rid",
                             reserve=True).df


def _sampled_rids(df, stratum: str) -> list[int]:
    return [r["_rid"] for r in df.filter("_in").filter(df["_stratum"] == stratum).select("_rid").collect()]


def _stored(df, path) -> tuple:
    df.write.mode("overwrite").parquet(str(path))
    return str(path), df.sparkSession.read.parquet(str(path))


@pytest.mark.parametrize("strata", [["g"], ["g", "h"]])
def test_maintained_sample_equals_a_fresh_draw(spark, cat, strata, tmp_path):
    old_path, old = _stored(_fresh(cat, 1, strata), tmp_path / "old")
    old_a = _sampled_rids(old, '{"g":"a"}') if strata == ["g"] else []
    rids = [r["_rid"] for r in cat.read("t", 1, with_rid=True).select("_rid").collect()]
    # deletes hit sampled rows of the big stratum and the whole one-row stratum; inserts grow a
    # small stratum past a quota step and open a new stratum
    gone = old_a[:3] + [r for r in rids if r not in old_a][:25]
    e_rid = [r["_rid"] for r in cat.read("t", 1, with_rid=True).filter("g = 'e'").collect()]
    v2 = _apply(spark, cat, [("d", 0, 1.0)] * 9 + [("f", 1, 2.0)] * 12 + [("a", 1, 0.5)] * 40, sorted(set(gone + e_rid)))
    ins, dels = cat.delta("t", 1, v2)
    counts = maintain(spark, old_path, ins, dels, strata, THETA, SEED, str(tmp_path / "new"))
    assert counts is not None
    got = _sampled(spark.read.parquet(str(tmp_path / "new")))
    want = _sampled(_fresh(cat, v2, strata))
    assert len(want) > 0
    pd.testing.assert_frame_equal(got, want)
    assert counts == (cat.version("t", v2).rows, want["_stratum"].nunique(), len(want))
    assert not (got["_stratum"] == '{"g":"e"}').any()  # the emptied stratum is gone


def test_a_stratum_whose_reserve_is_used_up_needs_a_fresh_draw(spark, cat, tmp_path):
    old_path, old = _stored(_fresh(cat, 1, ["g"]), tmp_path / "old")
    stored_a = [r["_rid"] for r in old.filter(old["_stratum"] == '{"g":"a"}').collect()]
    v2 = _apply(spark, cat, [], stored_a)  # every stored row of stratum a is deleted
    ins, dels = cat.delta("t", 1, v2)
    assert maintain(spark, old_path, ins, dels, ["g"], THETA, SEED, str(tmp_path / "new")) is None


def test_get_sample_maintains_across_batches_and_stays_equal_to_a_fresh_draw(spark, cat):
    s1 = get_sample(cat, "t", ["g"], THETA, SEED, 1)
    assert not s1.cached and s1.meta["reserve"] and "maintained_from" not in s1.meta
    rng = np.random.default_rng(7)
    version, maintained = 1, 0
    for step in range(3):
        rids = [r["_rid"] for r in cat.read("t", version, with_rid=True).select("_rid").collect()]
        gone = [int(x) for x in rng.choice(rids, 6, replace=False)]
        adds = [(str(rng.choice(list("abcd"))), int(rng.integers(0, 2)), float(rng.normal())) for _ in range(8)]
        version = _apply(spark, cat, adds, gone)
        s = get_sample(cat, "t", ["g"], THETA, SEED, version)
        maintained += s.meta.get("maintained_from") == version - 1
        got = _sampled(spark.read.parquet(s.path))
        pd.testing.assert_frame_equal(got, _sampled(_fresh(cat, version, ["g"])))
        assert s.meta["sample_size"] == len(got)
        assert s.meta["population"] == cat.version("t", version).rows
    assert maintained >= 2  # the reserve carried the sample through (not redrawn every time)
    left = cat.store.query("SELECT table_version FROM samples WHERE table_name='t'")
    assert [r["table_version"] for r in left] == [version]  # older samples of the key are removed
