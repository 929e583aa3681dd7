"""Stateless relational operators on annotated frames (see `frames`): scan, select, project,
join, union. Both the reference evaluator and the incremental engine use them; they are linear
in the multiplicity column, which is exactly why the engine may apply them to signed deltas
(digest §2.2-2.5: the sketch passes through sigma/pi unchanged, joins union the annotations and
multiply multiplicities).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd
from sqlglot import exp

from advisor.plan import ir
from advisor.plan.conjuncts import column_equalities, conjuncts

from advisor.maintain import exprs
from advisor.partition.assign_pandas import assign
from advisor.maintain.frames import (
    EMPTY, M, coerce_to, fcol, make_frame, normalize_frame, row_values, singleton_table)

Sketched = dict  # scan_id -> (internal attribute name, RangePartition)


def scan_frame(node: ir.Scan, table: Optional[pd.DataFrame], sign, sketched: Sketched) -> pd.DataFrame:
    """Rows of base table `table` (base column names) as an annotated frame of scan `node`.

    Every row gets multiplicity `sign` (+1 insert / -1 delete, or one int per row) and, if the
    scan is sketched, the singleton set of the fragment its partition attribute falls into.
    """
    sids = [node.scan_id] if node.scan_id in sketched else []
    data = {}
    n = 0 if table is None else len(table)
    for c in node.cols:
        src = c.source or c.name
        if table is None:
            data[c.name] = coerce_to(pd.Series([], dtype=object), c.dtype)
        else:
            if src not in table.columns:
                raise KeyError(f"table {node.table} has no column {src!r}")
            data[c.name] = coerce_to(table[src].reset_index(drop=True), c.dtype)
    data[M] = np.full(n, sign, dtype=np.int64) if np.ndim(sign) == 0 else np.asarray(sign, dtype=np.int64)
    for sid in sids:
        attr, part = sketched[sid]
        ids = assign(data[attr], part)
        data[fcol(sid)] = singleton_table(int(ids.max()) + 1 if n else 0)[ids]
    return make_frame(data)


def select(df: pd.DataFrame, cond: exp.Expression) -> pd.DataFrame:
    """Rows whose condition is TRUE."""
    if len(df) == 0:
        return df
    return _renumbered(df[exprs.mask(cond, df)])


def project(df: pd.DataFrame, items: Sequence[tuple[exp.Expression, ir.Col]], sids: Sequence[int]) -> pd.DataFrame:
    """Generalised projection; multiplicity and annotations pass through unchanged."""
    data = {}
    for e, c in items:
        if isinstance(e, exp.Column) and e.name in df.columns:
            data[c.name] = df[e.name].reset_index(drop=True)
        else:
            data[c.name] = exprs.evaluate(e, df).reset_index(drop=True)
    data[M] = df[M].reset_index(drop=True)
    for s in sids:
        data[fcol(s)] = df[fcol(s)].reset_index(drop=True)
    return make_frame(data)


def _renumbered(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` (a fresh frame from a boolean or column selection) with index 0..n-1, set in place:
    ``reset_index`` copies every column again (a 1.5M-row joined table per estimate)."""
    df.index = pd.RangeIndex(len(df))
    return df


def equi_keys(cond: Optional[exp.Expression], left: set[str], right: set[str]) -> list[tuple[str, str]]:
    """(left attr, right attr) pairs of the conjuncts `l = r` of a join condition."""
    out = []
    for a, b in column_equalities(cond):
        if a in left and b in right:
            out.append((a, b))
        elif b in left and a in right:
            out.append((b, a))
    return out


def _key_dtype(a: pd.Series, b: pd.Series) -> str:
    num = pd.api.types.is_numeric_dtype
    if str(a.dtype) == str(b.dtype):
        return str(a.dtype)
    if num(a.dtype) and num(b.dtype) and not pd.api.types.is_bool_dtype(a.dtype):
        return "Float64"
    return "object"


def join(a: pd.DataFrame, b: pd.DataFrame, cond: Optional[exp.Expression],
         left_names: Sequence[str], right_names: Sequence[str],
         lsids: Sequence[int], rsids: Sequence[int]) -> pd.DataFrame:
    """Inner join of two annotated frames: multiplicities multiply, annotations concatenate.

    Equality conjuncts become a hash join (NULL keys never match); the whole condition is then
    applied as a filter, so any theta condition is honoured.
    """
    cols = list(left_names) + list(right_names) + [M] + [fcol(s) for s in list(lsids) + list(rsids)]
    if len(a) == 0 or len(b) == 0:
        return pd.DataFrame({c: (a[c] if c in a.columns else b[c]).iloc[:0] for c in cols}, columns=cols)
    pairs = equi_keys(cond, set(left_names), set(right_names))
    if pairs and min(len(a), len(b)) <= SMALL_JOIN:
        return _join_small(a, b, cond, pairs, left_names, right_names, lsids, rsids)
    a2 = a.rename(columns={M: "__ml"})
    b2 = b.rename(columns={M: "__mr"})
    if pairs:
        lk, rk = [], []
        for i, (l, r) in enumerate(pairs):
            t = _key_dtype(a2[l], b2[r])
            a2[f"__kl{i}"] = a2[l].astype(t)
            b2[f"__kr{i}"] = b2[r].astype(t)
            lk.append(f"__kl{i}")
            rk.append(f"__kr{i}")
        a2 = a2[a2[lk].notna().all(axis=1)]
        b2 = b2[b2[rk].notna().all(axis=1)]
        out = a2.merge(b2, left_on=lk, right_on=rk, how="inner", sort=False)
    else:
        out = a2.merge(b2, how="cross")
    out[M] = out["__ml"].to_numpy(dtype=np.int64) * out["__mr"].to_numpy(dtype=np.int64)
    out.index = pd.RangeIndex(len(out))  # the merge's own result: renumbered in place
    if cond is not None and len(out):
        out = out[exprs.mask(cond, out)]
    return _renumbered(out[cols])


SMALL_JOIN = 256  # below this many rows on one side, a Python hash join beats pandas' merge set-up


def _join_small(a: pd.DataFrame, b: pd.DataFrame, cond: exp.Expression, pairs: list[tuple[str, str]],
                left_names: Sequence[str], right_names: Sequence[str],
                lsids: Sequence[int], rsids: Sequence[int]) -> pd.DataFrame:
    """The same inner join for a small side: a dict of that side's keys, probed by the other.

    Keys compare as normalised Python values (`row_values`): NULL never matches, and 1 equals
    1.0, as in the merge path's common key dtype. The residual condition is applied only if
    the condition has conjuncts besides the equalities."""
    ka = row_values(a, [l for l, _ in pairs])
    kb = row_values(b, [r for _, r in pairs])
    if len(a) <= len(b):
        ia, ib = _hash_pairs(ka, kb)
    else:
        ib, ia = _hash_pairs(kb, ka)
    ia_, ib_ = np.asarray(ia, dtype=np.int64), np.asarray(ib, dtype=np.int64)
    data = {}
    for c in left_names:
        data[c] = a[c].take(ia_)
    for c in right_names:
        data[c] = b[c].take(ib_)
    data[M] = a[M].to_numpy(dtype=np.int64)[ia_] * b[M].to_numpy(dtype=np.int64)[ib_]
    for s in lsids:
        data[fcol(s)] = a[fcol(s)].take(ia_)
    for s in rsids:
        data[fcol(s)] = b[fcol(s)].take(ib_)
    out = make_frame(data)
    if len(out) and len(conjuncts(cond)) > len(pairs):
        out = out[exprs.mask(cond, out)].reset_index(drop=True)
    return out


def _hash_pairs(build: list[tuple], probe: list[tuple]) -> tuple[list[int], list[int]]:
    """Positions (i in build, j in probe) of equal keys; a key holding NULL matches nothing."""
    pos: dict[tuple, list[int]] = {}
    for i, k in enumerate(build):
        if None not in k:
            pos.setdefault(k, []).append(i)
    bi: list[int] = []
    pj: list[int] = []
    for j, k in enumerate(probe):
        for i in pos.get(k, ()):
            bi.append(i)
            pj.append(j)
    return bi, pj


def union(a: pd.DataFrame, b: pd.DataFrame, node: ir.Union,
          lsids: Sequence[int], rsids: Sequence[int]) -> pd.DataFrame:
    """UNION ALL: rename both inputs positionally to the union's attributes and concatenate;
    rows get an empty annotation for the sketched scans of the other branch."""
    names = [c.name for c in node.cols]
    sids = sorted(set(lsids) | set(rsids))
    parts = []
    for df, child in ((a, node.left), (b, node.right)):
        ren = dict(zip(child.names, names))
        d = df.rename(columns=ren)
        for s in sids:
            if fcol(s) not in d.columns:
                d[fcol(s)] = pd.Series([EMPTY] * len(d), dtype=object, index=d.index)
        parts.append(d[names + [M] + [fcol(s) for s in sids]])
    parts = [p for p in parts if len(p)] or parts[:1]
    if len(parts) == 1:
        return parts[0].reset_index(drop=True)
    return normalize_frame(pd.concat(parts, ignore_index=True))


def sketched_under(node: ir.Node, sketched: Sketched) -> list[int]:
    """Sorted ids of the sketched scans in the subtree of `node`."""
    return sorted(n.scan_id for n in node.walk() if isinstance(n, ir.Scan) and n.scan_id in sketched)
