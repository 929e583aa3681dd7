"""Incremental join (digest §2.5) with bloom-filter pre-filtering of deltas (§4.4.2).

    d(L x R) = dL x R_old + L_old x dR + dL x dR

with multiplicities multiplied and annotations concatenated (relops.join). `L_old`/`R_old` (the
subtrees' outputs before the batch) come from the `BaseSide`, restricted by a `KeyFilter` to the
join keys present in the opposite delta. Using OLD on both sides plus the dL x dR term is the
form that is right whatever the base side holds; mixing "new" on both sides double counts.

Each side keeps a bloom filter over the equi-join keys of every row its subtree ever emitted
(inserts only: a bloom filter cannot delete; stale keys only cost a useless lookup). Before a
delta is joined with the other side's old rows, its rows whose key is certainly absent from the
other side are dropped, and when nothing is left the base side is not asked at all. The filters
are updated with the batch's own inserts first. Hashing is stable across processes (pandas'
`hash_array` over a canonical text form of the key: numbers as floats, so 1 and 1.0 agree), so a
persisted filter stays valid.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd

from advisor.plan import ir

from advisor.maintain import relops
from advisor.maintain.base_side import OLD, KeyFilter
from advisor.maintain.frames import M, consolidate, empty_frame, row_values
from advisor.maintain.operators.protocol import Ctx, Op

_HASHES = 3


def _token(v) -> str:
    if v is None:
        return "\x00"
    if isinstance(v, (bool, np.bool_)):
        return "n" + repr(float(v))
    if isinstance(v, (int, float, np.integer, np.floating)):
        return "n" + repr(float(v) + 0.0)
    if isinstance(v, pd.Timestamp):
        return "t" + v.isoformat()
    return "s" + str(v)


def key_hashes(keys: Sequence[tuple]) -> np.ndarray:
    """Stable 64-bit hashes of key tuples."""
    if not keys:
        return np.zeros(0, dtype=np.uint64)
    toks = np.array(["\x1f".join(_token(v) for v in k) for k in keys], dtype=object)
    return pd.util.hash_array(toks, categorize=False)


class KeyBloom:
    """A bloom filter over join-key tuples (3 hash functions, power-of-two bit count).

    Sized at the first insert (10 bits per key of the initial load, 2^13..2^24 bits); later
    growth only raises the false-positive rate, never produces false negatives."""

    def __init__(self):
        self.bits: Optional[np.ndarray] = None
        self.nbits = 0
        self.n_added = 0

    def _positions(self, h: np.ndarray) -> list[np.ndarray]:
        h1 = h & np.uint64(0xFFFFFFFF)
        h2 = (h >> np.uint64(32)) | np.uint64(1)
        mask = np.uint64(self.nbits - 1)
        return [(h1 + np.uint64(i) * h2) & mask for i in range(_HASHES)]

    def add(self, keys: Sequence[tuple]) -> None:
        keys = [k for k in keys if all(v is not None for v in k)]
        if not keys:
            return
        if self.bits is None:
            n = 1 << 13
            while n < 10 * len(keys) and n < (1 << 24):
                n <<= 1
            self.nbits = n
            self.bits = np.zeros(n // 8, dtype=np.uint8)
        for p in self._positions(key_hashes(keys)):
            np.bitwise_or.at(self.bits, (p >> np.uint64(3)).astype(np.int64),
                             (np.uint8(1) << (p & np.uint64(7)).astype(np.uint8)))
        self.n_added += len(keys)

    def might_contain(self, keys: Sequence[tuple]) -> np.ndarray:
        if self.bits is None or not len(keys):
            return np.zeros(len(keys), dtype=bool)
        ok = np.array([all(v is not None for v in k) for k in keys], dtype=bool)
        for p in self._positions(key_hashes(keys)):
            byte = self.bits[(p >> np.uint64(3)).astype(np.int64)]
            ok &= (byte & (np.uint8(1) << (p & np.uint64(7)).astype(np.uint8))) != 0
        return ok


class JoinOp(Op):
    def __init__(self, node: ir.Join, left: Op, right: Op, sketched, use_bloom: bool = True):
        super().__init__(node, [left, right], sketched)
        self.pairs = relops.equi_keys(node.cond, set(node.left.names), set(node.right.names))
        self.lkeys = [l for l, _ in self.pairs]
        self.rkeys = [r for _, r in self.pairs]
        self.use_bloom = use_bloom and bool(self.pairs)
        self.bloom_l = KeyBloom()   # keys ever emitted by the left subtree
        self.bloom_r = KeyBloom()

    def _join(self, a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
        l, r = self.children
        return relops.join(a, b, self.node.cond, self.node.left.names, self.node.right.names, l.sids, r.sids)

    def step(self, ctx: Ctx) -> pd.DataFrame:
        left, right = self.children
        dl, dr = left.step(ctx), right.step(ctx)
        kl = row_values(dl, self.lkeys) if self.pairs else []
        kr = row_values(dr, self.rkeys) if self.pairs else []
        if self.use_bloom:  # the batch's own inserts first, so dL x dR matches survive
            self.bloom_l.add([k for k, m in zip(kl, dl[M].tolist()) if m > 0])
            self.bloom_r.add([k for k, m in zip(kr, dr[M].tolist()) if m > 0])
        parts = []
        if len(dl):
            parts.append(self._with_old(ctx, dl, kl, self.bloom_r, right, self.rkeys, delta_left=True))
        if len(dr):
            parts.append(self._with_old(ctx, dr, kr, self.bloom_l, left, self.lkeys, delta_left=False))
        if len(dl) and len(dr):
            parts.append(self._join(dl, dr))
        parts = [p for p in parts if p is not None and len(p)]
        names = self.names
        if not parts:
            return empty_frame(names, self.sids)
        if len(parts) == 1:  # one term: nothing to cancel across terms (operators are linear in M)
            return parts[0]
        return consolidate(pd.concat(parts, ignore_index=True), names, self.sids)

    def _with_old(self, ctx: Ctx, delta: pd.DataFrame, dkeys: list, bloom: KeyBloom, other: Op,
                  okeys: list[str], delta_left: bool) -> Optional[pd.DataFrame]:
        """delta x other_old, after dropping delta rows whose key the other side never had."""
        keys = None
        if self.pairs:
            if self.use_bloom:
                hit = bloom.might_contain(dkeys)
                ctx.bump("bloom_dropped", int((~hit).sum()))
                if not hit.any():
                    return None
                delta = delta[hit].reset_index(drop=True)
                dkeys = [k for k, h in zip(dkeys, hit) if h]
            live = frozenset(k for k in dkeys if all(v is not None for v in k))
            if not live:
                return None
            keys = KeyFilter(tuple(okeys), live)
        old = ctx.fetch(other.node, OLD, keys)
        if not len(old):
            return None
        return self._join(delta, old) if delta_left else self._join(old, delta)

    def snapshot(self):
        return None  # bloom filters legitimately keep stale keys

    def state_bytes(self) -> int:
        return sum(b.bits.nbytes for b in (self.bloom_l, self.bloom_r) if b.bits is not None)
