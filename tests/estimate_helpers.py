"""Shared pieces of the estimator tests: a small grouped table for those that run
``advisor.estimation.size_estimates`` end to end, and for the pure ones a stratified sample on the
group key and a sketch size estimated as ``advisor.estimation`` estimates it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from advisor.context import Context
from estimators.aggregates import estimate_groups
from estimators.having import pass_matrix
from estimators.shrinkage import shrink_groups
from estimators.sketch_size import size_for_having


def grouped_table_context(spark, root, seed: int, n: int, groups: int, keys: int) -> Context:
    """A context over table ``t(g INT, k, v)``: ``groups`` values of g, ``keys`` of k, gamma v."""
    rng = np.random.default_rng(seed)
    pdf = pd.DataFrame({"g": rng.integers(0, groups, n), "k": rng.integers(0, keys, n),
                        "v": np.round(rng.gamma(2.0, 10.0, n), 2)})
    c = Context(root, spark=spark)
    c.catalog.create_table("t", spark.createDataFrame(pdf).selectExpr("CAST(g AS INT) AS g", "k", "v"), "test")
    return c


def stratified_sample(t: pd.DataFrame, theta: float, seed: int) -> pd.DataFrame:
    """A sample of ``t`` stratified on its group key ``g`` at ``theta`` (at least one row per group,
    as ``estimators.sampling`` draws it), with the stratum and its size."""
    rng = np.random.default_rng(seed)
    N = t.groupby("g")["g"].transform("size").to_numpy()
    rank = pd.Series(rng.random(len(t))).groupby(t["g"].to_numpy()).rank(method="first").to_numpy()
    keep = rank <= np.maximum(1, np.ceil(theta * N))
    s = t[keep].copy()
    s["_n_g"] = N[keep]
    s["_stratum"] = s["g"]
    return s.reset_index(drop=True)


def shrunk_size(sample: pd.DataFrame, agg: tuple, having, fsizes: np.ndarray, seed: int, determined: bool = True):
    """The sketch size on ``frag`` as ``advisor.estimation`` estimates it: bootstrap, empirical-Bayes
    shrinkage, the unshrunk model's replicates for the interval's hull."""
    est = estimate_groups(sample, ["g"], [agg], B=50, seed=seed)
    est.unshrunk = dataclasses.replace(est, frame=est.frame.copy(),
                                       replicates={k: v.copy() for k, v in est.replicates.items()})
    shrink_groups(est, sample, ["g"], aligned=True)
    return size_for_having(sample, est, having, fsizes, determined=determined, seed=seed,
                           model_replicates=pass_matrix(est.unshrunk, having))
