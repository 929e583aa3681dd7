"""Small builders for hand-made IR trees and tables used by the tests of `advisor.maintain`.

Internal attribute names are `<prefix><column>` (prefix defaults to "", so single-scan tests can
write predicates with the base names). Predicates and expressions are written as SQL text and
parsed with sqlglot; their column references are the internal names.
"""

from __future__ import annotations

from typing import Optional, Sequence

import pandas as pd
import sqlglot
from sqlglot import exp

from advisor.partition.range_partition import RangePartition
from advisor.plan import ir


def E(sql: str) -> exp.Expression:
    return sqlglot.parse_one(sql, read="spark")


def scan(table: str, columns: Sequence, sid: int, prefix: str = "") -> ir.Scan:
    """columns: names (type bigint) or (name, spark type) pairs."""
    cols = []
    for c in columns:
        name, dtype = (c, "bigint") if isinstance(c, str) else c
        cols.append(ir.Col(prefix + name, dtype, table, name))
    return ir.Scan(table, prefix.rstrip("_") or table, cols, sid)


def select(child: ir.Node, cond: str) -> ir.Select:
    return ir.Select(child, E(cond))


def project(child: ir.Node, items: Sequence) -> ir.Project:
    """items: attribute names (kept as they are) or (sql, out name[, type]) triples."""
    out = []
    for it in items:
        if isinstance(it, str):
            out.append((ir.col_ref(it), child.col(it)))
        else:
            sql, name = it[0], it[1]
            dtype = it[2] if len(it) > 2 else "bigint"
            out.append((E(sql), ir.Col(name, dtype)))
    return ir.Project(child, out)


def join(left: ir.Node, right: ir.Node, cond: Optional[str]) -> ir.Join:
    return ir.Join(left, right, E(cond) if cond else None)


def agg(child: ir.Node, keys: Sequence[str], aggs: Sequence) -> ir.Aggregate:
    """aggs: (func, arg sql or None for count(*), out name[, distinct])."""
    calls = []
    for a in aggs:
        func, arg, out = a[0], a[1], a[2]
        distinct = bool(a[3]) if len(a) > 3 else False
        dtype = "double" if func == "avg" else "bigint"
        calls.append(ir.AggCall(func, E(arg) if arg else None, distinct, ir.Col(out, dtype)))
    return ir.Aggregate(child, list(keys), calls)


def distinct(child: ir.Node) -> ir.Distinct:
    return ir.Distinct(child)


def topk(child: ir.Node, order: Sequence[tuple[str, bool]], k: int) -> ir.TopK:
    return ir.TopK(child, list(order), k)


def union(left: ir.Node, right: ir.Node, names: Sequence[str]) -> ir.Union:
    cols = [ir.Col(n, c.dtype) for n, c in zip(names, left.cols)]
    return ir.Union(left, right, cols)


def part(table: str, attr: str, bounds: Sequence, dtype: str = "bigint", pid: int = 1) -> RangePartition:
    return RangePartition(pid, table, attr, dtype, tuple(bounds))


def apply_delta(tables: dict, delta: dict) -> dict:
    """New tables after deleting (one copy per deleted row, matched on all columns) and inserting."""
    out = dict(tables)
    for name, (ins, dels) in delta.items():
        t = tables[name]
        if dels is not None and len(dels):
            t = t.copy()
            drop = []
            for _, r in dels.iterrows():
                hit = None
                for i, row in t.iterrows():
                    if i in drop:
                        continue
                    if all(_same(row[c], r[c]) for c in dels.columns):
                        hit = i
                        break
                if hit is None:
                    raise ValueError(f"row {dict(r)} not in table {name}")
                drop.append(hit)
            t = t.drop(index=drop)
        if ins is not None and len(ins):
            t = pd.concat([t, ins], ignore_index=True)
        out[name] = t.reset_index(drop=True)
    return out


def _same(a, b) -> bool:
    if pd.isna(a) and pd.isna(b):
        return True
    if pd.isna(a) or pd.isna(b):
        return False
    return a == b


# ---------- fixtures from the digest (seed 000) ----------
SALES_COLS = [("sid", "bigint"), ("brand", "string"), ("productname", "string"), ("price", "bigint"),
              ("numsold", "bigint")]


def sales_table() -> pd.DataFrame:
    return pd.DataFrame([
        (1, "Lenovo", "ThinkPad T14s Gen 2", 349, 1),
        (2, "Lenovo", "ThinkPad T14s Gen 2", 449, 2),
        (3, "Apple", "MacBook Air 13-inch", 1199, 1),
        (4, "Apple", "MacBook Pro 14-inch", 3875, 1),
        (5, "Dell", "Dell XPS 13 Laptop", 1345, 1),
        (6, "HP", "HP ProBook 450 G9", 999, 4),
        (7, "HP", "HP ProBook 550 G9", 899, 1),
    ], columns=[c for c, _ in SALES_COLS])


S8 = (8, "HP", "HP ProBook 650 G10", 1299, 1)
# phi_price = {rho1=[1,600], rho2=[601,1000], rho3=[1001,1500], rho4=[1501,10000]} -> ids 0..3
PRICE_PART = part("sales", "price", (601, 1001, 1501))
RHO = {1: 0, 2: 1, 3: 2, 4: 3}


def sales_rows(*rows) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=[c for c, _ in SALES_COLS])


def q_top(having: bool = True) -> ir.Node:
    """Q_Top: SELECT brand, SUM(price*numSold) AS rev FROM sales GROUP BY brand HAVING rev > 5000."""
    s = scan("sales", SALES_COLS, 1)
    p = project(s, ["brand", ("price * numsold", "pn")])
    g = agg(p, ["brand"], [("sum", "pn", "rev")])
    return select(g, "rev > 5000") if having else g


def ex51(push: bool = True) -> ir.Node:
    """Ex. 5.1: SELECT a, sum(c) FROM (SELECT a, b FROM R WHERE a > 3) JOIN S ON b = d
    GROUP BY a HAVING sum(c) > 5. R scan id 1 (sketch on a), S scan id 2 (sketch on c)."""
    r = scan("R", ["a", "b"], 1)
    s = scan("S", ["c", "d"], 2)
    j = join(project(select(r, "a > 3"), ["a", "b"]), s, "b = d")
    return select(agg(j, ["a"], [("sum", "c", "sc")]), "sc > 5")


R_PART = part("R", "a", (6,))   # f1=[1,5] -> 0, f2=[6,10] -> 1
S_PART = part("S", "c", (7,))   # g1=[1,6] -> 0, g2=[7,15] -> 1


def rs_tables() -> dict:
    return {"R": pd.DataFrame({"a": [1, 9], "b": [7, 9]}), "S": pd.DataFrame({"c": [6, 7], "d": [9, 8]})}


def rows(cols: Sequence[str], *vals) -> pd.DataFrame:
    return pd.DataFrame(list(vals), columns=list(cols))


# ---------- looking inside a running state ----------
def record(state) -> dict:
    """Make every operator of `state` remember its last emitted delta: returns {op: frame}."""
    rec: dict = {}
    for op in state.root_op.walk():
        orig = op.step

        def wrapped(ctx, _op=op, _orig=orig):
            out = _orig(ctx)
            rec[_op] = out
            return out

        op.step = wrapped
    return rec


def ops_of(state, cls_name: str) -> list:
    """Operators of `state` bound to IR nodes of class `cls_name`, in pre-order from the root."""
    return [op for op in state.root_op.walk() if type(op.node).__name__ == cls_name]


def emitted(frame, names=None) -> set:
    """A delta frame as a set of (row tuple, annotation tuple, multiplicity)."""
    from advisor.maintain.frames import M, annotations, row_values

    names = names or [c for c in frame.columns if c != M and not c.startswith("__f")]
    sids = sorted(int(c[3:]) for c in frame.columns if c.startswith("__f"))
    return set(zip(row_values(frame, names), annotations(frame, sids), frame[M].tolist()))


def fs(*xs) -> frozenset:
    return frozenset(xs)
