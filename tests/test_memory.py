"""The driver memory valve (``advisor.memory``): caches are dropped while the process is over budget."""

import numpy as np
import pytest

from advisor import caches, memory
from advisor.caches import BoundedMemo


@pytest.fixture
def cache():
    with caches.isolated():  # this process's real caches stay out of the count
        yield BoundedMemo("test arrays", rank=5)


def _fill(c, n=6, mb=64):
    for i in range(n):
        c[i] = np.ones(mb << 17)  # mb MB of float64, touched so it is resident


@pytest.mark.skipif(memory.rss_bytes() == 0, reason="no /proc/self/statm on this platform")
def test_over_budget_the_oldest_entries_go_until_the_process_fits(cache):
    _fill(cache)
    before = memory.rss_bytes()
    limit = before - (200 << 20)  # needs about four of the six 64 MB arrays gone
    dropped = memory.relieve(limit)
    assert memory.rss_bytes() <= limit
    assert 0 < len(cache) < 6 and dropped >= 6 - len(cache)
    assert list(cache) == list(range(6 - len(cache), 6))  # the newest stay


@pytest.mark.skipif(memory.rss_bytes() == 0, reason="no /proc/self/statm on this platform")
def test_under_budget_nothing_is_dropped(cache):
    _fill(cache, n=2)
    assert memory.relieve(memory.rss_bytes() + (1 << 30)) == 0
    assert list(cache) == [0, 1]


@pytest.mark.skipif(memory.rss_bytes() == 0, reason="no /proc/self/statm on this platform")
def test_lower_ranked_caches_are_emptied_first(cache):
    keep = BoundedMemo("kept", rank=9)
    _fill(cache, n=3)
    _fill(keep, n=3)
    limit = memory.rss_bytes() - (100 << 20)  # two 64 MB arrays are enough
    memory.relieve(limit)
    assert len(keep) == 3 and len(cache) < 3  # the rank-5 cache paid first
    memory.relieve(memory.rss_bytes() - (250 << 20))  # more than the rank-5 cache has left
    assert not cache and len(keep) < 3


def test_empty_all_drops_every_entry_of_every_cache_whatever_the_budget(cache):
    other = BoundedMemo("other", rank=9)
    _fill(cache, n=3, mb=1)
    _fill(other, n=2, mb=1)
    assert memory.empty_all() == 5
    assert not cache and not other
    assert memory.empty_all() == 0


def test_every_driver_cache_is_registered():
    import advisor.estimation.size_estimates  # noqa: F401 - registers on import
    import advisor.maintain.spark.service  # noqa: F401
    import advisor.maintain.spark.spark_side  # noqa: F401
    import advisor.estimation.sample_eval  # noqa: F401

    assert {"operator states", "bootstrap blocks", "group estimates", "sample rows", "join sides",
            "joined tables", "drawn samples", "sample fragment ids"} <= set(caches.names())


def test_the_budget_follows_the_environment(monkeypatch):
    from advisor.errors import BadInput

    monkeypatch.setenv(memory.ENV, "300")
    assert memory.budget_bytes() == 300 << 20
    for bad in ("lots", "0", "-5"):
        monkeypatch.setenv(memory.ENV, bad)
        with pytest.raises(BadInput, match=memory.ENV):
            memory.budget_bytes()
    monkeypatch.delenv(memory.ENV)
    assert 0 < memory.budget_bytes() <= memory.DEFAULT_MAX_MB << 20


def test_a_state_put_over_budget_leaves_the_cache_empty(monkeypatch):
    """The caches call the valve themselves: with a budget below what the process already holds,
    a state put into the in-process cache is dropped again at once."""
    from advisor.maintain.spark import state_store as states

    with caches.isolated():  # the valve sees the state cache alone, not the process's other memos
        caches.register(states._cache)
        monkeypatch.setenv(memory.ENV, "1")
        states._cache.clear()
        states._put(("w", 1), object(), 10)
        assert not states._cache
        monkeypatch.setenv(memory.ENV, str(1 << 20))  # a terabyte: nothing to relieve
        states._put(("w", 2), object(), 10)
        assert list(states._cache) == [("w", 2)]
        states._cache.clear()
