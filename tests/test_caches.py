"""Bounded memos and their registry (``advisor.caches``): bounds, eviction order, write-behind
eviction, and the registry the memory valve and a replay's warm-up walk."""

import pytest

from advisor import caches, memory
from advisor.caches import BoundedMemo, IdentityMemo, memoize


@pytest.fixture(autouse=True)
def own_registry():
    with caches.isolated():
        yield


def test_entries_bound_evicts_the_oldest_and_a_refreshed_key_is_newest():
    m = BoundedMemo("m", 3)
    for k in "abc":
        m.put(k, k.upper())
    m.put("a", "A2")  # refreshed: now the newest
    m.put("d", "D")
    assert list(m.items()) == [("c", "C"), ("a", "A2"), ("d", "D")]


def test_bytes_bound_counts_sizes_and_keeps_the_newest_entry_unless_told_not_to():
    m = BoundedMemo("m", max_bytes=10, size_of=len)
    m.put(1, "x" * 6)
    m.put(2, "y" * 6)
    assert list(m) == [2]
    m.put(3, "z" * 50)  # over the bound alone: kept, as the newest entry
    assert list(m) == [3]
    strict = BoundedMemo("strict", max_bytes=10, size_of=len, keep_one=False)
    strict.put(1, "z" * 50)
    assert list(strict) == []


def test_eviction_hands_every_dropped_entry_to_on_evict():
    seen = []
    m = BoundedMemo("m", 1, on_evict=lambda k, v: seen.append((k, v)))
    m.put("a", 1)
    m.put("b", 2)
    assert seen == [("a", 1)]
    assert m.drain() == 1 and seen == [("a", 1), ("b", 2)]


def test_identity_memo_keys_on_the_object_not_its_value():
    m = IdentityMemo("ids", 4)
    t1, t2 = (1, 2), tuple([1, 2])
    assert m.of(t1, len, name="size") == 2
    assert m.of(t1, lambda _: 99, name="size") == 2     # the same object: cached
    assert m.of(t2, lambda _: 99, name="size") == 99    # an equal but distinct object: computed anew
    assert m.of(t1, lambda _: 7, name="other") == 7     # another name: another entry


def test_a_name_is_registered_once():
    BoundedMemo("dup")
    with pytest.raises(ValueError, match="dup"):
        BoundedMemo("dup")


def test_drain_all_empties_memos_valve_first_and_leaves_memoised_functions():
    calls = []

    @memoize("squares", maxsize=8)
    def square(x):
        calls.append(x)
        return x * x

    low, proof = BoundedMemo("low", rank=0), BoundedMemo("proof")
    low.put(1, 1)
    proof.put(2, 2)
    square(3)
    assert [m.name for m in caches.ranked()] == ["low"]
    assert caches.drain_all() == 2 and not low and not proof
    square(3)
    assert calls == [3]                     # still memoised
    assert caches.drain_all(functions=True) == 1
    square(3)
    assert calls == [3, 3]


def test_memory_valve_empty_all_walks_the_registry():
    m = BoundedMemo("data", rank=1)
    m.put("k", 1)
    assert memory.empty_all() == 1 and not m
