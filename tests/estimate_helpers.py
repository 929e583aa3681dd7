"""A small grouped table for the estimator tests that run ``advisor.estimation.size_estimates`` end to end."""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.context import Context


def grouped_table_context(spark, root, seed: int, n: int, groups: int, keys: int) -> Context:
    """A context over table ``t(g INT, k, v)``: ``groups`` values of g, ``keys`` of k, gamma v."""
    rng = np.random.default_rng(seed)
    pdf = pd.DataFrame({"g": rng.integers(0, groups, n), "k": rng.integers(0, keys, n),
                        "v": np.round(rng.gamma(2.0, 10.0, n), 2)})
    c = Context(root, spark=spark)
    c.catalog.create_table("t", spark.createDataFrame(pdf).selectExpr("CAST(g AS INT) AS g", "k", "v"), "test")
    return c
