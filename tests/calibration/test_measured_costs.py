"""Measured-cost calibration and the decisions built on it (pure logic, a real SQLite store)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisor.calibration.measured_costs import PRIOR_FIXED_S, calibrate, fit_line, predicted_seconds, rows_for
from advisor.maintain.policy.catch_up import Evidence, buy_now, decline_reason
from advisor.selection.cost_model import CostParams, UseForecast, cannot_pay, maintenance_per_update
from advisor.warehouse.store import Store


def test_fit_line_recovers_fixed_and_per_row_cost():
    # seconds = 0.4 + 2e-7 * rows, with rows spread 0.1M .. 6M
    pts = [(r, 0.4 + 2e-7 * r) for r in (100_000, 500_000, 1_000_000, 2_000_000, 4_000_000, 6_000_000)]
    a, b, how = fit_line(pts)
    assert a == pytest.approx(0.4, abs=1e-9)
    assert b == pytest.approx(2e-7, rel=1e-9)
    assert how.startswith("fit")


def test_fit_line_without_spread_uses_prior_fixed_cost():
    # every run read the whole table: the intercept cannot be told from the slope
    pts = [(6_000_000, 1.6), (6_000_000, 1.5), (6_000_000, 1.7), (6_001_000, 1.6), (6_002_000, 1.6), (6_000_500, 1.6)]
    a, b, how = fit_line(pts)
    assert a == PRIOR_FIXED_S == 0.0 and "not identifiable" in how
    assert b == pytest.approx(1.6 / 6_000_500, rel=0.01)
    a, b, how = fit_line(pts, prior_fixed=0.3)
    assert a == 0.3 and b == pytest.approx(1.3 / 6_000_500, rel=0.01) and "prior" in how


def test_fit_line_is_not_flattened_by_slow_small_runs():
    # an SF1 replay: plain scans of ~6M rows at 0.8-1.9 s (7.5M for the join), sketched runs reading 65k-1.3M
    # rows at 0.38-6.5 s (long sketch filters); least squares put 1.57 s of fixed cost on every job
    # and ~1e-10 s per row, which priced one capture at 270 scans
    plain = [(6_000_000 + 1_200 * i, s) for i, s in enumerate((1.06, 0.89, 1.39, 1.14, 1.34, 0.95, 0.81, 1.26,
                                                              1.78, 1.44, 0.86, 1.89, 1.00, 1.07))]
    joins = [(7_501_215, 2.90), (7_501_215, 3.76), (7_502_415, 2.63), (7_502_415, 2.57), (7_504_815, 1.64)]
    sketched = [(1_309_066, 6.54), (517_157, 1.09), (517_157, 2.04), (320_223, 1.31), (87_032, 0.45), (65_262, 0.38)]
    a, b, how = fit_line(plain + joins + sketched)
    assert a <= 0.38 and "capped" in how
    assert 0.5 <= a + b * 6_000_000 <= 2.0  # a plain scan is still predicted at about a second


def test_fit_line_before_the_fit_prices_rows_by_the_largest_runs():
    # the demo's first steps: two plain scans, then small sketched runs that are nearly all fixed
    # cost; too few points for a fit, and the median of seconds / rows over all of them was 4.3 s
    # per M rows, which priced one scan of 600k rows at 2.6 s (it took 0.4 s)
    pts = [(750_572, 0.29), (336_776, 0.18), (28_986, 0.18), (43_491, 0.13), (88_201, 0.30)]
    a, b, how = fit_line(pts)
    assert a == 0.0 and "not identifiable" in how
    assert 0.29 / 750_572 <= b <= 0.18 / 336_776


def test_a_store_of_small_sketched_runs_prices_rows_by_its_largest_runs(tmp_path):
    """A replay over TPC-H SF1 and flights: a few plain scans (1.5M orders rows in ~1.2 s, flights'
    337k in ~0.3 s) and many sketched runs of 5k-150k rows at 0.16-0.3 s.  The line's intercept is
    capped at the cheapest run; its per-row cost must come from the scans, not from the sketched runs'
    fixed costs (4.3 s per M rows over all runs), and what a sketched run costs beyond a plain run of
    its rows is measured for the cost model."""
    store = Store(tmp_path / "wh")
    plain = [(1_500_000, 1.2), (1_500_000, 1.3), (800_000, 0.64), (800_000, 0.62), (336_776, 0.28), (336_776, 0.4)]
    for r, s in plain:
        store.log_run("run", "q", {"metrics": {"rows_read": r}, "seconds": s, "template": "p"})
    sketched = [(5_000, 0.17), (10_000, 0.19), (17_000, 0.16), (20_000, 0.22), (82_000, 0.21), (150_000, 0.3),
                (10_000, 0.2), (14_000, 0.22), (53_000, 0.21), (28_000, 0.26), (16_000, 0.23), (21_000, 0.17)]
    for r, s in sketched * 3:
        store.log_run("run", "q", {"metrics": {"rows_read": r}, "seconds": s, "template": "s", "sketch": {"id": 1}})
    cal = calibrate(store)
    assert cal.fixed_s == pytest.approx(0.16)  # the cheapest run
    assert 0.5e-6 <= cal.per_row_s <= 0.9e-6  # (1.2 - 0.16) / 1.5M .. (0.64 - 0.16) / 0.8M
    # a flights scan is predicted within its measured 0.28-0.4 s
    assert 0.28 <= predicted_seconds(cal, 336_776) <= 0.45
    assert 0.02 <= cal.sketched_extra_s <= 0.06  # the residuals' median: 0.2-0.3 s runs of ~20k rows
    # a plain-only store measures no such cost
    only_plain = Store(tmp_path / "plain")
    for r, s in plain:
        only_plain.log_run("run", "q", {"metrics": {"rows_read": r}, "seconds": s, "template": "p"})
    assert calibrate(only_plain).sketched_extra_s == 0.0


def test_a_sketched_runs_own_cost_declines_a_table_whose_scan_is_mostly_fixed_cost():
    """337k flights rows scanned in ~0.25 s, 0.1 s of it the job's fixed cost, and a sketched run
    0.07 s dearer than a plain run of its rows: skipping every row saves ~0.08 s a use, less than
    its share of capture and estimation; the same sketch on a 6M-row table pays."""
    per_row, p = 0.45e-6, CostParams()
    extra = 0.07 / per_row
    for T, pays in ((336_776.0, False), (6_000_000.0, True)):
        w = UseForecast(6, capture_rows=1.3 * T + 0.1 / per_row, extra_rows=extra)
        why = cannot_pay(T, w, p, advice_rows=0.3 / per_row)
        assert (why is None) == pays, why
        if not pays:
            assert "sketched runs own cost" in why
        # without the measured extra the small table seemed to pay
        assert cannot_pay(T, replace(w, extra_rows=0.0), p, advice_rows=0.3 / per_row) is None


def test_fit_line_with_no_runs_is_the_prior():
    a, b, how = fit_line([])
    assert how == "prior" and a == 0.0 and b > 0


def test_calibrate_reads_runs_maintenance_and_advice(tmp_path):
    store = Store(tmp_path / "wh")
    for r in (100_000, 500_000, 1_000_000, 2_000_000, 4_000_000, 6_000_000):
        store.log_run("run", "q", {"metrics": {"rows_read": r}, "seconds": 0.5 + 1e-7 * r, "template": "t"})
    store.log_run("maintain", "q", {"template": "t", "how": "incremental", "seconds": 0.3})
    store.log_run("maintain", "q", {"template": "t", "how": "incremental", "seconds": 0.5})
    store.log_run("maintain", "q", {"template": "t", "how": "recapture", "seconds": 3.0})
    store.log_run("recommend", "q", {"template": "u", "seconds": {"sampling": 5.0, "total": 12.0},
                                     "captured": {"sketch_id": 1, "seconds": 2.0}})
    cal = calibrate(store)
    assert cal.fixed_s == pytest.approx(0.5) and cal.per_row_s == pytest.approx(1e-7)
    assert cal.fixed_rows == pytest.approx(5_000_000)
    assert cal.maint_inc_s == {"t": pytest.approx(0.4)}
    assert cal.recapture_s == {"t": pytest.approx(3.0), "u": pytest.approx(2.0)}
    assert rows_for(cal, cal.recapture_s, "t") == pytest.approx(3.0 / 1e-7)
    assert rows_for(cal, cal.recapture_s, "other") is None  # another template's capture says nothing
    assert predicted_seconds(cal, 1_000_000) == pytest.approx(0.5 + 0.1)
    assert cal.advice_rows() == pytest.approx(10.0 / 1e-7)


def test_a_templates_step_leans_on_the_others_while_it_has_few(tmp_path):
    """``inc_step_s``: the other templates' median step counts as two of the template's own steps."""
    store = Store(tmp_path / "wh")
    assert calibrate(store).inc_step_s("t") is None  # nothing measured anywhere
    for secs in (0.1, 0.1, 0.3):
        store.log_run("maintain", "q", {"template": "u", "how": "incremental", "seconds": secs})
    assert calibrate(store).inc_step_s("t") == pytest.approx(0.1)  # never stepped: the others'
    assert calibrate(store).inc_step_s("u") == pytest.approx(0.1)  # no other template: its own
    store.log_run("maintain", "q", {"template": "t", "how": "incremental", "seconds": 1.2})
    assert calibrate(store).inc_step_s("t") == pytest.approx(0.1)  # one slow step is outvoted
    store.log_run("maintain", "q", {"template": "t", "how": "incremental", "seconds": 0.9})
    assert calibrate(store).inc_step_s("t") == pytest.approx(0.5)  # median(1.2, 0.9, 0.1, 0.1)
    store.log_run("maintain", "q", {"template": "t", "how": "recapture", "seconds": 9.0})
    assert calibrate(store).inc_step_s("t") == pytest.approx(0.5)  # recaptures are not steps
    store.log_run("maintain", "q", {"template": "t", "how": "incremental", "seconds": 1.0})
    assert calibrate(store).inc_step_s("t") == pytest.approx(0.9)  # three own steps outweigh the two


def test_a_use_answered_by_its_capture_is_a_use_without_a_run(tmp_path):
    """The replay logs a go whose capture job answered the query with ``answered``, seconds 0 and the
    job's seconds as its capture: a use (0, capture) for the measured verdict, counted for the
    template, but neither a point of the cost line nor a sketched run time."""
    store = Store(tmp_path / "wh")
    for r in (100_000, 500_000, 1_000_000, 2_000_000, 4_000_000, 6_000_000):
        store.log_run("run", "q", {"metrics": {"rows_read": r}, "seconds": 0.5 + 1e-7 * r, "template": "t"})
    store.log_run("run", "q", {"metrics": {"rows_read": 6_000_000}, "seconds": 0.0, "template": "t",
                               "sketch": {"id": 3}, "answered": True, "capture_seconds": 1.7})
    store.log_run("run", "q", {"metrics": {"rows_read": 60_000}, "seconds": 0.506, "template": "t",
                               "sketch": {"id": 3}, "capture_seconds": 0.0})
    cal = calibrate(store)
    assert cal.fixed_s == pytest.approx(0.5) and cal.per_row_s == pytest.approx(1e-7)
    assert cal.use_s["t"] == [(0.506, 0.0), (0.0, 1.7)]
    assert cal.query_s["t"][1] == [0.506]
    assert cal.answered == {"t": 1}


def test_sizing_without_sampling_is_predicted_from_its_parts(tmp_path):
    """Exact / OPT advice: partitions to build at their measured cost plus the measured rest; its job
    is the capture, charged as such -- not the median of whole (cold) recommendations."""
    store = Store(tmp_path / "wh")
    for r in (1_000_000, 2_000_000, 4_000_000, 6_000_000, 500_000, 3_000_000):
        store.log_run("run", "q", {"metrics": {"rows_read": r}, "seconds": 2.5e-7 * r, "template": "t"})
    T = 6_000_000.0  # a scan: 1.5 s
    fresh = calibrate(store)
    assert fresh.sizing_rows(2, T) == pytest.approx(2 * T)  # prior: one scan per partition to build
    # a plain run reading 3 columns: a build reads one of them, a third of a scan (the prior)
    assert fresh.sizing_rows(2, T, columns=3) == pytest.approx(2 * T / 3)
    # SF1 part_line's first instance: 3 predicted uses, capture 1.41 scans, two
    # partitions to build; a scan each declined it before sizing, a third of one each does not
    first = UseForecast(3, capture_rows=1.41 * T, calibration=fresh)
    assert cannot_pay(T, first, CostParams(), first.sizing_rows(2, T)) is not None
    assert cannot_pay(T, first, CostParams(), first.sizing_rows(2, T, columns=3)) is None
    # a cold sizing: 2 partitions built in 2.0 s, its exact job (the capture) 6.4 s, 1.3 s of the rest;
    # a warm one that built none and declined
    store.log_run("recommend", "q", {"template": "a", "partitions_built": 2, "captured": {"seconds": 6.4},
                                     "seconds": {"partitions": 2.0, "exact": 6.4, "total": 9.7}})
    store.log_run("recommend", "q", {"template": "b", "partitions_built": 0, "captured": None,
                                     "seconds": {"partitions": 0.1, "exact": 1.2, "total": 1.6}})
    cal = calibrate(store)
    assert cal.advice_s == []  # neither sampled: the bootstrap's advice is not predicted from them
    assert cal.partition_s == [pytest.approx(1.0)]
    assert sorted(cal.overhead_s) == [pytest.approx(0.3), pytest.approx(1.3)]
    assert cal.sizing_rows(1, T) == pytest.approx((1.0 + 0.8) / 2.5e-7)
    assert cal.sizing_rows(0, T) == pytest.approx(0.8 / 2.5e-7)
    # charged with the capture, the sizing of a new template on one new partition fits in 3 uses
    w = UseForecast(3, capture_rows=1.3 * T, calibration=cal)
    assert w.sizing_rows(1, T) == pytest.approx(cal.sizing_rows(1, T))
    assert cannot_pay(T, w, CostParams(), w.sizing_rows(1, T)) is None
    assert cannot_pay(T, w, CostParams(), cal.rows(9.7)) is not None  # a whole cold recommendation does not


def test_unmeasured_sampling_is_charged_two_scans_before_sampling():
    T, p = 600_000.0, CostParams()
    fresh = UseForecast(3)  # nothing measured: capture prior 1.3 scans, advice prior 2 scans
    assert fresh.sampled_advice_rows(T) == pytest.approx(2 * T)
    assert fresh.sampled_advice_rows(T, 0.0) == 0.0  # an explicit recommend: measured costs only
    # three predicted uses can save at most 3 scans: less than 1.3 + 2
    assert cannot_pay(T, fresh, p, fresh.sampled_advice_rows(T)) is not None
    # a template seen once more predicts four uses: 4 > 3.3, so it may sample
    assert cannot_pay(T, UseForecast(4), p, UseForecast(4).sampled_advice_rows(T)) is None
    # once measured, the measurement replaces the prior (here a cheap cached-sample estimation)
    measured = UseForecast(3, advice_rows=0.1 * T)
    assert measured.sampled_advice_rows(T) == pytest.approx(0.1 * T)
    assert cannot_pay(T, measured, p, measured.sampled_advice_rows(T)) is None


def test_maintenance_is_the_cheaper_of_renting_and_buying_state():
    T, p = 1_000_000.0, CostParams()
    # 3 updates over the horizon; initialising state costs 40 scans, a recapture 1.3, a step 0.1
    w = UseForecast(3, updates_per_use=1.0, init_rows=40 * T, inc_rows=0.1 * T)
    assert maintenance_per_update(T, 1.3 * T, w, p) == pytest.approx(1.3 * T)
    # 1,000 updates: buying wins, (40 + 1000 * 0.1) / 1000 scans per update
    w = UseForecast(1000, updates_per_use=1.0, init_rows=40 * T, inc_rows=0.1 * T)
    assert maintenance_per_update(T, 1.3 * T, w, p) == pytest.approx(0.14 * T)


def test_cannot_pay_when_maintenance_exceeds_any_saving():
    T, p = 1_000_000.0, CostParams()
    # each use meets a batch whose recapture (1.3 scans) costs more than skipping everything saves,
    # and the operator state is too big ever to be bought, so no step is cheaper than a recapture
    w = UseForecast(3, updates_per_use=1.0, init_rows=60 * T, inc_rows=0.2 * T, capture_rows=1.3 * T,
                 state_buyable=False)
    why = cannot_pay(T, w, p, advice_rows=0.5 * T)
    assert why is not None and "no-go before sampling" in why and "maintenance 3.90" in why
    # read-only workload: a sketch that skips a lot can repay capture and estimation
    calm = UseForecast(20, capture_rows=1.3 * T)
    assert cannot_pay(T, calm, p, advice_rows=8 * T) is None
    # ...but not when the estimation alone costs more than 20 uses could save
    assert cannot_pay(T, calm, p, advice_rows=25 * T) is not None


def test_cannot_pay_charges_maintenance_at_its_floor_and_the_full_model_the_purchase():
    """topk_receipt at SF1: capture 1.5 scans, estimation 0.78, an incremental step 0.05,
    state initialisation 4.5 scans, 3 predicted uses with one batch each.  Amortised over 3 steps
    the purchase makes every step as dear as a recapture (min(1.5, (4.5 + 3 * 0.05) / 3) = 1.5),
    which would decline the template before sampling; the floor (0.05 a step) lets it be sized,
    and the full model still charges the amortised purchase."""
    T, p = 1000.0, CostParams()
    w = UseForecast(3, updates_per_use=1.0, steps_per_use=1.0, capture_rows=1500.0, inc_rows=50.0,
                 init_rows=4500.0)
    assert maintenance_per_update(T, 1500.0, w, p) == pytest.approx(1500.0)
    # 3 * (1000 - 50) - 1500 - 780 = 570 > 0
    assert cannot_pay(T, w, p, advice_rows=780.0) is None
    # a state too big to buy leaves recaptures only: 3 * (1000 - 1500) - 1500 - 780 < 0
    why = cannot_pay(T, replace(w, state_buyable=False), p, advice_rows=780.0)
    assert why is not None and "maintenance 4.50" in why


def test_decline_maintenance_that_costs_more_than_it_saves():
    # the SF1 top-k case: recapture 2.9 s before a use that saves 0.99 - 0.75 s
    e = Evidence(plain_s=0.99, sketched_s=0.75, uses_per_batch=1.0, future_uses=40, maint_s=2.9,
                 init_s=70.0, inc_s=0.3)
    why = decline_reason(e)
    assert why is not None and "2.90 s" in why
    # the same sketch used 20 times per batch: one recapture is repaid
    assert decline_reason(Evidence(0.99, 0.75, 20.0, 40, 2.9, 70.0, 0.3)) is None
    # big saving per use: buying state pays over the horizon even if one rent does not -- and then
    # the state is bought at once, not rented first (a rent this use cannot repay is pure cost)
    assert decline_reason(Evidence(10.0, 1.0, 1.0, 40, 12.0, 70.0, 0.3)) is None
    assert buy_now(Evidence(10.0, 1.0, 1.0, 40, 12.0, 70.0, 0.3))
    # SF1 big_orders: ~0.75 s saved a use, 1.4 s recaptures, state ~6 s: buy at once
    assert buy_now(Evidence(1.35, 0.6, 1.0, 13, 1.4, 6.0, 0.15))
    # a rent the batch's uses repay is no reason to buy, nor is maintenance that is declined
    assert not buy_now(Evidence(0.99, 0.75, 20.0, 40, 2.9, 70.0, 0.3))
    assert not buy_now(e) and not buy_now(Evidence(0.99, None, 1.0, 40, 2.9, 70.0, 0.3))
    # no sketched run measured yet: no evidence against maintaining
    assert decline_reason(Evidence(0.99, None, 1.0, 40, 2.9, 70.0, 0.3)) is None


def test_lazy_policy_pays_one_catch_up_per_use_however_many_batches_wait():
    from advisor.maintain.policy.policies import make_policy

    def maintenance_steps(spec, ups):
        return make_policy(spec).steps_per_use(ups)
    # hand-computed: 3 batches between uses -> eager steps 3 times, lazy once, batched:2 1.5 + 1 (capped at 3)
    assert maintenance_steps("eager", 3.0) == 3.0
    assert maintenance_steps("lazy", 3.0) == 1.0
    assert maintenance_steps("lazy", 0.25) == 0.25  # four uses per batch: only the first catches up
    assert maintenance_steps("batched:2", 3.0) == 2.5
    assert maintenance_steps("batched:10,5s", 0.5) == 0.5  # 0.05 + 0.5, never more than eager
    assert maintenance_steps("arrival", 3.0) == 3.0
    T = 1e6
    p = CostParams()
    eager = UseForecast(7, updates_per_use=3.0, inc_rows=0.2 * T, capture_rows=1.3 * T)
    lazy = UseForecast(7, updates_per_use=3.0, inc_rows=0.2 * T, capture_rows=1.3 * T, steps_per_use=1.0)
    # 7 uses x 3 steps x 0.2 scans = 4.2 scans of maintenance against 7 x 0.2 = 1.4 under lazy
    assert "maintenance 4.20" in cannot_pay(T, eager, p, advice_rows=4.0 * T)
    assert cannot_pay(T, lazy, p, advice_rows=4.0 * T) is None


def _demo_runs(store):
    # the demo's plain runs (TPC-H SF0.1 and flights): 0.34-0.75M rows, too little spread for a fit
    for rows, secs in ((750_572, 0.29), (336_776, 0.18), (600_572, 0.27)):
        store.log_run("run", "q", {"metrics": {"rows_read": rows}, "seconds": secs, "template": "t"})


def test_the_probe_is_the_fixed_cost_when_the_runs_cannot_identify_it(tmp_path):
    store = Store(tmp_path / "wh")
    _demo_runs(store)
    cal = calibrate(store)
    assert cal.fixed_s == 0.0 and not cal.identified
    store.log_run("probe", None, {"seconds": 0.12, "rows_read": 64, "runs": [2.0, 0.12, 0.11, 0.13]})
    cal = calibrate(store)
    assert not cal.identified and "probe" in cal.source
    assert cal.fixed_s == pytest.approx(0.12)
    # per-row cost: the median over the three runs of what is left after the fixed cost
    assert cal.per_row_s == pytest.approx(0.17 / 750_572)
    # a plain scan of lineitem is now mostly fixed cost: a sketch can save only the rest
    assert cal.fixed_s / predicted_seconds(cal, 600_572) > 0.4


def test_with_enough_runs_the_probe_is_one_more_point_of_the_fit(tmp_path):
    store = Store(tmp_path / "wh")
    for r in (400_000, 450_000, 500_000, 600_000, 700_000, 800_000):  # spread 2x: not identifiable alone
        store.log_run("run", "q", {"metrics": {"rows_read": r}, "seconds": 0.1 + 2e-7 * r, "template": "t"})
    assert not calibrate(store).identified
    store.log_run("probe", None, {"seconds": 0.1 + 2e-7 * 64, "rows_read": 64})
    cal = calibrate(store)
    assert cal.source.startswith("fit over 7")
    assert cal.fixed_s == pytest.approx(0.1, rel=1e-6) and cal.per_row_s == pytest.approx(2e-7, rel=1e-6)


def test_a_damaged_probe_record_is_ignored(tmp_path):
    store = Store(tmp_path / "wh")
    _demo_runs(store)
    store.log_run("probe", None, {"seconds": None, "rows_read": 64})
    assert calibrate(store).fixed_s == 0.0


def test_a_probe_alone_gives_the_fixed_cost_and_the_prior_row_rate(tmp_path):
    from advisor.calibration.measured_costs import PRIOR_ROWS_PER_S

    store = Store(tmp_path / "wh")
    store.log_run("probe", None, {"seconds": 0.14, "rows_read": 64})
    cal = calibrate(store)
    # the probe's 64 rows say nothing about the per-row cost: dividing its time by them priced a
    # row at 2 ms and a job's fixed cost at 640 rows
    assert cal.fixed_s == pytest.approx(0.14) and cal.per_row_s == pytest.approx(1.0 / PRIOR_ROWS_PER_S)


def test_advice_is_predicted_from_warm_records_when_there_are_any(tmp_path):
    """SF1: a replay process's first sizing spent 2.9 s beyond its partition and capture
    job (imports, first compilations), the next 0.5 s.  Their median (1.7 s) made the next
    template's advice look like 1.8 scans and declined it before sizing; the warm record alone does
    not.  A store holding only cold records (every CLI call is a new process) still uses them."""
    store = Store(tmp_path / "wh")
    for r in (1_000_000, 2_000_000, 4_000_000, 6_000_000, 500_000, 3_000_000):
        store.log_run("run", "q", {"metrics": {"rows_read": r}, "seconds": 2.5e-7 * r, "template": "t"})
    T = 6_000_000.0  # a scan: 1.5 s
    store.log_run("recommend", "q", {"template": "a", "partitions_built": 1, "captured": {"seconds": 3.5},
                                     "cold": True, "seconds": {"partitions": 1.1, "exact": 3.5, "total": 7.5}})
    only_cold = calibrate(store)
    assert only_cold.overhead_s == [pytest.approx(2.9)] and only_cold.partition_s == [pytest.approx(1.1)]
    store.log_run("recommend", "q", {"template": "b", "partitions_built": 1, "captured": {"seconds": 8.1},
                                     "cold": False, "seconds": {"partitions": 0.3, "exact": 8.1, "total": 8.9}})
    store.log_run("recommend", "s", {"template": "c", "cold": True, "seconds": {"sampling": 4.0, "total": 9.0}})
    store.log_run("recommend", "s", {"template": "d", "cold": False, "seconds": {"sampling": 1.0, "total": 2.0}})
    cal = calibrate(store)
    assert cal.overhead_s == [pytest.approx(0.5)] and cal.partition_s == [pytest.approx(0.3)]
    assert cal.advice_s == [pytest.approx(2.0)]
    assert cal.sizing_rows(1, T) == pytest.approx(0.8 / 2.5e-7)
    w = UseForecast(3, capture_rows=1.4 * T, calibration=cal)
    assert cannot_pay(T, w, CostParams(), w.sizing_rows(1, T)) is None
    both = (1.1 + 0.3) / 2 + (2.9 + 0.5) / 2  # the median of the two, as before
    assert cannot_pay(T, w, CostParams(), cal.rows(both)) is not None


def test_a_warm_process_does_not_charge_a_cold_sizings_one_time_costs(tmp_path):
    """A replay's first sizing (SF1 top-k): 9.6 s planning, 5.9 s partitions, 72.4 s exact job and 13.5 s
    more (the process's first view registration).  The planning is sunk when the next template is
    priced; the rest, measured only cold, is one job's fixed cost to a process that has advised."""
    store = Store(tmp_path / "wh")
    for r in (1_000_000, 2_000_000, 4_000_000, 6_000_000, 500_000, 3_000_000):
        store.log_run("run", "q", {"metrics": {"rows_read": r}, "seconds": 0.2 + 2.5e-7 * r, "template": "t"})
    T = 6_000_000.0
    store.log_run("recommend", "q", {"template": "a", "partitions_built": 1, "captured": {"seconds": 72.4},
                                     "cold": True, "seconds": {"planning": 9.6, "partitions": 5.9, "exact": 72.4,
                                                               "total": 101.4}})
    cal = calibrate(store)
    assert cal.overhead_cold and cal.overhead_s == [pytest.approx(13.5)]
    assert cal.sizing_rows(0, T) == pytest.approx(cal.rows(13.5))            # a new (cold) process: as measured
    assert cal.sizing_rows(0, T, warm=True) == pytest.approx(cal.fixed_rows)  # this process paid them already
    assert cal.fixed_rows < cal.rows(13.5)
    w = UseForecast(3, capture_rows=0.3 * T, calibration=cal)
    assert cannot_pay(T, w, CostParams(), w.sizing_rows(0, T)) is not None
    assert cannot_pay(T, w, CostParams(), w.sizing_rows(0, T, warm=True)) is None
    store.log_run("recommend", "q", {"template": "b", "partitions_built": 0, "captured": {"seconds": 3.0},
                                     "cold": False, "seconds": {"planning": 0.4, "partitions": 0.0, "exact": 3.0,
                                                               "total": 3.9}})
    warm = calibrate(store)
    assert not warm.overhead_cold and warm.overhead_s == [pytest.approx(0.5)]
    assert warm.sizing_rows(0, T, warm=True) == warm.sizing_rows(0, T) == pytest.approx(warm.rows(0.5))
