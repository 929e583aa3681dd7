"""Incremental COUNT/SUM/AVG aggregation (and DISTINCT) with its state in arrays (digest §2.6).

Same rule and same state as ``ops_agg.AggOp`` (per group: row count, per aggregate the non-NULL
count and the running sum, per sketched scan the rows per fragment), laid out by column: a group
key maps to an integer code once (``keyindex``: an array indexed by the key for one integer key,
packed integer keys in a sorted array for several, else a dict), and counts and sums live in
numpy arrays indexed by code. A batch is applied with a few vectorised ``np.add.at`` calls
instead of a Python loop over per-group objects. Why: with a dict of 1.5M small objects (TPC-H
SF1 grouped by ``l_orderkey``) the same 1,000-row step ran 1.4-1.5x slower than with 150k, from
memory latency alone (BENCHMARKS.md); arrays keep the touched state compact.

Fragments: most groups lie in one fragment per scan (the sketch attribute is the group key or
is determined by it), so each scan keeps ``f1`` (that fragment, -1 for none) and ``c1`` (its row
count) per code; a group that gains a second fragment moves to ``multi[scan][code] = {fragment:
count}``. Sums are object arrays, so integers stay exact Python ints and floats are added in row
order exactly as the per-group code does (``snapshot`` is identical); sums of DECIMAL arguments are
exact unscaled ints (``decimals``). Counts are judged after the
whole batch: a group or fragment count below zero then is a ``MaintenanceError``.
"""

from __future__ import annotations

import decimal

import numpy as np
import pandas as pd

from advisor.maintain import exprs
from advisor.maintain.decimals import spark_sums, unscaled, unscaled_exact
from advisor.maintain.frames import (
    M, column_values, empty_frame, fcol, fragment_ids, from_values, make_frame, py_scalar, singleton_table)
from advisor.maintain.key_index import DenseIntKeys, PackedIntKeys, TupleKeys
from advisor.maintain.operators.aggregate import AggOp
from advisor.maintain.operators.protocol import Ctx, MaintenanceError


def net_pairs(cs: np.ndarray, fs: np.ndarray, ws: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (code, fragment) pairs among `cs`/`fs` (fragments >= 0) and their summed
    weights `ws`: three aligned arrays, pairs in ascending order."""
    if not len(cs):
        return cs, fs, ws
    k = int(fs.max()) + 1
    pair, inv = np.unique(cs * k + fs, return_inverse=True)
    net = np.zeros(len(pair), dtype=np.int64)
    np.add.at(net, inv, ws)
    return pair // k, pair % k, net


def plain_aggregates(aggs) -> bool:
    """Only COUNT(*), COUNT/SUM/AVG(x) without DISTINCT: what ``PlainAggOp`` keeps in arrays."""
    return all(a.func in ("count", "sum", "avg") and not a.distinct and (a.arg is not None or a.func == "count")
               for a in aggs)


class PlainAggOp(AggOp):
    """gamma over COUNT/SUM/AVG without DISTINCT (or DISTINCT itself), state by column."""

    def __init__(self, node, child, sketched, keys, aggs):
        super().__init__(node, child, sketched, keys, aggs)
        if not plain_aggregates(self.aggs):
            raise ValueError("PlainAggOp takes COUNT/SUM/AVG aggregates without DISTINCT only")
        self.groups = {}  # unused: AggOp's per-group objects
        n_a, n_s = len(self.aggs), len(self.sids)
        n_k = len(self.keys)
        self.index = DenseIntKeys() if n_k == 1 else PackedIntKeys(n_k) if n_k > 1 else TupleKeys()
        self.cnt = np.zeros(0, dtype=np.int64)
        self.nn = np.zeros((n_a, 0), dtype=np.int64)
        self.sums = [np.zeros(0, dtype=object) for _ in range(n_a)]
        self.f1 = np.full((n_s, 0), -1, dtype=np.int64)
        self.c1 = np.zeros((n_s, 0), dtype=np.int64)
        self.multi: list[dict[int, dict[int, int]]] = [{} for _ in range(n_s)]
        self.nn_idx = [j for j, a in enumerate(self.aggs) if a.arg is not None]
        self.sum_idx = [j for j, a in enumerate(self.aggs) if a.arg is not None and a.func in ("sum", "avg")]

    def __setstate__(self, st):
        if "index" not in st:  # saved before `keyindex`: its dict and lists become a TupleKeys
            t = TupleKeys()
            t.code, t.key_of, t.free = st.pop("code"), st.pop("key_of"), st.pop("free")
            st["index"] = t
        st.setdefault("dec", {})  # saved before exact decimal sums: float sums, as it was built
        self.__dict__.update(st)

    # ----- codes and capacity -----
    def _grow(self, need: int) -> None:
        cap = len(self.cnt)
        if need <= cap:
            return
        new = max(need, 2 * cap, 1024)
        pad = new - cap
        self.cnt = np.concatenate([self.cnt, np.zeros(pad, dtype=np.int64)])
        self.nn = np.concatenate([self.nn, np.zeros((len(self.aggs), pad), dtype=np.int64)], axis=1)
        self.sums = [np.concatenate([s, np.zeros(pad, dtype=object)]) for s in self.sums]
        self.f1 = np.concatenate([self.f1, np.full((len(self.sids), pad), -1, dtype=np.int64)], axis=1)
        self.c1 = np.concatenate([self.c1, np.zeros((len(self.sids), pad), dtype=np.int64)], axis=1)

    def _coded(self, get) -> np.ndarray:
        """Codes from ``get(index)``; an index that refuses the keys (None) is widened first
        (``widened``: dense slots, then packed keys, then a `TupleKeys`, which takes any key). The
        state arrays grow to the codes handed out."""
        c = get(self.index)
        while c is None:
            self.index = self.index.widened()
            c = get(self.index)
        self._grow(self.index.top())
        return c

    def _codes(self, keys: list[tuple]) -> np.ndarray:
        """The code of every key tuple, allocating codes (reusing freed ones) for new keys."""
        return self._coded(lambda ix: ix.codes(keys))

    def _frame_codes(self, d: pd.DataFrame) -> np.ndarray:
        """`_codes` of the frame's group keys (a dense key column without building tuples)."""
        return self._coded(lambda ix: ix.frame_codes(d, self.keys))

    def _release(self, dead: np.ndarray) -> None:
        """Forget groups whose count reached 0 (never the global group)."""
        self.index.release(dead)
        for mu in self.multi:
            if mu:
                for c in dead.tolist():
                    mu.pop(c, None)
        self.nn[:, dead] = 0
        for s in self.sums:
            s[dead] = 0
        self.f1[:, dead] = -1
        self.c1[:, dead] = 0

    # ----- outputs -----
    def _annotations(self, s: int, codes: np.ndarray) -> np.ndarray:
        """Scan `s`'s annotation of each group (object array of frozensets): a cached singleton
        per fragment for one-fragment groups, a set built from the counts for spilled ones."""
        f1, c1 = self.f1[s][codes], self.c1[s][codes]
        table = singleton_table(int(f1.max()) + 1 if len(f1) else 0)
        out = table[np.where(c1 > 0, f1, len(table) - 1)]
        multi = self.multi[s]
        if multi:
            for i, c in enumerate(codes.tolist()):
                mu = multi.get(c)
                if mu is not None:
                    out[i] = frozenset(f for f, n in mu.items() if n > 0)
        return out

    def _columns(self, codes: np.ndarray, framed: bool = False) -> tuple[np.ndarray, list, list[np.ndarray]]:
        """(exists?, per aggregate its values, per scan its annotations) of the groups `codes`;
        counts as int64 arrays, sums and averages as object arrays (None where all were NULL).
        ``framed``: exact DECIMAL sums as a nullable float array, the form their output column
        takes (``_frame``), without a Python object per group."""
        cnt = self.cnt[codes]
        exists = cnt > 0 if not self.is_global else np.ones(len(codes), dtype=bool)
        vals = []
        for j, how in self.plain:
            if how == 0:
                vals.append(cnt)
                continue
            nn = self.nn[j][codes]
            if how == 1:
                vals.append(nn)
                continue
            sm = self.sums[j][codes]
            has = nn != 0
            out = np.full(len(codes), None, dtype=object)
            if framed and j in self.dec and how == 2 and has.any():
                floats = np.zeros(len(codes), dtype=np.float64)
                floats[has] = spark_sums(sm[has], self.dec[j][1])
                vals.append(pd.arrays.FloatingArray(floats, ~has))
                continue
            if j in self.dec:  # exact unscaled sums: Spark's DECIMAL result (``decimals``)
                out[has] = (spark_sums(sm[has], self.dec[j][1]).tolist() if how == 2 else
                            [self._mean(j, u, n) for u, n in zip(sm[has].tolist(), nn[has].tolist())])
            else:
                out[has] = sm[has] if how == 2 else sm[has] / nn[has].astype(object)
            vals.append(out)
        anns = [self._annotations(s, codes) for s in range(len(self.sids))]
        return exists, vals, anns

    def _frame(self, codes: np.ndarray, vals: list[np.ndarray], anns: list[np.ndarray],
               mults: np.ndarray) -> pd.DataFrame:
        """The output rows of groups `codes` (with their values and annotations) as a frame."""
        data: dict = dict(zip(self.keys, self.index.key_columns(codes, len(self.keys))))
        for a, col in zip(self.aggs, vals):
            data[a.out.name] = (col if isinstance(col, pd.arrays.FloatingArray) else
                                pd.arrays.IntegerArray(col, np.zeros(len(col), dtype=bool))
                                if col.dtype == np.int64 else from_values(col.tolist()))
        data[M] = mults
        for sid, col in zip(self.sids, anns):
            data[fcol(sid)] = col
        return make_frame(data)

    def all_outputs(self) -> pd.DataFrame:
        """Every live group as an insert (a bulk initialisation's output)."""
        codes = self.index.live()
        exists, vals, anns = self._columns(codes, framed=True)
        keep = np.flatnonzero(exists)
        return self._frame(codes[keep], [col[keep] for col in vals], [a[keep] for a in anns],
                           np.ones(len(keep), dtype=np.int64))

    # ----- the rule -----
    def step(self, ctx: Ctx) -> pd.DataFrame:
        pending = self._take_pending()
        if pending is not None:
            return pending
        d = self.children[0].step(ctx)
        first_global = self.is_global and not self.started
        if first_global and () not in self.index:
            self._codes([()])
        self.started = True
        if not len(d) and not first_global:
            return empty_frame(self.names, self.sids)
        codes = self._frame_codes(d) if len(d) else np.zeros(0, dtype=np.int64)
        codes_t = np.concatenate([self._codes([()]), codes]) if first_global else codes
        _, first = np.unique(codes_t, return_index=True)
        touched = codes_t[np.sort(first)]   # in order of first appearance, as the per-group code
        o_ex, o_vals, o_anns = self._columns(touched)
        if first_global:
            o_ex[0] = False  # the global row appears with the first batch
        if len(d):
            self._absorb(d, codes, touched)
        n_ex, n_vals, n_anns = self._columns(touched)
        same = o_ex == n_ex
        for a, b in zip(o_vals + o_anns, n_vals + n_anns):
            same &= (a == b).astype(bool)   # elementwise; on object arrays Python's ==, None == None
        same &= o_ex | n_ex
        # per changed group: -old (if it existed) then +new (if it exists), groups in touched order
        g_old = np.flatnonzero(~same & o_ex)
        g_new = np.flatnonzero(~same & n_ex)
        which = np.concatenate([g_old, g_new])
        order = np.argsort(np.concatenate([2 * g_old, 2 * g_new + 1]), kind="stable")
        which = which[order]
        is_new = order >= len(g_old)
        vals = [np.where(is_new, nv[which], ov[which]) for ov, nv in zip(o_vals, n_vals)]
        anns = [np.where(is_new, na[which], oa[which]) for oa, na in zip(o_anns, n_anns)]
        out = self._frame(touched[which], vals, anns, np.where(is_new, 1, -1).astype(np.int64))
        if not self.is_global:
            dead = touched[~n_ex]
            if len(dead):
                self._release(dead)  # after `_frame`, which reads the dead groups' keys
        return out

    def _absorb(self, d: pd.DataFrame, codes: np.ndarray, touched: np.ndarray) -> None:
        m = d[M].to_numpy(dtype=np.int64)
        np.add.at(self.cnt, codes, m)
        for j in self.nn_idx:
            vals = column_values(exprs.evaluate(self.aggs[j].arg, d))
            if j in self.dec:
                vals = unscaled(vals, self.dec[j][1])
            ok = np.fromiter((v is not None for v in vals), dtype=bool, count=len(vals))
            np.add.at(self.nn[j], codes[ok], m[ok])
            if j in self.sum_idx:
                prods = np.empty(int(ok.sum()), dtype=object)
                prods[:] = [v * w for v, w in zip(vals, m.tolist()) if v is not None]
                np.add.at(self.sums[j], codes[ok], prods)
        for s, sid in enumerate(self.sids):
            col = d[fcol(sid)].to_numpy(dtype=object)
            fids = fragment_ids(col)
            if fids is not None:  # one fragment (or none) per row: net counts per (code, fragment) in numpy
                has = fids >= 0
                cs, fs, ws = codes[has], fids[has], m[has]
                self._add_fragments(s, *net_pairs(cs, fs, ws))
                continue
            acc: dict[tuple, int] = {}
            for c, a, w in zip(codes.tolist(), col.tolist(), m.tolist()):
                for f in a:
                    acc[(c, f)] = acc.get((c, f), 0) + w
            if acc:
                n = len(acc)
                self._add_fragments(s, np.fromiter((k[0] for k in acc), dtype=np.int64, count=n),
                                    np.fromiter((k[1] for k in acc), dtype=np.int64, count=n),
                                    np.fromiter(acc.values(), dtype=np.int64, count=n))
        bad = touched[self.cnt[touched] < 0]
        if len(bad):
            raise MaintenanceError(f"group {self.index.key(int(bad[0]))} of {type(self.node).__name__} "
                                   "lost more rows than it had")

    def _add_fragments(self, s: int, cs: np.ndarray, fs: np.ndarray, ws: np.ndarray) -> None:
        """Add net row counts `ws` per distinct (code `cs`, fragment `fs`) pair of scan `s`; a count
        below 0 is an error. Pairs that are their group's only pair in the batch and hit its
        single fragment (or an empty group) are applied vectorised; the rest one by one."""
        f1, c1, multi = self.f1[s], self.c1[s], self.multi[s]
        n = len(cs)
        if not n:
            return
        _, inv, per = np.unique(cs, return_inverse=True, return_counts=True)
        cur = f1[cs]
        simple = (per[inv] == 1) & ((cur == -1) | (cur == fs))
        if multi:
            simple &= np.fromiter((c not in multi for c in cs.tolist()), dtype=bool, count=n)
        sc, x = cs[simple], c1[cs[simple]] + ws[simple]
        if (x < 0).any():
            i = int(np.flatnonzero(x < 0)[0])
            raise MaintenanceError(f"fragment {int(fs[simple][i])} of group {self.index.key(int(sc[i]))} "
                                   "lost more rows than it had")
        f1[sc] = np.where(x > 0, fs[simple], -1)
        c1[sc] = x
        for c, f, w in zip(cs[~simple].tolist(), fs[~simple].tolist(), ws[~simple].tolist()):
            if w == 0:
                continue
            mu = multi.get(c)
            if mu is None:
                cur_f = int(f1[c])
                if cur_f == -1 or cur_f == f:
                    x1 = int(c1[c]) + w
                    if x1 < 0:
                        raise MaintenanceError(f"fragment {f} of group {self.index.key(c)} lost more rows than it had")
                    f1[c], c1[c] = (f, x1) if x1 else (-1, 0)
                    continue
                mu = multi[c] = {cur_f: int(c1[c])}
                f1[c], c1[c] = -1, 0
            x1 = mu.get(f, 0) + w
            if x1 < 0:
                raise MaintenanceError(f"fragment {f} of group {self.index.key(c)} lost more rows than it had")
            if x1:
                mu[f] = x1
            else:
                del mu[f]

    # ----- bulk initialisation (``bulk``) -----
    def load_bulk(self, keys: pd.DataFrame, cnt: np.ndarray, nn: dict, sums: dict, frags: list[pd.Series],
                  unscaled: dict | None = None) -> None:
        """Add one Spark aggregation's rows: `keys` the group-key columns (engine value forms), per
        row its row count `cnt`, per aggregate the non-NULL counts `nn[j]` and sums `sums[j]` (or,
        for a DECIMAL sum, `unscaled[j]`: an object array of its exact unscaled ints, None for NULL);
        `frags[s]` holds scan s's fragment per row (NULL: no fragment)."""
        codes = self._frame_codes(keys) if self.keys else self._codes([()] * len(cnt))
        w = np.asarray(cnt, dtype=np.int64)
        np.add.at(self.cnt, codes, w)
        for j, col in nn.items():
            np.add.at(self.nn[j], codes, np.asarray(col, dtype=np.int64))
        for j, col in sums.items():
            vals = ([unscaled_exact(py_scalar(v) if not isinstance(v, decimal.Decimal) else v, self.dec[j][1])
                     for v in col] if j in self.dec else [py_scalar(v) for v in col])
            ok = np.fromiter((v is not None for v in vals), dtype=bool, count=len(vals))
            arr = np.empty(int(ok.sum()), dtype=object)
            arr[:] = [v for v in vals if v is not None]
            np.add.at(self.sums[j], codes[ok], arr)
        for j, vals in (unscaled or {}).items():
            ok = np.asarray(nn[j]) > 0   # None exactly where no non-NULL value was summed
            np.add.at(self.sums[j], codes[ok], vals[ok])
        for s, col in enumerate(frags):
            has = col.notna().to_numpy(dtype=bool)
            cs, ws = codes[has], w[has]
            fs = col[has].to_numpy(dtype=np.int64)
            uniq, inv, per = np.unique(cs, return_inverse=True, return_counts=True)
            once = (per[inv] == 1) & (self.f1[s][cs] == -1)   # a group's only fragment: vectorised
            self.f1[s][cs[once]] = fs[once]
            self.c1[s][cs[once]] = ws[once]
            rest = ~once
            self._add_fragments(s, *net_pairs(cs[rest], fs[rest], ws[rest]))
        if self.is_global and () not in self.index:
            self._codes([()])

    # ----- introspection -----
    def snapshot(self):
        """The same picture as ``AggOp.snapshot``: group -> (cnt, nn, sums, multisets, fragments)."""
        out = {}
        n_a = len(self.aggs)
        for k, c in self.index.items():
            F = []
            for s in range(len(self.sids)):
                mu = self.multi[s].get(c)
                F.append(dict(mu) if mu is not None else
                         ({int(self.f1[s][c]): int(self.c1[s][c])} if self.c1[s][c] else {}))
            out[k] = (int(self.cnt[c]), tuple(int(self.nn[j][c]) for j in range(n_a)),
                      tuple(self.sums[j][c] for j in range(n_a)), (None,) * n_a, tuple(F))
        return out

    def state_bytes(self) -> int:
        """Arrays plus an estimate of ~200 bytes per group key (tuple, dict slot, list slot) and
        per spilled fragment entry; estimated so that a save does not walk millions of objects."""
        arrays = self.cnt.nbytes + self.nn.nbytes + self.f1.nbytes + self.c1.nbytes
        arrays += sum(s.nbytes + 32 * len(s) for s in self.sums)
        spilled = sum(len(mu) for multi in self.multi for mu in multi.values())
        return int(arrays + self.index.nbytes() + 200 * spilled)
