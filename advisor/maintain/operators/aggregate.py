"""Incremental aggregation and duplicate elimination (digest §2.6, §2.7).

State per group g (a tuple of grouping values):

* `cnt`: total multiplicity of the group's input rows (count(*); the group exists while > 0);
* per aggregate: `nn` (multiplicity of non-NULL argument values), `sum` (exact running sum of
  value x multiplicity, for sum/avg), and for min/max and DISTINCT aggregates a multiset
  `vals: value -> multiplicity` with a cached extreme for min/max (recomputed only when the
  extreme's count drops to 0);
* per sketched scan below: `F: fragment -> number of input rows (with multiplicity) whose
  annotation contains the fragment`. The group's sketch is {f | F[f] > 0} - its lineage, shared by
  all aggregates (for min/max too: plain bit-or over the group, matching capture).

For every group touched by a batch the operator emits `-(old row, old sketch)` if the group
existed and `+(new row, new sketch)` if it still exists; nothing when both are identical. A global
aggregate (no grouping attributes) always has exactly one row, as in SQL, and is never dropped.
DISTINCT is the same operator with all attributes as grouping keys and no aggregates.

The engine builds this operator only where a multiset is needed (MIN/MAX, DISTINCT aggregates).
COUNT/SUM/AVG aggregations and DISTINCT run in ``ops_agg_plain.PlainAggOp``, the same rule with
the state in arrays; states pickled before it existed still load as this class.
"""

from __future__ import annotations

from typing import Optional

import pandas as pd

from advisor.errors import Unsupported
from advisor.plan import ir

from advisor.maintain import exprs
from advisor.maintain.decimals import decimal_type, spark_avg, spark_sum, unscaled
from advisor.maintain.frames import M, annotations, column_values, frame_from_rows, row_values
from advisor.maintain.operators.protocol import Ctx, MaintenanceError, Op, state_size


class _Group:
    __slots__ = ("cnt", "nn", "sum", "vals", "ext", "F", "ann", "chg")

    def __init__(self, n_aggs: int, n_sids: int, multiset: list[bool]):
        self.cnt = 0
        self.nn = [0] * n_aggs
        self.sum: list = [0] * n_aggs
        self.vals: list[Optional[dict]] = [({} if ms else None) for ms in multiset]
        self.ext: list = [None] * n_aggs
        self.F: list[dict] = [{} for _ in range(n_sids)]
        self.ann = None  # cached annotation (frozensets of F's keys); None: build from F
        self.chg = None  # per sid, fragments that entered or left since `ann` was built

    def __getstate__(self):
        return (self.cnt, self.nn, self.sum, self.vals, self.ext, self.F)

    def __setstate__(self, st):
        self.cnt, self.nn, self.sum, self.vals, self.ext, self.F = st
        self.ann = self.chg = None

    def flipped(self, j: int, f: int) -> None:
        """Fragment `f` of scan `j` entered or left the group's sketch (or went back)."""
        if self.ann is not None:
            if self.chg is None:
                self.chg = [set() for _ in self.F]
            self.chg[j].add(f)

    def annotation(self) -> tuple:
        """The group's sketch per scan: fragments with a positive count. Cached; after fragments
        enter or leave, the cached sets are edited with C set operations instead of rebuilt from
        the counts (a count may dip below zero in the middle of a batch)."""
        if self.ann is None:
            self.ann = tuple(frozenset(f for f, c in F.items() if c > 0) for F in self.F)
            self.chg = None
        elif self.chg is not None:
            new = []
            for A, F, ch in zip(self.ann, self.F, self.chg):
                if ch:
                    add = {f for f in ch if F.get(f, 0) > 0}
                    A = (A - ch) | add
                new.append(A)
            self.ann, self.chg = tuple(new), None
        return self.ann


class AggOp(Op):
    """gamma_{aggs; keys}; with aggs=[] and keys=all attributes it is DISTINCT."""

    def __init__(self, node: ir.Node, child: Op, sketched, keys: list[str], aggs: list[ir.AggCall]):
        super().__init__(node, [child], sketched)
        for a in aggs:
            if a.func not in ("count", "sum", "avg", "min", "max"):
                raise Unsupported(f"aggregate {a.func} is not supported by incremental maintenance")
            if a.arg is None and a.func != "count":
                raise Unsupported(f"{a.func}(*) is not an aggregate")
        self.keys = list(keys)
        self.aggs = list(aggs)
        self.multiset = [a.func in ("min", "max") or a.distinct for a in aggs]
        self.plain = self._plain()
        types = {c.name: c.dtype for c in child.node.cols}
        # aggregate j -> (precision, scale) of its DECIMAL argument: exact sums (``decimals``)
        self.dec = {j: d for j, a in enumerate(aggs) if a.func in ("sum", "avg") and not a.distinct
                    and a.arg is not None and (d := decimal_type(a.arg, types)) is not None}
        self.groups: dict[tuple, _Group] = {}
        self.is_global = not self.keys
        self.started = False
        self.pending: Optional[pd.DataFrame] = None  # output precomputed by a bulk initialisation

    def _plain(self):
        """Per aggregate how `_output` reads it without `_value` (0 count(*), 1 count(x), 2 sum,
        3 avg), or None when some aggregate needs a multiset (min, max, DISTINCT)."""
        if any(self.multiset):
            return None
        return [(j, 0 if a.func == "count" and a.arg is None else 1 if a.func == "count" else
                 2 if a.func == "sum" else 3) for j, a in enumerate(self.aggs)]

    def __setstate__(self, st):
        st.setdefault("dec", {})  # pickled before exact decimal sums: float sums, as it was built
        self.__dict__.update(st)
        if "plain" not in st:  # a state pickled before the field existed
            self.plain = self._plain()

    def _mean(self, j: int, total, n: int):
        """AVG from the running sum and non-NULL count (Spark's DECIMAL rounding when exact)."""
        d = self.dec.get(j)
        return total / n if d is None else spark_avg(total, n, *d)

    def _total(self, j: int, total):
        d = self.dec.get(j)
        return total if d is None else spark_sum(total, d[1])

    # ----- values -----
    def _value(self, g: _Group, j: int):
        a = self.aggs[j]
        if a.func == "count":
            if a.arg is None:
                return g.cnt
            return len(g.vals[j]) if a.distinct else g.nn[j]
        if a.func in ("min", "max"):
            if not g.vals[j]:
                return None
            if g.ext[j] is None:
                g.ext[j] = (min if a.func == "min" else max)(g.vals[j])
            return g.ext[j]
        if a.distinct:
            vs = g.vals[j]
            if not vs:
                return None
            s = sum(sorted(vs, key=lambda x: (str(type(x)), x)))
            return s if a.func == "sum" else s / len(vs)
        if g.nn[j] == 0:
            return None
        return self._total(j, g.sum[j]) if a.func == "sum" else self._mean(j, g.sum[j], g.nn[j])

    def _output(self, key: tuple, g: Optional[_Group]):
        """(row values, annotation) of a group, or None if the group has no output row."""
        if g is None or (g.cnt == 0 and not self.is_global):
            return None
        if self.plain is not None:  # only count / sum / avg without DISTINCT: no multisets
            vals = tuple(g.cnt if how == 0 else g.nn[j] if how == 1 else None if g.nn[j] == 0
                         else self._total(j, g.sum[j]) if how == 2 else self._mean(j, g.sum[j], g.nn[j])
                         for j, how in self.plain)
        else:
            vals = tuple(self._value(g, j) for j in range(len(self.aggs)))
        return (key + vals, g.annotation())

    def _new_group(self) -> _Group:
        return _Group(len(self.aggs), len(self.sids), self.multiset)

    # ----- the rule -----
    def _take_pending(self) -> Optional[pd.DataFrame]:
        """The output a bulk initialisation (`bulk.initialise`) precomputed, handed out once."""
        pending = getattr(self, "pending", None)
        self.pending = None
        return pending

    def step(self, ctx: Ctx) -> pd.DataFrame:
        pending = self._take_pending()
        if pending is not None:
            return pending
        d = self.children[0].step(ctx)
        touched: dict[tuple, object] = {}
        if self.is_global and not self.started:
            if () not in self.groups:
                self.groups[()] = self._new_group()
                touched[()] = None  # the global row appears with the first batch
        self.started = True
        if len(d):
            self._absorb(d, touched)
        rows, mults, anns = [], [], []
        for key, old in touched.items():
            g = self.groups.get(key)
            new = self._output(key, g)
            if g is not None and g.cnt == 0 and not self.is_global:
                del self.groups[key]
            if old == new:
                continue
            if old is not None:
                rows.append(old[0]); anns.append(old[1]); mults.append(-1)
            if new is not None:
                rows.append(new[0]); anns.append(new[1]); mults.append(+1)
        names = self.keys + [a.out.name for a in self.aggs]
        return frame_from_rows(names, rows, mults, self.sids, anns)

    def _absorb(self, d: pd.DataFrame, touched: dict) -> None:
        keys = row_values(d, self.keys)
        args = [column_values(exprs.evaluate(a.arg, d)) if a.arg is not None else None for a in self.aggs]
        for j, (_, scale) in self.dec.items():
            args[j] = unscaled(args[j], scale)
        ms = d[M].tolist()
        ann = annotations(d, self.sids)
        sum_idx = [j for j, a in enumerate(self.aggs)
                   if a.arg is not None and a.func in ("sum", "avg") and not a.distinct]
        nn_idx = [j for j, a in enumerate(self.aggs) if a.arg is not None]
        ms_idx = [j for j in range(len(self.aggs)) if self.multiset[j]]
        for i, key in enumerate(keys):
            g = self.groups.get(key)
            if key not in touched:
                touched[key] = self._output(key, g)
            if g is None:
                g = self.groups[key] = self._new_group()
            m = ms[i]
            g.cnt += m
            if g.cnt < 0:
                raise MaintenanceError(f"group {key} of {type(self.node).__name__} lost more rows than it had")
            for j in nn_idx:
                v = args[j][i]
                if v is None:
                    continue
                g.nn[j] += m
                if j in sum_idx:
                    g.sum[j] += v * m
            for j in ms_idx:
                v = args[j][i]
                if v is None:
                    continue
                vs = g.vals[j]
                c = vs.get(v, 0) + m
                if c < 0:
                    raise MaintenanceError(f"value {v!r} of group {key} deleted more often than inserted")
                if c == 0:
                    del vs[v]
                    if g.ext[j] is not None and g.ext[j] == v:
                        g.ext[j] = None
                else:
                    vs[v] = c
                    e = g.ext[j]
                    if e is not None and m > 0:
                        if (self.aggs[j].func == "min" and v < e) or (self.aggs[j].func == "max" and v > e):
                            g.ext[j] = v
            for j, P in enumerate(ann[i]):
                F = g.F[j]
                for f in P:
                    o = F.get(f, 0)
                    c = o + m
                    if (o > 0) != (c > 0):
                        g.flipped(j, f)  # the fragment enters or leaves the group's sketch
                    if c:
                        F[f] = c
                    else:
                        del F[f]

    # ----- introspection -----
    def snapshot(self):
        """group -> (cnt, nn, sums, multisets, per-sid fragment counts); equal for equal histories."""
        return {k: (g.cnt, tuple(g.nn), tuple(g.sum), tuple(None if v is None else dict(v) for v in g.vals),
                    tuple(dict(F) for F in g.F))
                for k, g in self.groups.items()}

    def state_bytes(self) -> int:
        return state_size(self.groups)
