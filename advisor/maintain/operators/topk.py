"""Incremental top-k with a top-l buffer (digest §2.8 and its buffer variant).

State: `buf`, a map annotated tuple (values, annotation) -> multiplicity holding a *prefix* of the
input bag in ir.TopK's total order (`frames.topk_sort_key`), plus `n_total`, the multiplicity of
the whole input, and `complete` (the buffer holds the whole input).

Per batch, with `last` = the greatest buffered entry before the batch:
* an input change of an entry <= `last` (or any change while complete) is applied to the buffer;
  changes beyond `last` only change `n_total` - the buffer stays exactly "all input <= last";
* the buffer is then trimmed back to about `l` (whole entries; it keeps >= l copies);
* if it is incomplete and holds fewer than k copies, the true top-k is unknown: the operator
  refills the buffer from its input's full current output (`BaseSide.rows(child, NEW)`, a local
  recapture, counted in stats["topk_refills"]) or, with `on_exhausted="raise"`, raises
  `NeedsRecapture`.

Output: the difference between the old and the new top-k (entries whose top-k multiplicity
changed, with the signed change). The digest's operator emits "delete all old, insert all new";
the merge sees the same net counts, so emitting only the net change is equivalent and cheaper.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.plan import ir

from advisor.maintain.base_side import NEW
from advisor.maintain.frames import M, annotations, frame_from_rows, row_values, topk_sort_key, topk_tuple_key
from advisor.maintain.operators.protocol import Ctx, MaintenanceError, NeedsRecapture, Op, state_size


def default_buffer(k: int) -> int:
    """Default l: twice k, but at least k + 100 (cheap insurance against refills for small k)."""
    return max(2 * k, k + 100)


class TopKOp(Op):
    def __init__(self, node: ir.TopK, child: Op, sketched, buffer: int | None = None,
                 on_exhausted: str = "refill"):
        super().__init__(node, [child], sketched)
        if on_exhausted not in ("refill", "raise"):
            raise ValueError("on_exhausted must be 'refill' or 'raise'")
        self.k = node.k
        self.l = max(buffer if buffer is not None else default_buffer(node.k), node.k)
        self.on_exhausted = on_exhausted
        self.buf: dict[tuple, int] = {}
        self.n_total = 0
        self.complete = True
        self.refills = 0
        self.bad = False  # set when a batch deleted entries the buffer did not hold

    def _key(self):
        return topk_sort_key(self.names, self.node.order)

    def _sorted(self) -> list[tuple]:
        try:
            return sorted(self.buf, key=topk_tuple_key(self.names, self.node.order))
        except TypeError:  # incomparable values: the comparison function orders them by type
            return sorted(self.buf, key=self._key())

    def _after(self, last: tuple, e: tuple, fast) -> bool:
        """Entry `e` sorts strictly after entry `last` (`fast`: this operator's `topk_tuple_key`)."""
        try:
            return fast(last) < fast(e)
        except TypeError:
            key = self._key()
            return key(last) < key(e)

    def _topk(self, entries: list[tuple]) -> dict[tuple, int]:
        out, taken = {}, 0
        for e in entries:
            if taken >= self.k:
                break
            take = min(self.buf[e], self.k - taken)
            out[e] = take
            taken += take
        return out

    def step(self, ctx: Ctx) -> pd.DataFrame:
        d = self.children[0].step(ctx)
        before = getattr(self, "order", None)   # the buffer sorted, kept from the last batch
        if before is None:
            before = self._sorted()
        old_top = self._topk(before)
        self.order = None
        if len(d):
            self._absorb(d, before)
            self._settle(ctx)
        if self.order is None:
            self.order = before if not len(d) else self._sorted()
        new_top = self._topk(self.order)
        rows, mults, anns = [], [], []
        for e in set(old_top) | set(new_top):
            diff = new_top.get(e, 0) - old_top.get(e, 0)
            if diff:
                rows.append(e[0]); anns.append(e[1]); mults.append(diff)
        return frame_from_rows(self.names, rows, mults, self.sids, anns)

    def _absorb(self, d: pd.DataFrame, before: list[tuple]) -> None:
        last = before[-1] if before else None
        if last is not None and not self.complete:
            d = self._drop_beyond(d, last)
        d = self._drop_trimmed(d)
        acc: dict[tuple, int] = {}
        for e, m in zip(zip(row_values(d, self.names), annotations(d, self.sids)), d[M].tolist()):
            acc[e] = acc.get(e, 0) + m
        self.bad = False
        beyond = self._beyond(before[-1]) if before and not self.complete else None
        fast = topk_tuple_key(self.names, self.node.order)  # built once per batch, not per entry
        for e, m in acc.items():
            if m == 0:
                continue
            self.n_total += m
            if beyond is not None and beyond(e):
                continue
            if self.complete or (last is not None and not self._after(last, e, fast)):
                c = self.buf.get(e, 0) + m
                if c > 0:
                    self.buf[e] = c
                else:
                    self.buf.pop(e, None)
                    if c < 0:
                        self.bad = True  # deleted more copies than the prefix holds: state is off
        if self.n_total < 0:
            raise MaintenanceError("top-k input lost more rows than it had")

    def _drop_beyond(self, d: pd.DataFrame, last: tuple) -> pd.DataFrame:
        """Count, in numpy, the rows that sort strictly after `last` by the first order key (a
        plain number on both sides) into `n_total` and drop them: an incomplete buffer ignores
        them anyway (``_beyond``), and most of a batch's changes lie there."""
        if not self.node.order:
            return d
        name, asc = self.node.order[0]
        lv = last[0][self.names.index(name)]
        col = d[name]
        if type(lv) not in (int, float) or lv != lv or col.dtype.kind not in "iuf":
            return d
        beyond = (col > lv) if asc else (col < lv)
        beyond = beyond.fillna(False).to_numpy(dtype=bool) if hasattr(beyond, "fillna") else beyond
        if not beyond.any():
            return d
        self.n_total += int(d[M].to_numpy()[beyond].sum())
        return d[~beyond].reset_index(drop=True)

    def _drop_trimmed(self, d: pd.DataFrame) -> pd.DataFrame:
        """Count into `n_total` and drop, in numpy, the rows of an insert-only batch that sort
        strictly after `l` of the batch's own copies by the first order key: the trim after this
        batch would drop them anyway, as at least `l` copies precede them.  A state's first batch
        is every group of the aggregation below (SF1: 830k groups for a top-20); sorting them in
        Python took 12 of a 28 s initialisation.  The first key is compared as float64, whose
        rounding keeps the order (never reverses it), so "strictly after" in floats is strictly
        after in the exact values; NULLs and non-numbers are kept."""
        if len(d) <= 2 * self.l or not self.node.order:
            return d
        m = d[M].to_numpy(dtype=np.int64)
        if (m <= 0).any():
            return d
        name, asc = self.node.order[0]
        col = d[name]
        if col.dtype.kind not in "iuf" and (col.dtype != object or pd.api.types.infer_dtype(col, skipna=True)
                                             not in ("integer", "floating", "decimal", "mixed-integer-float")):
            return d  # strings such as '10' would convert to numbers and order wrongly
        try:
            v = pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError, OverflowError):
            return d
        s = v if asc else -v
        ok = ~np.isnan(s)
        order = np.argsort(s[ok], kind="stable")
        cum = np.cumsum(m[ok][order])
        at = int(np.searchsorted(cum, self.l))
        if at >= len(cum):
            return d
        drop = np.zeros(len(d), dtype=bool)
        drop[ok] = s[ok] > s[ok][order][at]
        if not drop.any():
            return d
        self.n_total += int(m[drop].sum())
        return d[~drop].reset_index(drop=True)

    def _beyond(self, last: tuple):
        """A cheap test that an entry sorts strictly after `last` by the first order key alone
        (both values plain numbers); False means "compare in full", never "not beyond"."""
        if not self.node.order:
            return None
        name, asc = self.node.order[0]
        p = self.names.index(name)
        lv = last[0][p]
        if type(lv) not in (int, float):
            return None
        if asc:
            return lambda e: type(e[0][p]) in (int, float) and e[0][p] > lv
        return lambda e: type(e[0][p]) in (int, float) and e[0][p] < lv

    def _settle(self, ctx: Ctx) -> None:
        held = sum(self.buf.values())
        self.complete = held == self.n_total
        if self.bad or (not self.complete and held < self.k):
            if self.on_exhausted == "raise":
                raise NeedsRecapture(f"top-{self.k} buffer exhausted ({held} of {self.n_total} rows held)")
            self._refill(ctx)
        self._trim()

    def _refill(self, ctx: Ctx) -> None:
        full = ctx.fetch(self.children[0].node, NEW)
        self.buf = {}
        for e, m in zip(zip(row_values(full, self.names), annotations(full, self.sids)), full[M].tolist()):
            self.buf[e] = self.buf.get(e, 0) + m
        self.buf = {e: m for e, m in self.buf.items() if m > 0}
        self.n_total = sum(self.buf.values())
        self.complete = True
        self.refills += 1
        ctx.bump("topk_refills")

    def _trim(self) -> None:
        """Keep about `l` copies (whole entries) and remember the buffer's order (`order`)."""
        entries = self._sorted()
        keep, held = {}, 0
        for e in entries:
            if held >= self.l:
                break
            keep[e] = self.buf[e]
            held += self.buf[e]
        if len(keep) < len(entries):
            self.buf = keep
            self.complete = False
            entries = entries[:len(keep)]
        self.order = entries

    def snapshot(self):
        """The current top-k (entry -> multiplicity); the buffer itself depends on the history."""
        return {"topk": self._topk(self._sorted())}

    def state_bytes(self) -> int:
        return state_size(self.buf)
