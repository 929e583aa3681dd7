"""Full (non-incremental) evaluation of an IR tree over pandas tables, with lineage sketches.

This is the oracle the incremental engine is tested against, and the pure `BaseSide`'s way to
produce a subtree's rows. Every intermediate result is an annotated frame (`frames`): each row
carries its multiplicity and, per sketched scan, the set of fragment ids of the base rows in its
lineage. The sketch of a scan is the union of those sets over the query's result rows:

* sigma/pi keep a row's lineage, joins union the two sides' lineages;
* aggregation and DISTINCT give a result row the lineage of *all* rows of its group (for min/max
  too: plain bit-or, as capture computes it), and a HAVING above drops whole groups;
* top-k keeps the lineage of the k result rows under ir.TopK's total order (order keys, then the
  other attributes ascending, then the annotation ascending - see `frames.topk_sort_key`);
* a global aggregate (no GROUP BY) returns one row even over empty input, as SQL does.

Tables: dict base table name -> DataFrame with the base column names (extra columns, e.g. a row
id, are ignored). Scans rename to internal names and cast to the columns' Spark types.
"""

from __future__ import annotations

from typing import Optional

import pandas as pd

from advisor.errors import Unsupported
from advisor.maintain import exprs, relops
from advisor.maintain.frames import (
    EMPTY, M, annotations, coerce_to, column_values, consolidate, fcol, frame_from_rows, row_values,
    topk_sort_key)
from advisor.maintain.relops import Sketched, sketched_under
from advisor.partition.assign_pandas import assign
from advisor.plan import ir


def annotated(node: ir.Node, tables: dict[str, pd.DataFrame], sketched: Optional[Sketched] = None) -> pd.DataFrame:
    """The annotated result of the subtree `node` (columns node.names + M + one fcol per sketched scan)."""
    sk = sketched or {}
    return _Ref(tables, sk).run(node)


def evaluate(root: ir.Node, tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The plain bag result of the query: one DataFrame row per result copy, internal names."""
    df = annotated(root, tables, {})
    names = root.names
    if len(df) == 0:
        return df[names].reset_index(drop=True)
    return df.loc[df.index.repeat(df[M].to_numpy())][names].reset_index(drop=True)


def sketch(root: ir.Node, tables: dict[str, pd.DataFrame], sketched: Sketched) -> dict[int, frozenset]:
    """Accurate (lineage) sketch per sketched scan: fragment ids that reach the result."""
    df = annotated(root, tables, sketched)
    out: dict[int, frozenset] = {}
    for sid in sketched:
        if fcol(sid) in df.columns and len(df):
            out[sid] = frozenset().union(*df.loc[df[M] > 0, fcol(sid)].tolist())
        else:
            out[sid] = EMPTY
    return out


def restrict(tables: dict[str, pd.DataFrame], root: ir.Node, sketched: Sketched,
             sk: dict[int, frozenset]) -> dict[str, pd.DataFrame]:
    """The sketch instance D_P: each sketched table filtered to the rows in its sketch's fragments
    (the effect of the use rewrite's range predicates). Tables scanned several times keep the
    union of their scans' sketches; unsketched tables are unchanged."""

    scans = {n.scan_id: n for n in root.walk() if isinstance(n, ir.Scan)}
    keep: dict[str, pd.Series] = {}
    for sid, (attr, part) in sketched.items():
        node = scans[sid]
        src = node.col(attr).source or attr
        t = tables[node.table]
        frag = pd.Series(assign(coerce_to(t[src].reset_index(drop=True), node.col(attr).dtype), part))
        hit = frag.isin(sorted(sk.get(sid, EMPTY))).to_numpy()
        keep[node.table] = keep[node.table] | hit if node.table in keep else pd.Series(hit).to_numpy()
    out = dict(tables)
    for name, m in keep.items():
        out[name] = tables[name][m].reset_index(drop=True)
    return out


def aggregate_value(func: str, distinct: bool, star: bool, pairs: list[tuple]) -> object:
    """SQL value of one aggregate over (value, multiplicity) pairs of a group (NULLs ignored)."""
    if func == "count" and star:
        return sum(m for _, m in pairs)
    vals = [(v, m) for v, m in pairs if v is not None]
    if distinct:
        vals = [(v, 1) for v in sorted(set(v for v, _ in vals), key=lambda x: (str(type(x)), x))]
    if func == "count":
        return sum(m for _, m in vals)
    if not vals:
        return None
    if func == "sum":
        return sum(v * m for v, m in vals)
    if func == "avg":
        return sum(v * m for v, m in vals) / sum(m for _, m in vals)
    if func == "min":
        return min(v for v, _ in vals)
    if func == "max":
        return max(v for v, _ in vals)
    raise Unsupported(f"aggregate {func} is not supported")


class _Ref:
    def __init__(self, tables: dict[str, pd.DataFrame], sketched: Sketched):
        self.tables = tables
        self.sk = sketched

    def sids(self, node: ir.Node) -> list[int]:
        return sketched_under(node, self.sk)

    def run(self, node: ir.Node) -> pd.DataFrame:
        if isinstance(node, ir.Scan):
            if node.table not in self.tables:
                raise KeyError(f"no table {node.table!r} given to the reference evaluator")
            return relops.scan_frame(node, self.tables[node.table], +1, self.sk)
        if isinstance(node, ir.Select):
            return relops.select(self.run(node.child), node.cond)
        if isinstance(node, ir.Project):
            return relops.project(self.run(node.child), node.items, self.sids(node))
        if isinstance(node, ir.Join):
            return relops.join(self.run(node.left), self.run(node.right), node.cond, node.left.names,
                               node.right.names, self.sids(node.left), self.sids(node.right))
        if isinstance(node, ir.Union):
            return relops.union(self.run(node.left), self.run(node.right), node,
                                self.sids(node.left), self.sids(node.right))
        if isinstance(node, ir.Aggregate):
            return self.aggregate(node, self.run(node.child), node.keys, node.aggs)
        if isinstance(node, ir.Distinct):
            return self.aggregate(node, self.run(node.child), node.child.names, [])
        if isinstance(node, ir.TopK):
            return self.topk(node, self.run(node.child))
        raise Unsupported(f"operator {type(node).__name__} is not supported")

    def aggregate(self, node: ir.Node, df: pd.DataFrame, keys: list[str], aggs: list[ir.AggCall]) -> pd.DataFrame:
        sids = self.sids(node)
        args = []
        for a in aggs:
            if a.arg is None:
                args.append([None] * len(df))
            else:
                args.append(column_values(exprs.evaluate(a.arg, df)) if len(df) else [])
        groups: dict[tuple, list[int]] = {}
        for i, k in enumerate(row_values(df, keys)):
            groups.setdefault(k, []).append(i)
        if not keys and not groups:
            groups[()] = []  # a global aggregate has one row even over empty input
        mults = df[M].tolist()
        ann = annotations(df, sids)
        rows, anns = [], []
        for k, idx in groups.items():
            vals = []
            for a, col in zip(aggs, args):
                pairs = [(col[i], mults[i]) for i in idx]
                vals.append(aggregate_value(a.func, a.distinct, a.arg is None, pairs))
            rows.append(tuple(k) + tuple(vals))
            anns.append(tuple(frozenset().union(*[ann[i][j] for i in idx]) for j in range(len(sids))))
        names = list(keys) + [a.out.name for a in aggs]
        return frame_from_rows(names, rows, [1] * len(rows), sids, anns)

    def topk(self, node: ir.TopK, df: pd.DataFrame) -> pd.DataFrame:
        sids = self.sids(node)
        names = node.names
        df = consolidate(df, names, sids)
        entries = list(zip(zip(row_values(df, names), annotations(df, sids)), df[M].tolist()))
        if any(m < 0 for _, m in entries):
            raise ValueError("negative multiplicity in a full evaluation")
        key = topk_sort_key(names, node.order)
        entries.sort(key=lambda e: key(e[0]))
        out, taken = [], 0
        for e, m in entries:
            if taken >= node.k:
                break
            take = min(m, node.k - taken)
            out.append((e, take))
            taken += take
        return frame_from_rows(names, [e[0] for e, _ in out], [m for _, m in out], sids, [e[1] for e, _ in out])
