"""From a parsed query to sketch-size estimates per candidate attribute (seed 002, Alg. 1 + Alg. 2).

Pipeline: ``analyze`` finds the innermost aggregation, the table to sample and the HAVING / top-k /
nested shape; ``get_sample`` returns the cached stratified sample of that table; ``estimate`` runs the
aggregation's input (joins, WHERE) over the sample, estimates every group, and sizes the sketch of
each (attribute, granularity) with ``estimators.size``.

Decisions (documented deviations from the paper):

* **Sampled table.** The *largest* table read below the innermost aggregation (the fact / FK side
  of a star join).  Dimension tables are joined *in full* to the sample, so the joined sample is a
  sample of the join with the fact rows' inclusion probabilities (digest C8, instead of wander
  join).  If a sampled row joins several rows, its stratum's ``N_h`` is scaled by rows/sampled rows
  so the Horvitz-Thompson weight per fact row stays ``N_h/n_h`` (the bootstrap then resamples joined
  rows, not fact rows: slightly too narrow intervals).  A query reading the fact table twice is not
  estimated.
* **Strata** = the group-by attributes that are plain columns of the sampled table (base names).
  Group-by keys on dimension columns or expressions make groups span strata, which the estimators
  handle as domains; no such key at all gives a uniform sample.
* **WHERE / joins** are applied by Spark SQL to the sample (fact scan replaced by the sample); sample
  rows that do not survive are kept as failing rows (``__u`` false), so per-stratum weights stay
  right.  ``__u`` is also a group column, which keeps the failing rows out of every real group.
* **HAVING** must be AND/OR/NOT over ``aggregate op constant`` (and BETWEEN); conditions on group
  keys in HAVING, expressions of aggregates and DISTINCT aggregates are refused with a reason.
  Top-k orders by its first ORDER BY key, which must be an aggregate.  Nested: one outer
  aggregation grouped by a subset of the inner keys, over inner aggregates / keys / ``count(*)``.
* **Cache.** A sample is keyed by (table, sorted strata, theta, seed, table version): Parquet under
  ``tables/<table>/samples/`` plus a row in the ``samples`` table.  A new table version is a new
  key, so the old sample is never used again (invalidation, not maintenance); writing a sample for a
  newer version deletes the table's older samples.
* **Shrinkage** (``shrink_groups``, on by default): SUM/AVG group estimates are pulled towards the
  mean of all groups by empirical Bayes before pass probabilities are taken -- without it, noise
  larger than the true spread between groups inflates the sketches of upper-tail HAVING thresholds
  (TPC-H at 5 %: 0.72 estimated vs 0.54 real; with it 0.57).  The paper's point classification
  (``sel_point``) then under-counts; the ranking uses the expectation.
* **Granularities.** One fine partition (the largest requested fragment count) is built and stored
  per attribute; coarser ones are derived from it in memory (``select.derive_partition``) and stored
  only if a sketch is captured on them (``select.store_partition``).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
from sqlglot import exp

from advisor.errors import BadInput
from advisor.partitions import assign_column
from advisor.plan import ir
from advisor.plan.to_sql import esql, q
from advisor.select import derive_partition, fine_partition
from estimators.aggregates import And, Cmp, Not, Or, agg_name

SID, U = "__sid", "__u"
_OPS = {exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=", exp.EQ: "=", exp.NEQ: "!="}
_FLIP = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "=": "=", "!=": "!="}


class CannotEstimate(Exception):
    """The query's shape is outside what the estimators model; the message says which part."""


@dataclass
class Shape:
    """What the estimators need from a query (internal attribute names unless said otherwise)."""

    kind: str                     # 'having' | 'topk' | 'nested' | 'groupby' (no HAVING)
    inner: ir.Aggregate
    fact: ir.Scan                 # the sampled scan
    keys: list                    # inner group-by keys
    strata: list                  # base columns of the fact table used as strata (sorted)
    aggs: list                    # estimator aggregates [(func, frame column or None)]
    args: dict                    # frame column -> SQL of the aggregate argument
    having: object = None         # estimators predicate over inner aggregates
    topk: Optional[tuple] = None  # (estimator aggregate name, k, descending)
    outer_keys: list = field(default_factory=list)
    outer_aggs: list = field(default_factory=list)
    outer_having: object = None
    fact_cols: dict = field(default_factory=dict)  # base column -> internal name in the fact scan
    relevant: set = field(default_factory=set)     # base columns used by keys, filters, joins, args
    agg_inputs: set = field(default_factory=set)   # base columns feeding aggregate arguments

    def determined(self, attr: str) -> bool:
        """A group-by attribute: all rows of a group share its value, so one row shows the fragment."""
        return self.fact_cols.get(attr) in self.keys


def _const(e) -> Optional[float]:
    if isinstance(e, exp.Paren):
        return _const(e.this)
    if isinstance(e, exp.Neg):
        v = _const(e.this)
        return None if v is None else -v
    if isinstance(e, exp.Literal) and not e.is_string:
        return float(e.this)
    return None


def to_predicate(cond, names: dict):
    """HAVING condition -> estimators predicate; ``names``: attribute -> estimator aggregate name."""
    if isinstance(cond, exp.Paren):
        return to_predicate(cond.this, names)
    if isinstance(cond, exp.And):
        return And([to_predicate(cond.this, names), to_predicate(cond.expression, names)])
    if isinstance(cond, exp.Or):
        return Or([to_predicate(cond.this, names), to_predicate(cond.expression, names)])
    if isinstance(cond, exp.Not):
        return Not(to_predicate(cond.this, names))

    def agg(e):
        e = e.this if isinstance(e, exp.Paren) else e
        return names.get(e.name) if isinstance(e, exp.Column) else None

    if isinstance(cond, exp.Between):
        a, lo, hi = agg(cond.this), _const(cond.args.get("low")), _const(cond.args.get("high"))
        if a is not None and lo is not None and hi is not None:
            return Cmp(a, "between", lo, hi)
    elif type(cond) in _OPS:
        op = _OPS[type(cond)]
        if agg(cond.this) is not None and _const(cond.expression) is not None:
            return Cmp(agg(cond.this), op, _const(cond.expression))
        if agg(cond.expression) is not None and _const(cond.this) is not None:
            return Cmp(agg(cond.expression), _FLIP[op], _const(cond.this))
    text = re.sub(r"`?([a-z0-9_]+?)_\d+`?", r"\1", cond.sql(dialect="spark"))[:80]
    raise CannotEstimate(f"HAVING part {text!r} is not 'aggregate op constant' "
                         "(AND/OR/NOT/BETWEEN of such comparisons are supported)")


def _path(root: ir.Node, target: ir.Node) -> list:
    if root is target:
        return [root]
    for c in root.children:
        p = _path(c, target)
        if p:
            return [root] + p
    return []


def _conds(chain: list, names: dict):
    """AND of the Select conditions in a chain of Project/Select nodes (bottom-up), tracking aliases."""
    preds = []
    for n in chain:
        if isinstance(n, ir.Select):
            preds.append(to_predicate(n.cond, {k: v for k, v in names.items() if not k.startswith("key:")}))
        elif isinstance(n, ir.Project):
            for e, c in n.items:
                if isinstance(e, exp.Column) and e.name in names:
                    names[c.name] = names[e.name]
                if isinstance(e, exp.Column) and "key:" + e.name in names:
                    names["key:" + c.name] = names["key:" + e.name]
        else:
            raise CannotEstimate(f"{type(n).__name__} between aggregation levels is not supported")
    return None if not preds else preds[0] if len(preds) == 1 else And(preds)


def analyze(query: ir.Query, rows_of: Callable[[str], int]) -> Shape:
    """Find the innermost aggregation, the table to sample and the HAVING/top-k/nested structure."""
    if query.unsupported:
        raise CannotEstimate(query.unsupported)
    aggs = [n for n in query.root.walk() if isinstance(n, ir.Aggregate)]
    if not aggs:
        raise CannotEstimate("the query has no aggregation (nothing to estimate: every row passing "
                             "WHERE is provenance)")
    inner_l = [a for a in aggs if not any(isinstance(m, ir.Aggregate) for m in a.child.walk())]
    if len(aggs) > 2 or len(inner_l) != 1:
        raise CannotEstimate("more than one aggregation per level or more than two levels")
    inner = inner_l[0]
    for n in inner.child.walk():
        if not isinstance(n, (ir.Scan, ir.Select, ir.Join, ir.Project)):
            raise CannotEstimate(f"{type(n).__name__} below the aggregation is not supported")
    scans = [n for n in inner.child.walk() if isinstance(n, ir.Scan)]
    fact_table = max(sorted({s.table for s in scans}), key=rows_of)
    facts = [s for s in scans if s.table == fact_table]
    if len(facts) > 1:
        raise CannotEstimate(f"{fact_table} is read more than once below the aggregation")
    fact = facts[0]
    fact_cols = {c.source: c.name for c in fact.cols}
    base = {c.name: c.source for c in fact.cols}
    path = _path(query.root, inner)[:-1][::-1]  # nodes above `inner`, bottom-up
    args, est_aggs, names = {}, [], {}
    for i, a in enumerate(inner.aggs):
        if a.distinct:
            raise CannotEstimate(f"{a.func}(DISTINCT ...) is not supported by the estimators")
        col = None if a.arg is None else f"__a{i}"
        if col:
            args[col] = esql(a.arg)
        est_aggs.append((a.func, col))
        names[a.out.name] = agg_name(a.func, col)
    for k in inner.keys:
        names["key:" + k] = k
    used = set(inner.keys) | {c for a in inner.aggs for c in ir.referenced(a.arg)}
    for n in inner.child.walk():
        if isinstance(n, (ir.Select, ir.Join)):
            used |= ir.referenced(n.cond)
    keys_base = [base[k] for k in inner.keys if k in base]
    shape = Shape("groupby", inner, fact, list(inner.keys), sorted(keys_base), est_aggs, args,
                  fact_cols=fact_cols, relevant={base[c] for c in used if c in base},
                  agg_inputs={base[c] for a in inner.aggs for c in ir.referenced(a.arg) if c in base})
    outer = next((a for a in aggs if a is not inner), None)
    stop = path.index(outer) if outer is not None else next(
        (i for i, n in enumerate(path) if isinstance(n, ir.TopK)), len(path))
    shape.having = _conds(path[:stop], names)
    shape.kind = "having" if shape.having is not None else "groupby"
    rest = path[stop:]
    if outer is not None:
        okeys = []
        for k in outer.keys:
            if "key:" + k not in names:
                raise CannotEstimate("the outer GROUP BY must use inner group-by columns")
            okeys.append(names["key:" + k])
        onames = {}
        for a in outer.aggs:
            if a.distinct or (a.arg is not None and not isinstance(a.arg, exp.Column)):
                raise CannotEstimate("outer aggregates must be over an inner column or count(*)")
            ref = None if a.arg is None else names.get(a.arg.name) or names.get("key:" + a.arg.name)
            if a.arg is not None and ref is None:
                raise CannotEstimate(f"outer aggregate {a.func} over an expression is not supported")
            shape.outer_aggs.append((a.func, ref))
            onames[a.out.name] = f"{a.func}({'*' if ref is None else ref})"
        shape.outer_keys = okeys
        rest = rest[1:]
        stop = next((i for i, n in enumerate(rest) if isinstance(n, ir.TopK)), len(rest))
        shape.outer_having = _conds(rest[:stop], onames)
        shape.kind, rest = "nested", rest[stop:]
    if rest and isinstance(rest[0], ir.TopK):
        if outer is not None:
            raise CannotEstimate("top-k over a nested aggregation is not supported")
        t = rest[0]
        o = names.get(t.order[0][0]) if t.order else None
        if o is None:
            raise CannotEstimate("top-k must order by an aggregate (ordering by a group-by column "
                                 "or an expression is not modelled)")
        shape.topk, shape.kind = (o, t.k, not t.order[0][1]), "topk"
        rest = rest[1:]
    for n in rest:
        if not isinstance(n, ir.Project):
            raise CannotEstimate(f"{type(n).__name__} above the aggregation is not supported")
    return shape


# ---------------- samples ----------------
@dataclass
class SampleInfo:
    """A cached sample: where it is and how it was drawn; ``cached`` says whether it was reused."""

    table: str
    strata: list
    theta: float
    seed: int
    version: int
    path: str
    meta: dict
    cached: bool
    seconds: float


SAMPLER = 2  # bump when the sampling rule changes: cached samples of other versions are redrawn


def get_sample(catalog, table: str, strata: list, theta: float, seed: int, version: int) -> SampleInfo:
    """The stratified sample for the key (table, strata, theta, seed, version): reuse or draw + store."""
    from estimators.sampling import stratified_sample

    strata = sorted(strata)
    sj = json.dumps(strata)
    r = catalog.store.one("SELECT * FROM samples WHERE table_name=? AND strata_json=? AND theta=? AND seed=? "
                          "AND table_version=? ORDER BY id DESC LIMIT 1", (table, sj, theta, seed, version))
    if r is not None:
        from pathlib import Path
        if Path(r["path"]).exists() and json.loads(r["meta_json"]).get("sampler") == SAMPLER:
            return SampleInfo(table, strata, theta, seed, version, r["path"], json.loads(r["meta_json"]),
                              True, 0.0)
    t0 = time.perf_counter()
    key = hashlib.sha1(f"{sj}|{theta}|{seed}".encode()).hexdigest()[:12]
    path = catalog.root / table / "samples" / f"v{version:06d}_{key}"
    s = stratified_sample(catalog.read(table, version, with_rid=True), strata, theta, seed, id_col="_rid")
    s.df.write.mode("overwrite").parquet(str(path))
    secs = time.perf_counter() - t0
    meta = {"sampler": SAMPLER, "population": s.population, "n_strata": s.n_strata, "uniform_fallback": s.uniform_fallback,
            "sample_size": s.sample_size, "seconds": round(secs, 3)}
    with catalog.store.tx() as c:
        old = c.execute("SELECT path FROM samples WHERE table_name=? AND table_version<?",
                        (table, version)).fetchall()
        c.execute("DELETE FROM samples WHERE table_name=? AND table_version<?", (table, version))
        c.execute("INSERT INTO samples(table_name, strata_json, theta, seed, table_version, path, meta_json,"
                  " created) VALUES (?,?,?,?,?,?,?,?)", (table, sj, theta, seed, version, str(path),
                                                         json.dumps(meta), time.time()))
    for o in old:
        shutil.rmtree(o["path"], ignore_errors=True)
    return SampleInfo(table, strata, theta, seed, version, str(path), meta, False, secs)


# ---------------- estimation ----------------
@dataclass
class Estimation:
    """Result of ``estimate``: per (attr, n_target) a SizeEstimate, plus timings and the sample used."""

    shape: Shape
    sample: SampleInfo
    sizes: dict            # (attr, n_target) -> estimators.size.SizeEstimate
    partitions: dict       # (attr, n_target) -> RangePartition
    groups: int
    seconds: dict
    notes: list


def _spj_sql(node: ir.Node, fact_id: int, fact_view: str, other: Callable[[ir.Scan], str]) -> str:
    """SQL for a Scan/Select/Join/Project subtree; the fact scan reads the sample and carries its id."""
    if isinstance(node, ir.Scan):
        items = [f"{q(c.source)} AS {q(c.name)}" for c in node.cols]
        if node.scan_id == fact_id:
            return f"SELECT {', '.join(items)}, `_rid` AS {SID} FROM {fact_view}"
        return f"SELECT {', '.join(items)} FROM {other(node)}"
    if isinstance(node, ir.Select):
        return f"SELECT * FROM ({_spj_sql(node.child, fact_id, fact_view, other)}) s WHERE {esql(node.cond)}"
    if isinstance(node, ir.Join):
        l_sql = _spj_sql(node.left, fact_id, fact_view, other)
        r_sql = _spj_sql(node.right, fact_id, fact_view, other)
        on = f" ON {esql(node.cond)}" if node.cond is not None else ""
        return f"SELECT * FROM ({l_sql}) l {'JOIN' if on else 'CROSS JOIN'} ({r_sql}) r{on}"
    items = [f"{esql(e)} AS {q(c.name)}" for e, c in node.items]
    if any(isinstance(m, ir.Scan) and m.scan_id == fact_id for m in node.walk()):
        items.append(SID)
    return f"SELECT {', '.join(items)} FROM ({_spj_sql(node.child, fact_id, fact_view, other)}) p"


_FRAGS: "OrderedDict[tuple, dict]" = OrderedDict()  # (sample path, mtime) -> base frame + id columns


def _pkey(part) -> tuple:
    return part.attr, part.dtype, hashlib.sha1(json.dumps(list(part.boundaries), default=str).encode()).hexdigest()


def _fragment_ids(df, path: str, parts: dict):
    """Sample ids, strata and one fragment-id column per partition: ``assign_column`` (binary search
    in Spark) for numbers and dates; for strings and wide decimals the same ``searchsorted`` as its
    pandas UDF, on the driver (the sample is small; no Python workers).  Columns are kept in a small
    in-process LRU per sample file, so later queries over the same sample skip this job."""
    import os

    import pandas as pd

    from advisor.partitions import decode_value, uses_bucketizer

    key = (path, os.path.getmtime(path))
    entry = _FRAGS.pop(key, None) or {"base": None, "cols": {}}
    _FRAGS[key] = entry
    while len(_FRAGS) > 4:
        _FRAGS.popitem(last=False)
    need = {k: p for k, p in sorted(parts.items()) if _pkey(p) not in entry["cols"]}
    if need or entry["base"] is None:
        spark_cols = []
        for i, p in enumerate(need.values()):
            if uses_bucketizer(p.dtype):
                df = assign_column(df, p.attr, p, f"__f{i}")
                spark_cols.append((i, f"__f{i}"))
        raw = sorted({p.attr for p in need.values() if not uses_bucketizer(p.dtype)})
        got = df.select("_rid", "_n_g", "_stratum", *[c for _, c in spark_cols], *[q(a) for a in raw]).toPandas()
        if entry["base"] is None:
            entry["base"] = got[["_rid", "_n_g", "_stratum"]].rename(columns={"_rid": SID})
        order = pd.Index(got["_rid"]).get_indexer(entry["base"][SID])
        for i, p in enumerate(need.values()):
            if uses_bucketizer(p.dtype):
                ids = got[f"__f{i}"].to_numpy()
            else:
                vals = got[p.attr]
                bounds = np.array([decode_value(b, p.dtype) for b in p.boundaries], dtype=object)
                ids = np.full(len(vals), p.null_id, dtype=np.int64)
                ok = ~pd.isna(vals).to_numpy()
                if ok.any():
                    ids[ok] = np.searchsorted(bounds, vals.to_numpy(dtype=object)[ok], side="right")
            entry["cols"][_pkey(p)] = np.asarray(ids)[order]
    out, fcols = entry["base"].copy(), {}
    for i, (k, p) in enumerate(sorted(parts.items())):
        fcols[k] = f"__f{i}"
        out[f"__f{i}"] = entry["cols"][_pkey(p)]
    return out, fcols


def sample_frame(catalog, shape: Shape, sample: SampleInfo, parts: dict, versions: dict):
    """Pandas frame: one row per (sample row, joined row) with keys, arguments, ``__u``, fragment ids.

    Two Spark jobs (the first cached per sample): the sample's ids/strata/fragment ids, and the
    aggregation's input (joins, WHERE) over the sample; merged on the driver by sample row id (rows
    that do not survive get ``__u`` false)."""
    from advisor.execute import table_view

    df = catalog.spark.read.parquet(sample.path)
    view = catalog.view_name(sample.table, sample.version, "_smp" + hashlib.sha1(sample.path.encode()).hexdigest()[:8])
    df.createOrReplaceTempView(view)
    base, fcols = _fragment_ids(df, sample.path, parts)
    spj = _spj_sql(shape.inner.child, shape.fact.scan_id, view,
                   lambda s: table_view(catalog, s.table, versions.get(s.table)))
    top = ", ".join([q(k) for k in shape.keys] + [f"CAST({e} AS DOUBLE) AS {c}" for c, e in shape.args.items()]
                    + [SID])
    out = catalog.spark.sql(f"SELECT {top} FROM ({spj}) x").toPandas()
    pdf = base.merge(out, on=SID, how="left", indicator=True)
    pdf[U] = (pdf.pop("_merge") == "both").to_numpy()
    if pdf[SID].duplicated().any():  # a sampled row joined several rows: keep weights per fact row
        g = pdf.groupby("_stratum")[SID]
        pdf["_n_g"] = pdf["_n_g"] * g.transform("size") / g.transform("nunique")
    return pdf, fcols


def shrink_groups(est, rows, gcols: list, aligned: bool = True, floor: float = 0.05) -> None:
    """Empirical-Bayes shrinkage of SUM/AVG group estimates, in place (an [INFERRED] repair).

    Why: when the sampling noise of a group's estimate is larger than the true spread between groups
    (TPC-H: uniform data, small groups), the noisy estimates are spread wider than the truth, so a
    threshold in the upper part of the distribution is passed by too many groups and sketches look
    larger than they are.  Model: ``m_g ~ N(mu, tau^2)`` across groups, estimate ``~ N(m_g, v_g)``,
    ``tau^2 = max(var(m) - mean(v), floor * var(m))``.  ``m_g`` is the row mean ``SUM_g / N_g`` when
    groups are strata (``aligned``: ``N_g`` is exact) and ``AVG_g``; else the total ``SUM_g`` (its
    ``N_g`` is estimated too).  ``v_g`` is the larger of the replicate variance and, for row means,
    ``s_w^2 (1 - n_g/N_g) / n_g`` with the pooled within-group variance ``s_w^2`` (one sampled row
    has no replicate spread).  Each group's point becomes the posterior mean
    ``mu + (1-B)(m - mu)``, ``B = v/(v + tau^2)``; its replicates are rescaled (and topped up with
    normal noise where narrower than the posterior) so pass probabilities become posterior
    probabilities.  Exact groups and groups without a passing sampled row are left alone.  Known
    limit: a heavy upper tail (flight delays) is under-counted by the normal prior; a nonparametric
    prior (NPMLE) fixed those queries but over-shrank others (noise of 2-row means of delays is far
    from normal) and was worse overall in the harness, so it was dropped.
    """
    import warnings

    fr = est.frame
    rng = np.random.default_rng(est.seed + 7919)
    for (f, col), name in zip(est.aggs, est.names):
        if f not in ("sum", "avg") or col is None or name not in est.replicates:
            continue
        N, n = fr["N"].to_numpy(float), fr["n"].to_numpy(float)
        scale = np.where(N > 0, N, 1.0) if f == "sum" and aligned else np.ones(len(fr))
        m = est.point(name) / scale
        ok = fr["exists"].to_numpy(bool) & ~fr["exact"].to_numpy(bool) & np.isfinite(m) & (n > 0)
        g = rows.groupby(gcols, dropna=False)[col]
        cnt, var = g.count(), g.var(ddof=1)
        dof = float((cnt - 1).clip(lower=0).sum())
        if ok.sum() < 3 or dof <= 0:
            continue
        sw2 = float(((cnt - 1).clip(lower=0) * var.fillna(0)).sum()) / dof
        v = (est.stderr(name) / scale) ** 2
        if f == "avg" or aligned:
            v = np.maximum(v, sw2 * np.clip(1.0 - n / np.where(N > 0, N, 1.0), 0.0, 1.0) / np.maximum(n, 1.0))
        v = np.nan_to_num(v)
        mu, vm = float(np.mean(m[ok])), float(np.var(m[ok]))
        tau2 = max(vm - float(np.mean(v[ok])), floor * vm)
        if tau2 <= 0:
            continue
        B = np.where(ok, v / (v + tau2), 0.0)
        post = np.where(ok, mu + (1.0 - B) * (m - mu), m)
        reps = est.replicates[name] / scale[None, :]
        dev = (reps - m[None, :]) * np.sqrt(1.0 - B)[None, :]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            rep_var = np.nan_to_num(np.nanvar(dev, axis=0))
        extra = np.sqrt(np.clip((1.0 - B) * v - rep_var, 0.0, None)) * ok
        new = post[None, :] + dev + extra[None, :] * rng.standard_normal(reps.shape)
        new = np.where(ok[None, :], new, reps) * scale[None, :]
        est.replicates[name] = new
        fr[name] = post * scale
        a = (1.0 - est.confidence) / 2.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            sd, (lo, hi) = np.nanstd(new, axis=0), np.nanquantile(new, [a, 1.0 - a], axis=0)
        fr[name + "_se"] = np.where(ok, sd, fr[name + "_se"].to_numpy(float))
        fr[name + "_lo"] = np.where(ok, lo, fr[name + "_lo"].to_numpy(float))
        fr[name + "_hi"] = np.where(ok, hi, fr[name + "_hi"].to_numpy(float))


def estimate(catalog, shape: Shape, plan: dict, theta: float = 0.05, seed: int = 0,
             method: str = "bootstrap", B: int = 50, versions: Optional[dict] = None,
             progress: Optional[Callable[[str], None]] = None, shrink: bool = True) -> Estimation:
    """Sample (or reuse), estimate the groups, then size every attribute at its granularities
    (``plan``: attribute -> fragment counts).  ``progress`` gets one message per step."""
    from estimators.aggregates import estimate_groups, estimate_nested
    from estimators.size import estimate_size, size_for_having
    from estimators.topk import size_for_topk, topk_probability

    if not 0.0 < theta <= 1.0:
        raise BadInput(f"the sample rate must be in (0, 1], got {theta}")
    if not plan:
        raise ValueError("nothing to estimate: empty plan")
    say = progress or (lambda _m: None)
    table = shape.fact.table
    versions = versions or {table: catalog.current_version(table)}
    v = versions[table]
    secs: dict = {}
    say(f"sampling {table} (theta={theta:g}, strata: {', '.join(shape.strata) or 'none'})")
    sample = get_sample(catalog, table, shape.strata, theta, seed, v)
    secs["sampling"] = sample.seconds
    t0 = time.perf_counter()
    parts = {}
    for a, grans in sorted(plan.items()):
        say(f"partition {table}.{a}")
        fine = fine_partition(catalog, table, a, max(grans), v)
        for n in grans:
            parts[(a, n)] = derive_partition(fine, n) if n != max(grans) else fine
    secs["partitions"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    say("running the query's joins and filters over the sample")
    pdf, fcols = sample_frame(catalog, shape, sample, parts, versions)
    secs["sample_query"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    gcols = shape.keys + [U]
    est = estimate_groups(pdf, gcols, shape.aggs, method=method, B=B, seed=seed, where=U)
    if shrink:
        shrink_groups(est, pdf[pdf[U]], gcols, aligned=len(shape.strata) == len(shape.keys))
    nested = topk = None
    if shape.kind == "nested":
        nested = estimate_nested(est, shape.outer_keys + [U], shape.outer_aggs, shape.having, shape.outer_having)
    elif shape.kind == "topk":
        topk = topk_probability(est, shape.topk[0], shape.topk[1], shape.topk[2], shape.having)
    secs["groups"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    passing = pdf[pdf[U]]
    notes = ["uniform sample: more groups than the sample budget, unsampled groups count as failing"] \
        if sample.meta.get("uniform_fallback") else []
    sizes = {}
    for (a, n), part in parts.items():
        say(f"sizing {table}.{a} at {n} fragments")
        kw = dict(frag_col=fcols[(a, n)], determined=shape.determined(a), total_rows=float(sum(part.sizes)),
                  seed=seed)
        fsz = np.asarray(part.sizes, dtype=float)
        if nested is not None:
            sizes[(a, n)] = estimate_size(passing, nested.inner_frame, fsz, group_cols=gcols,
                                          pass_replicates=nested.provenance, **kw)
        elif topk is not None:
            sizes[(a, n)] = size_for_topk(passing, topk, fsz, group_cols=gcols, **kw)
        else:
            sizes[(a, n)] = size_for_having(passing, est, shape.having, fsz, **kw)
    secs["sizes"] = time.perf_counter() - t0
    return Estimation(shape, sample, sizes, parts, est.n_groups, secs, notes)
