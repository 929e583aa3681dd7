"""Group key -> integer code, for the array-based aggregation state (`ops_agg_plain`).

`TupleKeys` is the general map: a dict from the group's key tuple to its code. `DenseIntKeys`
serves the most common case, one integer group key with non-negative values (surrogate keys
such as TPC-H's ``l_orderkey``), with an array indexed by key value: a batch's codes are one
numpy gather instead of a dict lookup per row. At SF1 grouped by ``l_orderkey`` (1.5M groups)
the dict lookups took ~2 ms of a 1,000-row step, from hashing tuples and cache misses. The
array holds at most ``_SPREAD`` slots per group (plus ``_SLACK``), 4 bytes each, less than the
dict's ~200 bytes per group; a key outside that (NULL, negative, too sparse, not an integer)
moves the index to `TupleKeys` for good (`PlainAggOp` does the move).

Both hand out codes densely, reusing released ones, so the state's arrays stay compact.
"""

from __future__ import annotations

from typing import Iterator, Optional

import numpy as np
import pandas as pd

from .frames import from_values, row_values

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


class DenseIntKeys:
    """One non-negative integer key: ``slot[value]`` is its code (-1: none), ``kv[code]`` its value."""

    def __init__(self):
        self.slot = np.full(0, -1, dtype=np.int32)
        self.kv = np.zeros(0, dtype=np.int64)
        self.alive = np.zeros(0, dtype=bool)
        self.n = 0          # codes handed out so far
        self.count = 0      # live keys
        self.free: list[int] = []

    def __len__(self) -> int:
        return self.count

    def __contains__(self, key: tuple) -> bool:
        if len(key) != 1 or type(key[0]) is not int or not 0 <= key[0] < len(self.slot):
            return False
        return bool(self.slot[key[0]] >= 0)

    def top(self) -> int:
        return self.n

    def key(self, c: int) -> tuple:
        return (int(self.kv[c]),)

    def live(self) -> np.ndarray:
        return np.flatnonzero(self.alive[:self.n])

    def items(self) -> Iterator[tuple[tuple, int]]:
        for c in self.live().tolist():
            yield (int(self.kv[c]),), c

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
            k = len(fresh)
            reuse = min(k, len(self.free))
            got = np.empty(k, dtype=np.int64)
            if reuse:
                got[:reuse] = [self.free.pop() for _ in range(reuse)]
            got[reuse:] = np.arange(self.n, self.n + k - reuse)
            self.n += k - reuse
            if self.n > len(self.kv):
                grow = max(self.n, 2 * len(self.kv), 1024) - len(self.kv)
                self.kv = np.concatenate([self.kv, np.zeros(grow, dtype=np.int64)])
                self.alive = np.concatenate([self.alive, np.zeros(grow, dtype=bool)])
            self.slot[fresh] = got
            self.kv[got] = fresh
            self.alive[got] = True
            self.count += k
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

    def release(self, dead: np.ndarray) -> None:
        self.slot[self.kv[dead]] = -1
        self.alive[dead] = False
        self.count -= len(dead)
        self.free.extend(dead.tolist())

    def key_columns(self, codes: np.ndarray, n_keys: int) -> list[pd.Series]:
        return [pd.Series(pd.arrays.IntegerArray(self.kv[codes], np.zeros(len(codes), dtype=bool)))]

    def nbytes(self) -> int:
        return self.slot.nbytes + self.kv.nbytes + self.alive.nbytes

    def to_tuples(self) -> TupleKeys:
        """The same codes in a `TupleKeys` (when a key stops fitting)."""
        t = TupleKeys()
        t.key_of = [None] * self.n
        for k, c in self.items():
            t.code[k] = c
            t.key_of[c] = k
        t.free = list(self.free)
        return t
