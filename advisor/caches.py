"""Bounded in-process memos, and the one registry that holds them all.

Every module-level cache of the product is a ``BoundedMemo`` (an ``OrderedDict`` bounded by entries
and, optionally, by bytes) or a function wrapped by ``memoize`` (``functools.lru_cache``), and each
registers itself here by name.  Two readers walk the registry: the driver memory valve
(``advisor.memory``) drops entries of the memos that carry a ``rank`` while the process is over its
budget, and a replay's warm-up empties everything (``drain_all``) so that timed steps start with
a warm JVM but no cached data.  No module touches another module's memo except through this
registry or the owner's public functions.

>>> m = BoundedMemo("example: squares", max_entries=2)
>>> for i in range(3):
...     m.put(i, i * i)
>>> list(m.items())
[(1, 1), (2, 4)]
>>> m.shrink(), list(m)
(True, [2])
>>> "example: squares" in names()
True
>>> unregister("example: squares")
"""

from __future__ import annotations

import contextlib
import functools
from collections import OrderedDict
from typing import Any, Callable, Optional

_REGISTRY: dict[str, "BoundedMemo | _FunctionMemo"] = {}


class BoundedMemo(OrderedDict):
    """An ``OrderedDict`` kept oldest first, bounded by ``max_entries`` and by ``max_bytes``
    (summed ``size_of(value)``); ``put`` inserts as newest and evicts the oldest beyond either
    bound, always keeping the newest entry.  ``on_evict(key, value)`` runs for every evicted entry
    (a write-behind cache writes its file there).  ``rank``: the memory valve drops memos of lower
    rank first; None keeps the memo out of the valve (small proof and verdict memos)."""

    def __init__(self, name: str, max_entries: Optional[int] = None, *, max_bytes: Optional[int] = None,
                 size_of: Optional[Callable[[Any], int]] = None, rank: Optional[int] = None,
                 on_evict: Optional[Callable[[Any, Any], None]] = None, keep_one: bool = True):
        super().__init__()
        self.name, self.max_entries, self.max_bytes = name, max_entries, max_bytes
        self.size_of, self.rank, self.on_evict, self.keep_one = size_of, rank, on_evict, keep_one
        register(self)

    def put(self, key, value) -> None:
        """Insert (or refresh) ``key`` as the newest entry, then evict down to the bounds."""
        self[key] = value
        self.move_to_end(key)
        self.evict()

    def over(self) -> bool:
        """Is the memo above one of its bounds?"""
        floor = 1 if self.keep_one else 0
        if self.max_entries is not None and len(self) > max(self.max_entries, floor):
            return True
        if self.max_bytes is not None and len(self) > floor:
            return sum(self.size_of(v) for v in self.values()) > self.max_bytes
        return False

    def evict(self) -> int:
        """Drop the oldest entries while the memo is over a bound; returns how many."""
        n = 0
        while self.over():
            self.shrink()
            n += 1
        return n

    def shrink(self) -> bool:
        """Drop the oldest entry (``on_evict`` sees it); False when the memo is empty."""
        if not self:
            return False
        key, value = self.popitem(last=False)
        if self.on_evict is not None:
            self.on_evict(key, value)
        return True

    def drain(self) -> int:
        """Drop every entry, oldest first; returns how many."""
        n = 0
        while self.shrink():
            n += 1
        return n


class IdentityMemo(BoundedMemo):
    """``make(obj)`` memoised by the identity of an immutable ``obj`` (tuples of units, boundary
    lists): hashing such an object would cost what the memo saves.  Each entry keeps its object
    alive, so its id cannot be reused while it is cached.  First in, first out.

    >>> m = IdentityMemo("example: lengths", 8)
    >>> t = (1, 2, 3)
    >>> m.of(t, len, "size"), m.of(t, lambda _: -1, "size"), m.of((1, 2, 3), lambda _: -1, "size")
    (3, 3, -1)
    >>> unregister("example: lengths")
    """

    def of(self, obj, make, name: Optional[str] = None):
        """``make(obj)``, cached under ``name`` (default: the function's name) and ``obj``'s id."""
        name = name or make.__name__
        hit = self.get((name, id(obj)))
        if hit is not None and hit[0] is obj:
            return hit[1]
        return self.remember(name, obj, make(obj))

    def remember(self, name: str, obj, value):
        """Enter ``value`` as what ``name`` makes of ``obj``; returns it."""
        self.put((name, id(obj)), (obj, value))
        return value


class _FunctionMemo:
    """A ``functools.lru_cache``'d function as a registry entry."""

    def __init__(self, name: str, fn, rank: Optional[int]):
        self.name, self.fn, self.rank = name, fn, rank

    def __len__(self) -> int:
        return self.fn.cache_info().currsize

    def shrink(self) -> bool:
        if not len(self):
            return False
        self.fn.cache_clear()
        return True

    def drain(self) -> int:
        n = len(self)
        self.fn.cache_clear()
        return n


def memoize(name: str, maxsize: int, rank: Optional[int] = None):
    """``functools.lru_cache(maxsize)`` for a function, registered under ``name``.

    >>> @memoize("example: cube", maxsize=4)
    ... def cube(x):
    ...     return x ** 3
    >>> cube(3), len(_REGISTRY["example: cube"])
    (27, 1)
    >>> unregister("example: cube")
    """
    def wrap(fn):
        cached = functools.lru_cache(maxsize=maxsize)(fn)
        register(_FunctionMemo(name, cached, rank))
        return cached
    return wrap


def register(memo) -> None:
    """Enter ``memo`` under its name (a second memo of one name is a programming error)."""
    if memo.name in _REGISTRY and _REGISTRY[memo.name] is not memo:
        raise ValueError(f"a memo named {memo.name!r} is registered already")
    _REGISTRY[memo.name] = memo


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def names() -> list[str]:
    """The registered memos' names, sorted."""
    return sorted(_REGISTRY)


def ranked() -> list:
    """The memos the memory valve may shrink, lowest rank first."""
    return sorted((m for m in _REGISTRY.values() if m.rank is not None), key=lambda m: m.rank)


def entries() -> int:
    """Entries held by all registered memos."""
    return sum(len(m) for m in _REGISTRY.values())


@contextlib.contextmanager
def isolated():
    """Run with an empty registry, restored afterwards (tests: the process's real memos stay out
    of the counts)."""
    saved = dict(_REGISTRY)
    _REGISTRY.clear()
    try:
        yield
    finally:
        _REGISTRY.clear()
        _REGISTRY.update(saved)


def drain_all(functions: bool = False) -> int:
    """Empty every registered ``BoundedMemo``, the valve's lowest rank first; returns the entries
    dropped.  Memoised functions (``memoize``) are keyed by what they read (file stamps, boundary
    tuples), so they stay valid and are emptied only with ``functions``."""
    rest = [m for m in _REGISTRY.values() if m.rank is None]
    return sum(m.drain() for m in ranked() + rest if functions or isinstance(m, BoundedMemo))
