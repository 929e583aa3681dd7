"""`reports.draws`: a random strategy listed as several draws is summed up as one expectation
(pure; no Spark), in the run summary, the `advisor replay` table and the report."""

from __future__ import annotations

import pytest

from reports.draws import draw_means, draw_of
from workloads.replay.run_summary import summarize


def test_draw_of_names_the_base_and_the_draw():
    assert draw_of("RAND-GB@3") == ("RAND-GB", 3)
    assert draw_of("RAND-GB") == ("RAND-GB", 0)
    assert draw_of("CB-OPT-GB") == ("CB-OPT-GB", 0)
    assert draw_of("RAND-GB@x") == ("RAND-GB@x", 0)


def test_draws_are_averaged_in_draw_order_and_single_strategies_are_left_alone():
    per = {"NO-PS": {"vs_no_ps": 1.0, "cumulative_seconds": 100.0, "rows_read": 1000},
           "RAND-GB@2": {"vs_no_ps": 0.7, "cumulative_seconds": 70.0, "rows_read": 700},
           "RAND-PK": {"vs_no_ps": 1.1, "cumulative_seconds": 110.0, "rows_read": 990},
           "RAND-GB": {"vs_no_ps": 0.4, "cumulative_seconds": 40.0, "rows_read": 200},
           "RAND-GB@1": {"vs_no_ps": 0.7, "cumulative_seconds": 70.0, "rows_read": 600}}
    d = draw_means(per)
    assert list(d) == ["RAND-GB"]
    g = d["RAND-GB"]
    assert g["draws"] == ["RAND-GB", "RAND-GB@1", "RAND-GB@2"]
    assert g["mean_vs_no_ps"] == pytest.approx(0.6) and g["min_vs_no_ps"] == 0.4 and g["max_vs_no_ps"] == 0.7
    assert g["mean_cumulative_seconds"] == pytest.approx(60.0) and g["mean_rows_read"] == 500


def test_a_draw_without_a_ratio_is_left_out_of_the_ratios_only():
    per = {"RAND-PK@1": {"vs_no_ps": None, "cumulative_seconds": 10.0, "rows_read": 10},
           "RAND-PK": {"vs_no_ps": 0.5, "cumulative_seconds": 30.0, "rows_read": 30}}
    g = draw_means(per)["RAND-PK"]
    assert g["mean_vs_no_ps"] == 0.5 == g["min_vs_no_ps"] == g["max_vs_no_ps"]
    assert g["mean_cumulative_seconds"] == 20.0 and g["mean_rows_read"] == 20
    assert draw_means({"A@1": {"vs_no_ps": None, "cumulative_seconds": 1, "rows_read": 1},
                       "A@2": {"vs_no_ps": None, "cumulative_seconds": 3, "rows_read": 1}})["A"]["mean_vs_no_ps"] is None


def test_the_run_summary_carries_the_draws():
    def rec(strategy, step, total, rows):
        return {"strategy": strategy, "step": step, "selectivity": {"real": None}, "decision": {"action": "plain"},
                "seconds": {"total": total, "query": total}, "scan": {"rows": rows, "bytes": 1, "files": 1},
                "result": {"digest": "d"}}

    strategies = ["NO-PS", "RAND-GB", "RAND-GB@1"]
    qs = [rec("NO-PS", 0, 4.0, 100), rec("NO-PS", 1, 4.0, 100),
          rec("RAND-GB", 0, 1.0, 10), rec("RAND-GB", 1, 1.0, 10),
          rec("RAND-GB@1", 0, 3.0, 50), rec("RAND-GB@1", 1, 3.0, 70)]
    sm = summarize(strategies, qs, [], None)
    g = sm["draws"]["RAND-GB"]
    assert g["draws"] == ["RAND-GB", "RAND-GB@1"]
    assert g["mean_vs_no_ps"] == pytest.approx((2 / 8 + 6 / 8) / 2)
    assert g["min_vs_no_ps"] == 0.25 and g["max_vs_no_ps"] == 0.75 and g["mean_rows_read"] == 70
    assert summarize(["NO-PS", "RAND-GB"], qs[:4], [], None)["draws"] == {}
