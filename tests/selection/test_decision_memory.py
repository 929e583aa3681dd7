"""Remembered decisions revisited by measurement (``advisor.selection.decision_memory``; a real SQLite store, no Spark)."""

from __future__ import annotations

from advisor.selection.decision_memory import (
    MARGIN, MIN_CAPTURED, MIN_SKETCHED, REVISIT_FACTOR, measured_loss, pays_after, recall, remember, revisit)
from advisor.selection.cost_model import CostParams, UseForecast, cannot_pay
from advisor.warehouse.sketch_records import Sketch, SketchPart, latest_versions, save_sketch
from advisor.warehouse.store import Store


N = MIN_SKETCHED
FIRST = (0.0, 9.0)  # the template's first use: its first capture (the oldest, last in the lists)


def test_measured_loss_needs_enough_sketched_uses():
    assert measured_loss([1.0], [3.0] * N, None) is None  # the oldest is the first capture: N - 1 judged
    why = measured_loss([1.0, 1.2, 1.4], [2.0, 3.0] * (N // 2) + [FIRST], None)
    assert why is not None and "~2.50 s" in why and "1.20 s plain" in why


def test_a_template_that_never_reuses_is_judged_early():
    """Uses that needed a capture (run 0: the capture answered) or a derivation of their own reused
    nothing.  After ``MIN_CAPTURED`` of them in a row past the template's first capture the go is
    contradicted, well before ``MIN_SKETCHED`` uses, as soon as they cost more than plain runs (no
    margin)."""
    alone = [(0.0, 1.3)] * (MIN_CAPTURED + 1)
    assert MIN_CAPTURED + 1 < N
    why = measured_loss([1.1], alone, None)
    assert why is not None and f"none of the last {MIN_CAPTURED} uses reused" in why and "~1.30 s a use" in why
    assert measured_loss([1.1], alone[:-1], None) is None  # the first capture among them: not yet
    # a reuse among them (a run of its own, no capture) keeps the go
    assert measured_loss([1.1], [(0.4, 0.0)] + alone[1:], None) is None
    # derivations and captures mixed, dearer than plain: the dashboard's moving-date pattern
    assert measured_loss([1.5], [(0.0, 1.5), (0.9, 2.6), (0.0, 2.0), (0.0, 1.2), (0.0, 1.9)], None) is not None
    # cheap derivations from maintained state followed by a sketched run pay: kept
    assert measured_loss([1.1], [(0.3, 0.2)] * (MIN_CAPTURED + 1), None) is None
    # without any plain run or stand-in nothing is judged
    assert measured_loss([], alone, None) is None


def test_the_first_capture_is_not_a_per_use_cost():
    """TPC-H SF1 big_orders in the demo: a first capture of 8.4 s, a derivation that bought the
    operator state (2.9 + 4.5 s), then derivations of 3.0-3.6 s against 5.15 s plain.  Judged with
    the first capture (mean 5.57 s) the go was contradicted; the uses after it pay (mean 4.3 s)."""
    uses = [(3.3, 0.6), (2.4, 0.6), (2.7, 0.7), (2.9, 4.5), (0.0, 8.4)]  # newest first
    assert measured_loss([5.15], uses[1:], None) is None  # the first capture is in the window: not judged
    assert measured_loss([5.15], uses, None) is None
    dear = [(4.9, 1.0)] * 4 + [(0.0, 8.4)]  # derivations dearer than plain are still judged
    assert measured_loss([5.15], dear, None) is not None


def test_measured_loss_keeps_a_sketch_that_is_faster_or_within_the_margin():
    assert measured_loss([1.5, 1.4], [0.5] * N + [FIRST], None) is None
    assert measured_loss([1.0], [0.99 * MARGIN] * N + [FIRST], None) is None  # dearer, but not clearly
    assert measured_loss([1.0], [1.01 * MARGIN] * N + [FIRST], None) is not None
    # the first capture is the investment the go priced, not one use in ten: top_clerks' pattern
    top_clerks = [(0.17, 0.0)] * (N - 1) + [(0.0, 3.61)]
    assert measured_loss([0.40], top_clerks, None) is None


def test_one_off_costs_do_not_retire_a_template_whose_reuses_pay():
    """Three dear captures (6.8-10.1 s, like cold ones in a fresh JVM) among ten uses whose runs mostly
    take 0.8-1.4 s, against 2.81 s plain: their mean (3.62 s) exceeds 1.25 x plain, the predicted
    next use (1.0 + 0.3 x 7.5 = 3.25 s) does not."""
    uses = [(0.9, 0.0), (1.0, 0.0), (0.8, 0.0), (1.4, 0.0), (1.2, 6.8), (1.1, 7.5), (0.9, 0.0), (0.8, 0.0),
            (1.0, 0.0), (2.7, 10.1)]
    assert measured_loss([2.81], uses + [FIRST], None) is None
    # the same runs with a capture before every use: a loss (big_orders' pattern)
    assert measured_loss([2.81], [(r, 7.0) for r, _ in uses] + [FIRST], None) is not None
    # a minority of uses capturing, but dearly enough that the next use is expected to lose
    why = measured_loss([1.0], [(0.4, 0.0)] + [(0.4, 3.0)] * 4 + [(0.4, 0.0)] * (N - 5) + [FIRST], None)
    assert why is not None and "~1.60 s" in why and "4 of the last" in why


def test_uses_answered_by_their_capture_cost_the_capture_alone():
    """A use whose capture job also answered the query is logged as (0, capture): the next use is the
    share of uses with a run times the median run plus the share with a capture times the median
    capture (7 x 0.5 + 3 x 2.0) / 10 = 0.95 s, not median run + 3/10 x capture."""
    uses = [(0.0, 2.0)] * 3 + [(0.5, 0.0)] * (N - 3) + [FIRST]
    assert measured_loss([0.8], uses, None) is None               # 0.95 < 1.25 x 0.8 = 1.0
    why = measured_loss([0.7], uses, None)                        # 0.95 > 0.875
    assert why is not None and "~0.95 s" in why and "median run 0.50 s" in why and "3 of the last" in why
    # every use needed a capture that answered it: no reuse at all, judged at once
    assert "~2.00 s a use" in measured_loss([1.0], [(0.0, 2.0)] * N, None)


def test_early_captures_are_repaid_by_later_reuses():
    """Three captured uses then reuses: the average over the latest uses decides, not the first ones."""
    uses = [0.4] * (N - 3) + [1.9, 1.8, 1.6]  # newest first
    assert measured_loss([1.3], uses, None) is None


def test_measured_loss_without_plain_runs_uses_the_fitted_line():
    assert measured_loss([], [1.0] * N + [FIRST], 0.7) is not None
    assert measured_loss([], [1.0] * N + [FIRST], 1.5) is None
    assert measured_loss([], [1.0] * N + [FIRST], None) is None


def _run(store, template: str, secs: float, sketched: bool, capture: float = 0.0) -> None:
    rec = {"template": template, "seconds": secs, "metrics": {"rows_read": 1_000_000}, "capture_seconds": capture}
    if sketched:
        rec["sketch"] = {"id": 1}
    store.log_run("run", f"SELECT {template}", rec)


def _sketch(store, template: str) -> Sketch:
    return save_sketch(store, Sketch(0, template, (), f"SELECT {template}",
                                     [SketchPart("t", "a", 1, frozenset({1, 2}))], {"t": 1}))


def test_revisit_turns_a_contradicted_go_into_a_no_go_and_retires_sketches(tmp_path):
    store = Store(tmp_path)
    remember(store, "slow", "CB-OPT-GB", go=True, reason="go: predicted", table="t", attr="a",
             partition_id=1, horizon=5.0, step="3")
    remember(store, "fast", "CB-OPT-GB", go=True, reason="go: predicted", table="t", attr="a",
             partition_id=1, horizon=5.0, step="4")
    slow, fast = _sketch(store, "slow"), _sketch(store, "fast")
    for s in (1.4, 1.5):
        _run(store, "slow", s, False)
        _run(store, "fast", s, False)
    for s in (2.9,) + (2.9, 3.1) * (N // 2):  # the first: the template's first capture
        _run(store, "slow", s, True)
        _run(store, "fast", s / 5, True)
    why = revisit(store, "slow", "CB-OPT-GB", 6e6, step="20")
    assert why is not None and "~3.00 s" in why and "1.45 s plain" in why
    memo = recall(store, "slow", "CB-OPT-GB")
    assert not memo.go and not memo.structural and memo.horizon == REVISIT_FACTOR * 5.0
    assert "was go on t.a" in memo.reason and memo.step == "20"
    live = {s.id for s in latest_versions(store)}
    assert slow.id not in live and fast.id in live
    assert revisit(store, "fast", "CB-OPT-GB", 6e6) is None and recall(store, "fast", "CB-OPT-GB").go
    assert revisit(store, "slow", "CB-OPT-GB", 6e6) is None  # already a no-go: nothing to revisit
    assert revisit(store, "unknown", "CB-OPT-GB", 6e6) is None


def test_captures_count_against_the_uses_that_needed_them(tmp_path):
    """Fast sketched runs that each needed a fresh capture do not pay (big_orders' pattern)."""
    store = Store(tmp_path)
    remember(store, "t", "CB-OPT-GB", go=True, reason="go", table="t", attr="a", partition_id=1, horizon=3.0)
    for _ in range(2):
        _run(store, "t", 1.5, False)
    for _ in range(N):
        _run(store, "t", 0.4, True, capture=1.6)
    assert revisit(store, "t", "CB-OPT-GB", 6e6) is not None and not recall(store, "t", "CB-OPT-GB").go
    remember(store, "u", "CB-OPT-GB", go=True, reason="go", table="t", attr="a", partition_id=1, horizon=3.0)
    _run(store, "u", 1.5, False)
    for cap in [1.6] + [0.0] * (N - 1):  # one capture, then reuses
        _run(store, "u", 0.4, True, capture=cap)
    assert revisit(store, "u", "CB-OPT-GB", 6e6) is None and recall(store, "u", "CB-OPT-GB").go


def test_a_template_never_run_plain_is_judged_against_its_captures(tmp_path):
    """No plain run: the median capture of the template (about one plain run) stands in, not the
    fitted line (which small sketched runs can inflate several-fold)."""
    store = Store(tmp_path)
    remember(store, "v", "CB-OPT-GB", go=True, reason="go", table="t", attr="a", partition_id=1, horizon=3.0)
    store.log_run("maintain", "SELECT v", {"template": "v", "how": "recapture", "seconds": 1.8})
    for _ in range(N + 1):
        _run(store, "v", 3.0, True)
    why = revisit(store, "v", "CB-OPT-GB", 6e6)
    assert why is not None and "1.80 s plain (predicted" in why


def test_a_no_go_before_sampling_is_remembered_until_one_more_use_could_pay():
    """A tie at SF1: 3 predicted uses, each saving at most a scan less 0.25 of maintenance,
    against capture 1.49 + estimation 0.76 scans: 3 x 0.75 = 2.25 does not exceed 2.25; with a
    fourth use (3.00) it would.  A dearer capture (3.00 scans) needs 3.76 / 0.75 = 5.01, so 6 uses,
    3 more; maintenance of a whole scan per use never pays."""
    T = 6e6
    w = UseForecast(reuses=3.0, updates_per_use=1.0, fixed_rows=0.19 * T, capture_rows=1.49 * T, inc_rows=0.25 * T,
                 steps_per_use=1.0)
    p = CostParams()
    assert cannot_pay(T, w, p, 0.76 * T) is not None
    assert pays_after(T, w, p, 0.76 * T) == 1
    w.capture_rows = 3.0 * T
    assert pays_after(T, w, p, 0.76 * T) == 3
    w.inc_rows = 1.0 * T
    assert pays_after(T, w, p, 0.76 * T) is None
