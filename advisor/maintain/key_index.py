"""Group key -> integer code, for the array-based aggregation state (`ops_agg_plain`).

`TupleKeys` is the general map: a dict from the group's key tuple to its code. `DenseIntKeys`
serves the most common case, one integer group key with non-negative values (surrogate keys
such as TPC-H's ``l_orderkey``), with an array indexed by key value: a batch's codes are one
numpy gather instead of a dict lookup per row. At SF1 grouped by ``l_orderkey`` (1.5M groups)
the dict lookups took ~2 ms of a 1,000-row step, from hashing tuples and cache misses. The
array holds at most ``_SPREAD`` slots per group (plus ``_SLACK``), 4 bytes each, less than the
dict's ~200 bytes per group. `PackedIntKeys` serves several non-negative integer keys, packed
into one int64 and found by binary search in a sorted array; it also takes over one integer key
too sparse for `DenseIntKeys`' slots. A key outside what an array index holds (NULL, negative,
too wide, not an integer) moves it to `TupleKeys` for good (``widened``; `PlainAggOp` does the move).

All hand out codes densely, reusing released ones, so the state's arrays stay compact.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Iterator, Optional

import numpy as np
import pandas as pd

from advisor.maintain.frames import from_values, row_values

_SPREAD = 8
_SLACK = 1 << 20


class TupleKeys:
    """Any group keys: a dict key tuple -> code, the key of each code, freed codes."""

    def __init__(self):
        self.code: dict[tuple, int] = {}
        self.key_of: list = []
        self.free: list[int] = []

    def __len__(self) -> int:
        return len(self.code)

    def __contains__(self, key: tuple) -> bool:
        return key in self.code

    def top(self) -> int:
        """One past the highest code ever handed out (the state arrays' needed length)."""
        return len(self.key_of)

    def key(self, c: int) -> tuple:
        return self.key_of[c]

    def items(self) -> Iterator[tuple[tuple, int]]:
        return iter(self.code.items())

    def live(self) -> np.ndarray:
        return np.fromiter(self.code.values(), dtype=np.int64, count=len(self.code))

    def codes(self, keys: list[tuple]) -> np.ndarray:
        """The code of every key, allocating codes (reusing freed ones) for keys not seen yet."""
        code = self.code
        get = code.get
        cl = [get(k) for k in keys]
        if None in cl:
            for i, c in enumerate(cl):
                if c is None:
                    k = keys[i]
                    c = code.get(k)  # a key new in this batch may repeat
                    if c is None:
                        if self.free:
                            c = self.free.pop()
                            self.key_of[c] = k
                        else:
                            c = len(self.key_of)
                            self.key_of.append(k)
                        code[k] = c
                    cl[i] = c
        return np.array(cl, dtype=np.int64)

    def frame_codes(self, d: pd.DataFrame, cols: list[str]) -> Optional[np.ndarray]:
        return self.codes(row_values(d, cols))

    def release(self, dead: np.ndarray) -> None:
        for c in dead.tolist():
            del self.code[self.key_of[c]]
            self.key_of[c] = None
            self.free.append(c)

    def key_columns(self, codes: np.ndarray, n_keys: int) -> list[pd.Series]:
        keys = [self.key_of[c] for c in codes.tolist()]
        return [from_values([key[i] for key in keys]) for i in range(n_keys)]

    def nbytes(self) -> int:
        return 200 * len(self.code)  # tuple, dict slot, list slot: estimated, not walked


class _ArrayKeys(ABC):
    """What the array-backed indexes share: codes handed out densely (freed ones reused first, in
    the order `TupleKeys` reuses them), a live flag per code, and the move to `TupleKeys`."""

    n: int
    count: int
    free: list
    alive: np.ndarray

    def __len__(self) -> int:
        return self.count

    def top(self) -> int:
        """One past the highest code ever handed out (the state arrays' needed length)."""
        return self.n

    def live(self) -> np.ndarray:
        return np.flatnonzero(self.alive[:self.n])

    def items(self) -> Iterator[tuple[tuple, int]]:
        for c in self.live().tolist():
            yield self.key(c), c

    def _allocate(self, k: int) -> np.ndarray:
        """``k`` new codes (freed ones first), with `_grow_to` making room for them."""
        reuse = min(k, len(self.free))
        got = np.empty(k, dtype=np.int64)
        if reuse:
            got[:reuse] = [self.free.pop() for _ in range(reuse)]
        got[reuse:] = np.arange(self.n, self.n + k - reuse)
        self.n += k - reuse
        if self.n > len(self.alive):
            grow = max(self.n, 2 * len(self.alive), 1024) - len(self.alive)
            self.alive = np.concatenate([self.alive, np.zeros(grow, dtype=bool)])
            self._grow_to(len(self.alive))
        self.alive[got] = True
        self.count += k
        return got

    @abstractmethod
    def _grow_to(self, cap: int) -> None:
        """Lengthen the per-code key storage to ``cap`` codes."""

    @abstractmethod
    def key(self, c: int) -> tuple:
        """The key tuple of code ``c``."""

    def widened(self) -> "PackedIntKeys | TupleKeys":
        """The next more general index holding the same codes (when a key stops fitting)."""
        return self.to_tuples()

    def to_tuples(self) -> TupleKeys:
        """The same codes in a `TupleKeys` (when a key stops fitting)."""
        t = TupleKeys()
        t.key_of = [None] * self.n
        for k, c in self.items():
            t.code[k] = c
            t.key_of[c] = k
        t.free = list(self.free)
        return t


class DenseIntKeys(_ArrayKeys):
    """One non-negative integer key: ``slot[value]`` is its code (-1: none), ``kv[code]`` its value."""

    def __init__(self):
        self.slot = np.full(0, -1, dtype=np.int32)
        self.kv = np.zeros(0, dtype=np.int64)
        self.alive = np.zeros(0, dtype=bool)
        self.n = 0          # codes handed out so far
        self.count = 0      # live keys
        self.free: list[int] = []

    def __contains__(self, key: tuple) -> bool:
        if len(key) != 1 or type(key[0]) is not int or not 0 <= key[0] < len(self.slot):
            return False
        return bool(self.slot[key[0]] >= 0)

    def key(self, c: int) -> tuple:
        return (int(self.kv[c]),)

    def _grow_to(self, cap: int) -> None:
        self.kv = np.concatenate([self.kv, np.zeros(cap - len(self.kv), dtype=np.int64)])

    def fits(self, vals: np.ndarray) -> bool:
        """Can these key values live in the array (non-negative, dense enough)?"""
        if not len(vals):
            return True
        lo, hi = int(vals.min()), int(vals.max())
        return lo >= 0 and hi < max(len(self.slot), _SPREAD * (self.count + len(vals)) + _SLACK)

    def codes_of(self, vals: np.ndarray) -> np.ndarray:
        """Codes of the int64 key values `vals` (which `fits`), allocating new ones."""
        if not len(vals):
            return np.zeros(0, dtype=np.int64)
        hi = int(vals.max())
        if hi >= len(self.slot):
            grow = max(hi + 1, 2 * len(self.slot)) - len(self.slot)
            self.slot = np.concatenate([self.slot, np.full(grow, -1, dtype=np.int32)])
        c = self.slot[vals].astype(np.int64)
        new = c < 0
        if new.any():
            nv = vals[new]
            _, first = np.unique(nv, return_index=True)
            fresh = nv[np.sort(first)]  # in order of first appearance, as `TupleKeys` allocates
            got = self._allocate(len(fresh))
            self.slot[fresh] = got
            self.kv[got] = fresh
            c = self.slot[vals].astype(np.int64)
        return c

    def codes(self, keys: list[tuple]) -> Optional[np.ndarray]:
        """Codes of key tuples, or None if they do not fit (the caller moves to `TupleKeys`)."""
        if any(len(k) != 1 or type(k[0]) is not int for k in keys):
            return None
        vals = np.fromiter((k[0] for k in keys), dtype=np.int64, count=len(keys))
        return self.codes_of(vals) if self.fits(vals) else None

    def frame_codes(self, d: pd.DataFrame, cols: list[str]) -> Optional[np.ndarray]:
        """Codes of the frame's key column, or None if it is not a NULL-free fitting Int64 column."""
        s = d[cols[0]]
        if str(s.dtype) != "Int64" or s.isna().any():
            return None
        vals = s.to_numpy(dtype=np.int64)
        return self.codes_of(vals) if self.fits(vals) else None

    def widened(self) -> "PackedIntKeys":
        """The same codes in a one-column `PackedIntKeys`: keys too sparse for the slot array (new
        orders keyed far above the generated ones) are found by binary search instead, where the
        move to `TupleKeys` built 1.5M Python tuples (1.9 s at TPC-H SF1) and slowed every later step."""
        p = PackedIntKeys(1)
        live = self.live()
        vals = self.kv[live]
        order = np.argsort(vals, kind="stable")
        p.width = [max(1, int(vals.max()).bit_length()) if len(vals) else 1]
        p.sk, p.sc = vals[order], live[order]
        p.kv = self.kv[:self.n].reshape(1, -1).copy()
        p.alive, p.n, p.count, p.free = self.alive.copy(), self.n, self.count, list(self.free)
        p._grow_to(len(p.alive))
        return p

    def release(self, dead: np.ndarray) -> None:
        self.slot[self.kv[dead]] = -1
        self.alive[dead] = False
        self.count -= len(dead)
        self.free.extend(dead.tolist())

    def key_columns(self, codes: np.ndarray, n_keys: int) -> list[pd.Series]:
        return [pd.Series(pd.arrays.IntegerArray(self.kv[codes], np.zeros(len(codes), dtype=bool)))]

    def nbytes(self) -> int:
        return self.slot.nbytes + self.kv.nbytes + self.alive.nbytes


_MAX_BITS = 62  # packed keys stay non-negative int64 values


class PackedIntKeys(_ArrayKeys):
    """Two or more non-negative integer keys (TPC-H's ``(l_partkey, l_linenumber)``), packed into
    one int64 of bit fields and found by binary search in a sorted array.  Why: the dict of
    `TupleKeys` costs ~200 bytes and a pickled tuple per group; at SF1's ~1.3M (part, line number)
    groups the state was sized at 352 MB, copying it for a derivation took 0.9 s and writing and
    reading it 1.0 and 0.8 s, so a 1 GB state cache held two such chains.  Here a group
    costs 8 bytes per key column plus 17.  ``width[i]`` bits hold column i (the last column lowest);
    a larger value widens the fields and repacks, and keys needing more than 62 bits, NULLs,
    negatives or non-integers are refused so the caller moves to `TupleKeys`."""

    def __init__(self, n_cols: int):
        self.width = [1] * n_cols
        self.sk = np.zeros(0, dtype=np.int64)            # packed keys, sorted
        self.sc = np.zeros(0, dtype=np.int64)            # the code of each packed key
        self.kv = np.zeros((n_cols, 0), dtype=np.int64)  # code -> its key's column values
        self.alive = np.zeros(0, dtype=bool)
        self.n = 0          # codes handed out so far
        self.count = 0      # live keys
        self.free: list[int] = []

    def __contains__(self, key: tuple) -> bool:
        if len(key) != len(self.width) or any(type(v) is not int or v < 0 for v in key):
            return False
        if any(v.bit_length() > w for v, w in zip(key, self.width)):
            return False
        return bool(self._find(self._pack([np.array([v], dtype=np.int64) for v in key]))[0] >= 0)

    def key(self, c: int) -> tuple:
        return tuple(int(v) for v in self.kv[:, c])

    def _grow_to(self, cap: int) -> None:
        pad = np.zeros((len(self.width), cap - self.kv.shape[1]), dtype=np.int64)
        self.kv = np.concatenate([self.kv, pad], axis=1)

    def _pack(self, cols: list[np.ndarray], width: Optional[list[int]] = None) -> np.ndarray:
        out = np.zeros(len(cols[0]), dtype=np.int64)
        shift = 0
        for v, w in zip(reversed(cols), reversed(width or self.width)):
            out |= v << shift
            shift += w
        return out

    def _find(self, packed: np.ndarray) -> np.ndarray:
        """Each packed key's code, -1 where absent."""
        if not len(self.sk):
            return np.full(len(packed), -1, dtype=np.int64)
        i = np.minimum(np.searchsorted(self.sk, packed), len(self.sk) - 1)
        return np.where(self.sk[i] == packed, self.sc[i], -1)

    def fit(self, cols: list[np.ndarray]) -> bool:
        """Make room for these key columns (widening the fields and repacking if they must);
        False if they cannot be packed."""
        if not len(cols[0]):
            return True
        if any(int(v.min()) < 0 for v in cols):
            return False
        need = [max(w, int(v.max()).bit_length()) for v, w in zip(cols, self.width)]
        if sum(need) > _MAX_BITS:
            return False
        if need != self.width:
            live = self.live()
            packed = self._pack([k[live] for k in self.kv], need)
            order = np.argsort(packed, kind="stable")
            self.sk, self.sc, self.width = packed[order], live[order], need
        return True

    def codes_of(self, cols: list[np.ndarray]) -> np.ndarray:
        """Codes of the key columns (after `fit`), allocating new ones in order of first
        appearance and reusing freed ones, as `TupleKeys` does."""
        if not len(cols[0]):
            return np.zeros(0, dtype=np.int64)
        packed = self._pack(cols)
        c = self._find(packed)
        new = c < 0
        if not new.any():
            return c
        nv = packed[new]
        _, first = np.unique(nv, return_index=True)
        first = np.sort(first)
        fresh = nv[first]
        got = self._allocate(len(fresh))
        for i, v in enumerate(cols):
            self.kv[i, got] = v[new][first]
        order = np.argsort(fresh)
        pos = np.searchsorted(self.sk, fresh[order])
        self.sk = np.insert(self.sk, pos, fresh[order])
        self.sc = np.insert(self.sc, pos, got[order])
        return self._find(packed)

    def codes(self, keys: list[tuple]) -> Optional[np.ndarray]:
        """Codes of key tuples, or None if they do not fit (the caller moves to `TupleKeys`)."""
        n = len(self.width)
        if any(len(k) != n or any(type(v) is not int for v in k) for k in keys):
            return None
        try:
            cols = [np.fromiter((k[i] for k in keys), dtype=np.int64, count=len(keys)) for i in range(n)]
        except OverflowError:
            return None
        return self.codes_of(cols) if self.fit(cols) else None

    def frame_codes(self, d: pd.DataFrame, cols: list[str]) -> Optional[np.ndarray]:
        """Codes of the frame's key columns, or None unless all are NULL-free fitting Int64 columns."""
        ss = [d[c] for c in cols]
        if any(str(s.dtype) != "Int64" or s.isna().any() for s in ss):
            return None
        vals = [s.to_numpy(dtype=np.int64) for s in ss]
        return self.codes_of(vals) if self.fit(vals) else None

    def release(self, dead: np.ndarray) -> None:
        if not len(dead):
            return
        pos = np.searchsorted(self.sk, self._pack([k[dead] for k in self.kv]))
        self.sk = np.delete(self.sk, pos)
        self.sc = np.delete(self.sc, pos)
        self.alive[dead] = False
        self.count -= len(dead)
        self.free.extend(dead.tolist())

    def key_columns(self, codes: np.ndarray, n_keys: int) -> list[pd.Series]:
        return [pd.Series(pd.arrays.IntegerArray(k[codes], np.zeros(len(codes), dtype=bool))) for k in self.kv]

    def nbytes(self) -> int:
        return self.sk.nbytes + self.sc.nbytes + self.kv.nbytes + self.alive.nbytes
