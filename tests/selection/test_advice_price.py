"""Estimation priced in the cache state it will have: after a first sampled advice on a table, a
second template sharing its sample and partitions is charged only the measured estimation (no draw,
no partition build), and a no-go before sampling is revisited once advice measured since may have
lowered that price (``Calibration.sampled_rows``, ``decision_memory.skip``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from advisor.calibration.measured_costs import calibrate
from advisor.context import Context
from advisor.selection.cost_model import CostParams
from advisor.selection.decision_memory import recall, remember, skip
from advisor.selection.recommend import recommend

FIRST = "SELECT g, sum(v) AS s FROM t GROUP BY g HAVING sum(v) > 900"
SECOND = "SELECT g, count(*) AS n FROM t GROUP BY g HAVING count(*) > 45"


@pytest.fixture(scope="module")
def ctx(spark, tmp_path_factory):
    rng = np.random.default_rng(3)
    g = rng.integers(0, 400, 30_000)
    pdf = pd.DataFrame({"g": g.astype("int64"), "v": rng.integers(0, 40, g.size).astype("int64")})
    c = Context(tmp_path_factory.mktemp("price") / "wh", spark=spark)
    c.catalog.create_table("t", spark.createDataFrame(pdf))
    return c


def test_a_second_template_is_priced_from_the_cached_sample_and_a_no_go_is_revisited(ctx):
    params = CostParams(prior_reuses=10)
    # a template declined before sampling, remembered for 5 instances
    remember(ctx.store, "declined template", "CB-OPT-GB", go=False, horizon=5.0,
             reason="no-go before sampling: even a sketch that skips every row would save at most 1.00 scans")
    assert skip(ctx.store, recall(ctx.store, "declined template", "CB-OPT-GB"))  # nothing measured since

    first = recommend(ctx, FIRST, "CB-OPT-GB", params=params)
    assert first["sample_cached"] is False and first["partitions_missing"] >= 1 and "sampling" in first["seconds"]
    # advice measured since the no-go: it is decided again (before sampling, at the new price)
    assert not skip(ctx.store, recall(ctx.store, "declined template", "CB-OPT-GB"))

    s = first["seconds"]
    cal = calibrate(ctx.store)
    whole = cal.advice_rows()
    assert whole == pytest.approx(cal.rows(s["total"]), rel=1e-6)
    estimation_only = cal.rows(s["total"] - s["planning"] - s["sampling"] - s["partitions"])
    assert cal.sampled_rows(True, 0, first["table_rows"]) == pytest.approx(estimation_only, rel=1e-6)

    second = recommend(ctx, SECOND, "CB-OPT-GB", params=params)
    assert second["sample_cached"] is True and second["partitions_missing"] == 0
    assert second["advice_priced_rows"] == pytest.approx(estimation_only, rel=1e-6)
    assert second["advice_priced_rows"] < 0.9 * whole, (second["advice_priced_rows"], whole)
