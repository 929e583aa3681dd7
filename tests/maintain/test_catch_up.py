"""Lazy maintenance declined when the store's measurements say it costs more than the uses save
(advisor.maintain.policy.catch_up through hooks.before_use), on Spark with a real store; the measurements
are logged records with chosen seconds, so the decision does not depend on this machine's speed."""

from __future__ import annotations

import pytest

from advisor.sketch.lookup import usable_sketches
from advisor.maintain.spark import state_rental as rent
from advisor.maintain.policy.triggers import before_use
from workloads.data.update_batches import batch_frames

from sketch_helpers import clustered_sketch

SQL = "SELECT g1, sum(v) AS a FROM facts GROUP BY g1 HAVING sum(v) < 300"  # two small groups


def _setup(spark, tmp_path, recapture_s: float):
    cat, q, _, sk = clustered_sketch(spark, tmp_path, SQL)  # the sketch's files hold ~20 %
    for secs, sketch in ((1.0, None), (1.0, None), (0.8, {"id": sk.id}), (0.8, {"id": sk.id})):
        cat.store.log_run("run", SQL, {"template": q.template, "seconds": secs, "sketch": sketch,
                                       "metrics": {"rows_read": 1000}})
    cat.store.log_run("maintain", SQL, {"template": q.template, "how": "recapture", "seconds": recapture_s})
    ins, dels = batch_frames(cat, "facts", 20, 10, 0)
    cat.apply_frames("facts", ins, dels)
    return cat, q, sk


def test_maintenance_dearer_than_the_saving_is_declined(spark, tmp_path, monkeypatch):
    cat, q, sk = _setup(spark, tmp_path, recapture_s=3.0)  # saves 0.2 s per use, recapture 3 s
    monkeypatch.setattr(rent, "init_rate", lambda store, bulk=False, spark_only=False, driver_only=False: 5.0)  # state for 500 rows: 100 s, never pays
    declined: list[str] = []
    assert before_use(cat, q, declined) == []
    # four logged runs of the template per batch, each saving 1.0 - 0.8 s: 0.8 s against 3 s
    assert len(declined) == 1 and "maintenance ~3.00 s > saving ~0.80 s" in declined[0]
    assert "4.0 use(s) per batch" in declined[0]
    good, bad = usable_sketches(cat, q, {"facts": cat.current_version("facts")})
    assert good == [] and [b.id for b, _ in bad] == [sk.id]  # stale, untouched: the query runs plain
    # without the gate (e.g. `advisor run`, measured_costs: false) the same sketch is maintained
    done = before_use(cat, q)
    assert [r.old_id for r in done] == [sk.id] and done[0].how in ("recapture", "incremental")


def test_maintenance_cheaper_than_the_saving_goes_ahead(spark, tmp_path):
    cat, q, sk = _setup(spark, tmp_path, recapture_s=0.1)
    declined: list[str] = []
    done = before_use(cat, q, declined)
    assert declined == [] and [r.old_id for r in done] == [sk.id]
    good, _ = usable_sketches(cat, q, {"facts": cat.current_version("facts")})
    assert [g.id for g in good] == [done[0].new_id]


def test_cheap_operator_state_is_bought_even_when_a_recapture_would_not_pay(spark, tmp_path):
    # a 3 s recapture would not pay, but initialising state for 500 rows (prior 150k rows/s) does:
    # over the predicted batches the saving exceeds the incremental steps plus the initialisation
    cat, q, sk = _setup(spark, tmp_path, recapture_s=3.0)
    declined: list[str] = []
    done = before_use(cat, q, declined)
    assert declined == [] and [(r.old_id, r.how) for r in done] == [(sk.id, "incremental")]


def test_a_template_never_run_plain_is_judged_against_its_captures(spark, tmp_path):
    """Only sketched runs logged (1.1-2.0 s), spread so that the fitted line (about 1 ms a row) puts a
    plain run of the 500-row table far above them, while the template's capture, which reads what a
    plain run reads, took 1.0 s: the sketch saves nothing, so its 1.0 s recapture is declined
    (SF1 big_orders: line 9.0 s, captures 1.57 s, sketched runs 2.0 s)."""
    cat, q, _, sk = clustered_sketch(spark, tmp_path, SQL)
    for rows, secs in ((100, 1.1), (1000, 2.0)) * 3:
        cat.store.log_run("run", SQL, {"template": q.template, "seconds": secs, "sketch": {"id": sk.id},
                                       "metrics": {"rows_read": rows}})
    cat.store.log_run("maintain", SQL, {"template": q.template, "how": "recapture", "seconds": 1.0})
    from advisor.calibration.measured_costs import calibrate, plain_proxy, predicted_seconds

    cal = calibrate(cat.store)
    assert predicted_seconds(cal, 500) > 1.3 and plain_proxy(cal, q.template, 500) == 1.0
    ins, dels = batch_frames(cat, "facts", 20, 10, 0)
    cat.apply_frames("facts", ins, dels)
    declined: list[str] = []
    assert before_use(cat, q, declined) == []
    assert len(declined) == 1 and "saving ~0.00 s (plain 1.00 s vs sketched 1.55 s" in declined[0]



def test_a_template_never_stepped_is_predicted_from_the_other_templates_steps(spark, tmp_path):
    """Before its first incremental step a template's step is predicted as the other templates'
    median step, not as a Spark job's fixed cost (a step without a join runs no job)."""
    from advisor.calibration.measured_costs import calibrate
    from advisor.maintain.policy.catch_up import evidence

    cat, q, sk = _setup(spark, tmp_path, recapture_s=3.0)
    fixed = calibrate(cat.store).fixed_s
    assert evidence(cat, sk, has_state=True).inc_s == fixed  # nothing stepped yet
    for secs in (0.02, 0.04, 0.09):
        cat.store.log_run("maintain", "SELECT 1", {"template": "other", "how": "incremental", "seconds": secs})
    assert evidence(cat, sk, has_state=True).inc_s == 0.04
    # its own steps take over as they come: one slow step alone is not yet its cost
    cat.store.log_run("maintain", SQL, {"template": q.template, "how": "incremental", "seconds": 0.5})
    assert evidence(cat, sk, has_state=True).inc_s == 0.04
    cat.store.log_run("maintain", SQL, {"template": q.template, "how": "incremental", "seconds": 0.6})
    assert evidence(cat, sk, has_state=True).inc_s == pytest.approx(0.27)  # median of 0.5, 0.6, 0.04, 0.04
    cat.store.log_run("maintain", SQL, {"template": q.template, "how": "incremental", "seconds": 0.7})
    assert evidence(cat, sk, has_state=True).inc_s == 0.5  # median of 0.5, 0.6, 0.7 and two of 0.04
