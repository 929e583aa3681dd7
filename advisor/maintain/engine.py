"""IMP: incremental maintenance of provenance sketches over an IR plan (digest §2, §4, §7).

    state = Maintainer.init(root, sketched, tables)          # capture by feeding all rows as inserts
    sketch = state.apply({"t": (inserted_df, deleted_df)}, base)   # -> {scan_id: frozenset(fragments)}

`sketched` maps a scan id to (internal name of the partition attribute, RangePartition). Deltas
give, per base table, the inserted rows and the deleted rows (base column names; a deleted row
removes one copy). `base` is a `BaseSide` (see `base.py`) answering for subtree outputs before
(and, for top-k refills, after) the batch; `PandasBase(old_tables, new_tables, sketched)` is the
pure one. Plans without joins and top-k never call it.

The plan is first rewritten for delta selection push-down (`pushdown.rewrite`) and its scans
pruned to the attributes used above them (`prune`), then compiled to
operators: stateless scan/select/project/union here, stateful join (`ops_join`), aggregate and
distinct (`ops_agg_plain` for COUNT/SUM/AVG and DISTINCT, `ops_agg` for MIN/MAX and DISTINCT
aggregates), top-k (`ops_topk`), and the final merge `Merge` (mu): per scan and fragment
the number of result rows (with multiplicity) whose annotation holds the fragment; the sketch is
{f | count > 0}, judged after the whole batch so that -/+ pairs never flicker.

The whole state (plan, operator states, merge counts) serialises with `to_bytes`/`from_bytes`
(a versioned, zlib-compressed pickle; load only bytes this module wrote) and reports its size
with `memory_bytes` for a memory budget.
"""

from __future__ import annotations

import pickle
import zlib
from typing import Optional

import numpy as np
import pandas as pd
from sqlglot import exp

from advisor.errors import Unsupported
from advisor.maintain import prune, pushdown, relops
from advisor.maintain.base_side import BaseSide, PandasBase, empty_like
from advisor.maintain.frames import M, annotations, deep_size, empty_frame
from advisor.maintain.operators.aggregate import AggOp
from advisor.maintain.operators.aggregate_arrays import PlainAggOp, plain_aggregates
from advisor.maintain.operators.join import JoinOp
from advisor.maintain.operators.protocol import Ctx, MaintenanceError, NeedsRecapture, Op
from advisor.maintain.operators.topk import TopKOp
from advisor.maintain.relops import Sketched
from advisor.plan import ir

__all__ = ["Maintainer", "MaintState", "Merge", "MaintenanceError", "NeedsRecapture"]

_MAGIC = b"IMPSTATE"
_FORMAT = 1


# ---------- stateless operators ----------
class ScanOp(Op):
    """Annotated delta of a base table: deleted rows with -1, inserted rows with +1."""

    def step(self, ctx: Ctx) -> pd.DataFrame:
        node: ir.Scan = self.node
        ins, dels = ctx.deltas.get(node.table, (None, None))
        parts = [(df, sign) for df, sign in ((dels, -1), (ins, +1)) if df is not None and len(df)]
        ctx.bump("delta_rows", sum(len(df) for df, _ in parts))
        if not parts:
            return empty_frame(self.names, self.sids)
        if len(parts) == 1:
            return relops.scan_frame(node, parts[0][0], parts[0][1], ctx.sketched)
        # deletes then inserts, annotated in one pass (one signed multiplicity column)
        signs = np.concatenate([np.full(len(df), sign, dtype=np.int64) for df, sign in parts])
        both = pd.concat([df for df, _ in parts], ignore_index=True)
        return relops.scan_frame(node, both, signs, ctx.sketched)


class SelectOp(Op):
    def step(self, ctx: Ctx) -> pd.DataFrame:
        d = self.children[0].step(ctx)
        out = relops.select(d, self.node.cond)
        if isinstance(self.children[0], ScanOp):
            ctx.bump("pushdown_dropped", len(d) - len(out))
        return out


class ProjectOp(Op):
    def step(self, ctx: Ctx) -> pd.DataFrame:
        d = self.children[0].step(ctx)
        if not len(d):
            return empty_frame(self.names, self.sids)
        return relops.project(d, self.node.items, self.sids)


class UnionOp(Op):
    def step(self, ctx: Ctx) -> pd.DataFrame:
        l, r = self.children
        return relops.union(l.step(ctx), r.step(ctx), self.node, l.sids, r.sids)


# ---------- the merge operator mu ----------
class Merge:
    """Per sketched scan, fragment -> number of result rows (with multiplicity) annotated with it."""

    def __init__(self, sids: list[int], all_sids: list[int]):
        self.sids = sids
        self.counts: dict[int, dict[int, int]] = {s: {} for s in all_sids}

    def absorb(self, d: pd.DataFrame) -> dict[int, tuple[frozenset, frozenset]]:
        """Apply the root's delta; return per scan (fragments added, fragments removed).

        An aggregate emits each changed group as -(old row, old lineage) next to +(new row, new
        lineage), and the two lineages differ in a few fragments out of possibly thousands. Such
        adjacent pairs are applied as their set differences (computed in C), not fragment by
        fragment: the net count change is the same for any pairing of rows."""
        anns = annotations(d, self.sids)
        ms = d[M].tolist() if len(d) else []
        before: dict[int, dict[int, int]] = {s: {} for s in self.counts}  # touched fragment -> old count
        terms: list[tuple[tuple, int]] = []  # (per-sid fragment collections, multiplicity)
        i, n = 0, len(ms)
        while i < n:
            if i + 1 < n and ms[i] < 0 < ms[i + 1] and ms[i] == -ms[i + 1]:
                a_old, a_new, k = anns[i], anns[i + 1], ms[i + 1]
                terms.append((tuple(A - B for A, B in zip(a_new, a_old)), k))
                terms.append((tuple(B - A for A, B in zip(a_new, a_old)), -k))
                i += 2
            else:
                terms.append((anns[i], ms[i]))
                i += 1
        for ann, m in terms:
            for j, s in enumerate(self.sids):
                C, B = self.counts[s], before[s]
                for f in ann[j]:
                    c0 = C.get(f, 0)
                    if f not in B:
                        B[f] = c0
                    c = c0 + m
                    if c:
                        C[f] = c
                    else:
                        del C[f]
        out = {}
        for s, B in before.items():  # judged after the whole batch: -/+ pairs never flicker
            C = self.counts[s]
            for f in B:
                if C.get(f, 0) < 0:
                    raise MaintenanceError(f"fragment {f} of scan {s} counted below zero")
            out[s] = (frozenset(f for f, c0 in B.items() if c0 <= 0 < C.get(f, 0)),
                      frozenset(f for f, c0 in B.items() if c0 > 0 >= C.get(f, 0)))
        return out

    def sketch_of(self, sid: int) -> frozenset:
        return frozenset(f for f, c in self.counts[sid].items() if c > 0)


def rename_columns(e: exp.Expression, names: dict[str, str]) -> exp.Expression:
    """`e` with column references renamed (internal attribute -> base column)."""
    def repl(n):
        if isinstance(n, exp.Column) and n.name in names:
            return exp.column(names[n.name])
        return n

    return e.copy().transform(repl)


# ---------- compilation ----------
def not_incremental(root: ir.Node) -> Optional[str]:
    """Why IMP has no rule for ``root`` (None when it has): semi-joins, anti-joins and left outer
    joins have no operator state here (an anti-join's output grows when its inner side shrinks), so
    such sketches are recaptured when their tables change."""
    for n in root.walk():
        if isinstance(n, ir.PARTIAL_JOINS):
            return f"operator {type(n).__name__} has no incremental rule: recaptured"
    return None


def build(node: ir.Node, sketched: Sketched, topk_buffer: Optional[int] = None,
          on_topk_exhausted: str = "refill", bloom: bool = True) -> Op:
    """Compile an IR tree to incremental operators."""
    def rec(n):
        return build(n, sketched, topk_buffer, on_topk_exhausted, bloom)

    if isinstance(node, ir.Scan):
        return ScanOp(node, [], sketched)
    if isinstance(node, ir.Select):
        return SelectOp(node, [rec(node.child)], sketched)
    if isinstance(node, ir.Project):
        return ProjectOp(node, [rec(node.child)], sketched)
    if isinstance(node, ir.Union):
        return UnionOp(node, [rec(node.left), rec(node.right)], sketched)
    if isinstance(node, ir.Join):
        return JoinOp(node, rec(node.left), rec(node.right), sketched, use_bloom=bloom)
    if isinstance(node, ir.Aggregate):
        op = PlainAggOp if plain_aggregates(node.aggs) else AggOp
        return op(node, rec(node.child), sketched, node.keys, node.aggs)
    if isinstance(node, ir.Distinct):
        return PlainAggOp(node, rec(node.child), sketched, node.child.names, [])
    if isinstance(node, ir.TopK):
        return TopKOp(node, rec(node.child), sketched, topk_buffer, on_topk_exhausted)
    raise Unsupported(f"operator {type(node).__name__} is not supported by incremental maintenance")


class MaintState:
    """The maintained sketch of one query: operator states, merge counts, and the plan they belong to."""

    def __init__(self, root: ir.Node, sketched: Sketched, *, pushdown_on: bool = True,
                 topk_buffer: Optional[int] = None, on_topk_exhausted: str = "refill", bloom: bool = True):
        missing = [s for s in sketched if s not in {n.scan_id for n in root.walk() if isinstance(n, ir.Scan)}]
        if missing:
            raise ValueError(f"sketched scan id(s) {missing} not in the plan")
        self.query = root
        plan = pushdown.rewrite(root) if pushdown_on else root
        self.plan = prune.prune(plan, keep={attr for attr, _ in sketched.values()})
        self._pushed = pushdown.pushdown_predicates(root) if pushdown_on else {}
        self.sketched = dict(sketched)
        self.root_op = build(self.plan, self.sketched, topk_buffer, on_topk_exhausted, bloom)
        self.merge = Merge(self.root_op.sids, sorted(self.sketched))
        self.batches = 0
        self.last_change: dict[int, tuple[frozenset, frozenset]] = {}
        self.last_stats: dict = {}

    # ----- the public surface -----
    def apply(self, delta_tables: dict, base: Optional[BaseSide] = None) -> dict[int, frozenset]:
        """Maintain the sketch for one batch of deltas and return the new sketch per scan.

        delta_tables: base table -> (inserted rows or None, deleted rows or None). On an exception
        the state may be half-updated: discard it (the store keeps the previous version)."""
        ctx = Ctx(delta_tables, base, self.sketched)
        out = self.root_op.step(ctx)
        self.last_change = self.merge.absorb(out)
        ctx.stats["output_rows"] = len(out)
        self.last_stats = ctx.stats
        self.batches += 1
        return self.sketch()

    def sketch(self) -> dict[int, frozenset]:
        return {s: self.merge.sketch_of(s) for s in sorted(self.sketched)}

    def tables(self) -> list[str]:
        """Base tables whose deltas this state consumes."""
        return sorted({n.table for n in self.plan.walk() if isinstance(n, ir.Scan)})

    def columns(self, table: str) -> list[str]:
        """Source columns of ``table`` the (pruned) plan's scans read: all a delta needs to carry."""
        return sorted({c.source or c.name for n in self.plan.walk() if isinstance(n, ir.Scan) and n.table == table
                       for c in n.cols})

    def delta_where(self, table: str):
        """A predicate over ``table``'s source columns that every delta row able to matter
        satisfies (the OR over the table's scans of their pushed-down selections), or None.
        A reader may drop the rows it rejects before they reach `apply`."""
        terms = []
        for n in self.query.walk():
            if isinstance(n, ir.Scan) and n.table == table:
                preds = getattr(self, "_pushed", {}).get(n.scan_id)  # states pickled before it: none
                if not preds:
                    return None
                src = {c.name: c.source or c.name for c in n.cols}
                terms.append(exp.and_(*[rename_columns(p, src) for p in preds]))
        return exp.or_(*terms) if terms else None

    def snapshot(self) -> dict:
        """Comparable picture of all operator states (aggregate/distinct groups, current top-k,
        merge counts); equal for two states that saw the same net data."""
        ops = {}
        for i, op in enumerate(self.root_op.walk()):
            snap = op.snapshot()
            if snap is not None:
                ops[f"{i}:{type(op.node).__name__}"] = snap
        return {"ops": ops, "merge": {s: dict(c) for s, c in self.merge.counts.items()}}

    def memory_bytes(self) -> int:
        """Approximate bytes held by operator states and merge counts (O(state) to compute)."""
        return sum(op.state_bytes() for op in self.root_op.walk()) + deep_size(self.merge.counts)

    def to_bytes(self) -> bytes:
        """The state as written after every maintenance step.  zlib level 1: a 480k-group state
        (TPC-H SF1 supp_qty, 30 MB pickled) compressed in 0.24-0.27 s to 9.3 MB, against 0.57 s
        to 8.9 MB at level 3; any level reads back the same."""
        payload = pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)
        return _MAGIC + bytes([_FORMAT]) + zlib.compress(payload, 1)

    @staticmethod
    def from_bytes(data: bytes) -> "MaintState":
        if not data.startswith(_MAGIC) or len(data) < len(_MAGIC) + 1:
            raise ValueError("not a maintenance state")
        if data[len(_MAGIC)] != _FORMAT:
            raise ValueError(f"unsupported maintenance state format {data[len(_MAGIC)]}")
        st = pickle.loads(zlib.decompress(data[len(_MAGIC) + 1:]))
        if not isinstance(st, MaintState):
            raise ValueError("not a maintenance state")
        return st


class Maintainer:
    """Entry points: a fresh (empty) state, or one initialised from full tables."""

    @staticmethod
    def empty(root: ir.Node, sketched: Sketched, **opts) -> MaintState:
        """A state for empty tables (every sketch empty); feed the data with `apply`.

        opts: pushdown_on (default True), topk_buffer (default max(2k, k+100)),
        on_topk_exhausted ("refill" via the base side, or "raise" NeedsRecapture), bloom (True)."""
        return MaintState(root, sketched, **opts)

    @staticmethod
    def init(root: ir.Node, sketched: Sketched, tables: dict[str, pd.DataFrame], **opts) -> MaintState:
        """Capture: feed all rows of `tables` as one insert batch into empty operator states."""
        st = MaintState(root, sketched, **opts)
        used = {t: tables[t] for t in st.tables()}
        st.apply({t: (df, None) for t, df in used.items()}, PandasBase(empty_like(used), used, st.sketched))
        return st

