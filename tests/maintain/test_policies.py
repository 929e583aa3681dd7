"""Maintenance policies: eager, lazy, batched, and the arrival-aware cost model's worked example."""

from __future__ import annotations

import math

import pytest

from advisor.maintain.policy.policies import (
    EAGER, LAZY, ArrivalAware, Batched, Eager, Lazy, expected_query_latency, make_policy)


def test_eager_and_lazy():
    e, l = Eager(), Lazy()
    assert e.on_update(0.0, 10) is True
    assert l.on_update(0.0, 10) is False
    assert l.on_query(1.0) is True          # stale: maintain before use
    l.on_maintained(1.0)
    assert l.on_query(2.0) is False         # fresh: nothing to do
    assert l.tick(100.0) is False


def test_batched_by_count_and_time():
    b = Batched(n_batches=3)
    assert [b.on_update(t, 5) for t in (0, 1, 2)] == [False, False, True]
    b.on_maintained(2)
    assert b.pending_batches == 0 and b.pending_tuples == 0
    t = Batched(seconds=10)
    assert t.on_update(0, 1) is False
    assert t.tick(5) is False
    assert t.on_update(9, 1) is False
    assert t.tick(10) is True
    t.on_maintained(10)
    assert t.tick(50) is False              # nothing pending, nothing to do
    both = Batched(n_batches=5, seconds=3)
    assert both.on_update(0, 1) is False and both.on_update(3.5, 1) is True
    with pytest.raises(ValueError):
        Batched()


def test_cost_model_worked_example():
    # a = 0.5 s per run, b = 1 ms per tuple, 100 tuples per update -> d = 0.6 s.
    w = expected_query_latency(lu=0.1, lq=0.5, s=100, a=0.5, b=0.001)
    assert w[EAGER] == pytest.approx(0.1 * 0.36 / (2 * 0.94)) == pytest.approx(0.019149, abs=1e-6)
    assert w[LAZY] == pytest.approx(0.5 * 0.1 / 0.6 + 0.1 * 0.1 / 0.5) == pytest.approx(0.103333, abs=1e-6)
    w = expected_query_latency(lu=2, lq=0.5, s=100, a=0.5, b=0.001)
    assert w[EAGER] == math.inf and w[LAZY] == pytest.approx(0.8)
    w = expected_query_latency(lu=0.4, lq=0.01, s=1, a=2.0, b=0.0)
    assert w[EAGER] == pytest.approx(4.0) and w[LAZY] == pytest.approx(0.8 / 0.41)


def feed(policy, update_every, query_every, horizon, tuples=100):
    events = [(i * update_every, "u") for i in range(1, int(horizon / update_every) + 1)]
    events += [(i * query_every + 0.01, "q") for i in range(1, int(horizon / query_every) + 1)]
    decisions = []
    for t, kind in sorted(events):
        if kind == "u":
            decisions.append(policy.on_update(t, tuples))
        elif policy.on_query(t):
            policy.on_maintained(t)
    return decisions


def test_arrival_aware_picks_eager_for_rare_updates_and_frequent_queries():
    p = ArrivalAware(fixed_cost=0.5, per_tuple_cost=0.001)
    decisions = feed(p, update_every=10, query_every=2, horizon=100)
    assert p.mode() == EAGER
    assert decisions[-1] is True and decisions[0] is False   # lazy until enough is observed
    lu, lq, s = p.rates()
    assert lu == pytest.approx(0.1) and lq == pytest.approx(0.5) and s == 100


def test_arrival_aware_picks_lazy_when_eager_cannot_keep_up():
    p = ArrivalAware(fixed_cost=0.5, per_tuple_cost=0.001)
    feed(p, update_every=0.5, query_every=2, horizon=40)
    assert p.mode() == LAZY
    assert p.expected()[EAGER] == math.inf


def test_arrival_aware_learns_costs_from_runs():
    p = ArrivalAware(fixed_cost=9.0, per_tuple_cost=9.0)
    for n, d in [(10, 0.3), (20, 0.4), (40, 0.6), (80, 1.0)]:
        p.on_update(0, n)
        p.on_maintained(1, duration=d, n_tuples=n)
    assert p.a == pytest.approx(0.2) and p.b == pytest.approx(0.01)


def test_make_policy():
    assert isinstance(make_policy("eager"), Eager)
    assert isinstance(make_policy("LAZY"), Lazy)
    assert isinstance(make_policy("arrival"), ArrivalAware)
    b = make_policy("batched:4,30s")
    assert (b.n_batches, b.seconds) == (4, 30.0)
    assert make_policy("batched:10s").n_batches is None
    with pytest.raises(ValueError):
        make_policy("sometimes")
