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
from advisor.selection.cost_model import ADVICE_PRIOR_SCANS, CostParams
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


def _logged_sampled_advice(store, seconds: float) -> None:
    """A sampled recommendation as the calibration reads it: a draw and an estimation of ``seconds`` each."""
    store.log_run("recommend", None, {"seconds": {"total": 2 * seconds, "sampling": seconds, "planning": 0.0},
                                      "sample": {"cached": False}, "captured": {}})


def test_a_run_is_sized_by_its_capture_job_when_sampling_measured_dearer(spark, tmp_path):
    """Where sampling and estimating were measured at many scans of the table, a query that runs
    anyway is sized exactly by the capture job that answers it; a what-if (no answer wanted) and a
    store where sampling was measured cheap still sample."""
    rng = np.random.default_rng(4)
    g = rng.integers(0, 400, 30_000)
    pdf = pd.DataFrame({"g": g.astype("int64"), "v": rng.integers(0, 40, g.size).astype("int64")})
    c = Context(tmp_path / "wh", spark=spark)
    c.catalog.create_table("t", spark.createDataFrame(pdf))
    params = CostParams(prior_reuses=10)
    _logged_sampled_advice(c.store, 60.0)  # a minute to draw, another to estimate: hundreds of scans here
    answer: list = []
    run = recommend(c, FIRST, "CB-OPT-GB", params=params, answer=answer)
    assert run["exact"] is True and "sampling" not in run["seconds"] and len(answer) == 1
    assert "sized exactly by its capture job" in run["decision"]["reason"], run["decision"]["reason"]
    c.catalog.read("t").createOrReplaceTempView("t_plain")
    plain = sorted(tuple(r) for r in spark.sql(FIRST.replace("FROM t", "FROM t_plain")).collect())
    assert sorted(tuple(r) for r in answer[0].rows) == plain and len(plain) > 0
    what_if = recommend(c, SECOND, "CB-OPT-GB", params=params)  # priced with the dear sampling: declined
    assert what_if["exact"] is False and "sizing" not in what_if and what_if["cannot_pay"], what_if["reason"]


def test_a_run_samples_where_sampling_was_measured_cheap(ctx):
    _logged_sampled_advice(ctx.store, 1e-4)
    rec = recommend(ctx, "SELECT g, max(v) AS m FROM t GROUP BY g HAVING max(v) > 38", "CB-OPT-GB",
                    params=CostParams(prior_reuses=10), answer=[])
    assert rec["exact"] is False and "sizing" not in rec and "sampling" in rec["seconds"]


def test_before_any_measurement_a_run_is_sized_by_its_capture_job_at_the_prior(spark, tmp_path):
    """In a fresh store sampling is priced at its prior (``ADVICE_PRIOR_SCANS`` passes over the
    table), above what the capture job answering the query reads beyond a plain run: the run is
    sized exactly.  An explicit ``recommend`` (sampling not charged) still samples."""
    rng = np.random.default_rng(5)
    g = rng.integers(0, 400, 30_000)
    pdf = pd.DataFrame({"g": g.astype("int64"), "v": rng.integers(0, 40, g.size).astype("int64")})
    c = Context(tmp_path / "wh", spark=spark)
    c.catalog.create_table("t", spark.createDataFrame(pdf))
    answer: list = []
    run = recommend(c, FIRST, "CB-OPT-GB", params=CostParams(prior_reuses=10, advice_prior_scans=ADVICE_PRIOR_SCANS),
                    answer=answer)
    assert run["exact"] is True and "sampling" not in run["seconds"] and len(answer) == 1
    assert f"against ~{ADVICE_PRIOR_SCANS:.2f} scans to sample" in run["decision"]["reason"], run["decision"]["reason"]
    asked = recommend(c, SECOND, "CB-OPT-GB", params=CostParams(prior_reuses=10), answer=[])
    assert asked["exact"] is False and "sampling" in asked["seconds"]
