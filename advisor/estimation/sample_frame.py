"""The sample as the estimators read it: the aggregation's input (joins, WHERE) run over the
stored sample with Spark or on the driver, one row per sampled row with its stratum weight, its
pass flag (``U``) and, per candidate partition, its fragment id (cached per sample file).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Callable

import numpy as np
import pandas as pd

from advisor.caches import BoundedMemo
from advisor.engine.execute import table_view
from advisor.estimation import sample_files
from advisor.estimation.query_shape import Shape
from advisor.estimation.sample_eval import dimension_frame, local_frame, local_rows
from advisor.estimation.sample_store import SampleInfo, sampled_rows, widen_sample
from advisor.partition.assign_pandas import assign
from advisor.plan import ir
from advisor.plan.to_sql import Gen, Source, esql, gen, q

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog

SID, U = "__sid", "__u"


def spj_sql(node: ir.Node, fact_id: int, fact_view: str, other: Callable[[ir.Scan], str]) -> str:
    """SQL for a Scan/Select/Join/Project subtree (semi- and anti-joins with their right sides read
    in full); the fact scan reads the sample and carries its id."""
    if isinstance(node, ir.Scan):
        items = [f"{q(c.source)} AS {q(c.name)}" for c in node.cols]
        if node.scan_id == fact_id:
            return f"SELECT {', '.join(items)}, `_rid` AS {SID} FROM {fact_view}"
        return f"SELECT {', '.join(items)} FROM {other(node)}"
    if isinstance(node, ir.Select):
        return f"SELECT * FROM ({spj_sql(node.child, fact_id, fact_view, other)}) s WHERE {esql(node.cond)}"
    if isinstance(node, ir.Join):
        l_sql = spj_sql(node.left, fact_id, fact_view, other)
        r_sql = spj_sql(node.right, fact_id, fact_view, other)
        on = f" ON {esql(node.cond)}" if node.cond is not None else ""
        return f"SELECT * FROM ({l_sql}) l {'JOIN' if on else 'CROSS JOIN'} ({r_sql}) r{on}"
    if isinstance(node, (ir.SemiJoin, ir.AntiJoin)):  # the right side in full (``query_shape._fact_scan``)
        l_sql = spj_sql(node.left, fact_id, fact_view, other)
        r_sql, _ = gen(node.right, Gen(lambda s: Source(other(s))))
        kw = "LEFT SEMI JOIN" if isinstance(node, ir.SemiJoin) else "LEFT ANTI JOIN"
        return f"SELECT * FROM ({l_sql}) l {kw} ({r_sql}) r ON {esql(node.cond)}"
    items = [f"{esql(e)} AS {q(c.name)}" for e, c in node.items]
    if any(isinstance(m, ir.Scan) and m.scan_id == fact_id for m in node.walk()):
        items.append(SID)
    return f"SELECT {', '.join(items)} FROM ({spj_sql(node.child, fact_id, fact_view, other)}) p"


_FRAGS_KEEP = 16  # samples; an entry is a few arrays of the sample's length
# (sample path, mtime) -> base frame + id columns
_FRAGS = BoundedMemo("sample fragment ids", _FRAGS_KEEP, rank=1, keep_one=False)


def partition_key(part) -> tuple:
    return part.attr, part.dtype, hashlib.sha1(json.dumps(list(part.boundaries), default=str).encode()).hexdigest()


def _fragment_ids(path: str, parts: dict):
    """Sample ids, strata and one fragment-id column per partition, computed on the driver: the
    sample's rows are read with pyarrow (``sample_query.local_rows``) and assigned with the
    maintenance engine's ``fragments.assign``, the tested twin of Spark's ``assign_column``.  No
    Spark job: one per (sample, partition) cost ~0.12 s, as much as the rest of a cached
    estimation, and came back whenever queries alternated between more samples than the cache held
    (48 ms a query on flights).  The columns are kept in an in-process LRU per sample file."""



    key = (path, sample_files.stamp(path))
    entry = _FRAGS.pop(key, None) or {"base": None, "cols": {}}
    _FRAGS.put(key, entry)
    need = {k: p for k, p in sorted(parts.items()) if partition_key(p) not in entry["cols"]}
    if need or entry["base"] is None:
        rows = local_rows(path, ["_n_g", "_stratum", *sorted({p.attr for p in need.values()})])
        if entry["base"] is None:
            entry["base"] = pd.DataFrame({SID: rows["_rid"].to_numpy(dtype=np.int64),
                                          "_n_g": rows["_n_g"].to_numpy(dtype=np.int64),
                                          # strata as int codes in the strings' sorted order: the
                                          # estimators only group by them, and factorizing 10^5
                                          # JSON strings per query cost ~5 ms
                                          "_stratum": pd.factorize(rows["_stratum"].to_numpy(dtype=object),
                                                                   sort=True, use_na_sentinel=False)[0]
                                          .astype(np.int64)})
        order = pd.Index(rows["_rid"].to_numpy(dtype=np.int64)).get_indexer(entry["base"][SID])
        for p in need.values():
            entry["cols"][partition_key(p)] = assign(rows[p.attr], p)[order]
    out, fcols = entry["base"].copy(), {}
    for i, (k, p) in enumerate(sorted(parts.items())):
        fcols[k] = f"__f{i}"
        out[f"__f{i}"] = entry["cols"][partition_key(p)]
    return out, fcols


def sample_frame(catalog: Catalog, shape: Shape, sample: SampleInfo, parts: dict, versions: dict, local: bool = True):
    """Pandas frame: one row per (sample row, joined row) with keys, arguments, ``__u``, fragment ids.

    Two parts merged on the driver by sample row id (rows that do not survive get ``__u`` false):
    the sample's ids/strata/fragment ids (on the driver, cached per sample), and the aggregation's
    input (joins, WHERE) over the sample -- on the driver (``sample_query.local_frame``, joined
    tables read in full with pyarrow) when the engine evaluates the subtree and ``local``, else a
    Spark job."""

    df = None

    def spark_df():
        nonlocal df
        if df is None:
            df = sampled_rows(catalog.spark.read.parquet(sample.path))
        return df

    own = {k: p for k, p in parts.items() if p.table == sample.table}
    base, fcols = _fragment_ids(sample.path, own)

    def dimension(scan):
        v = versions.get(scan.table) or catalog.current_version(scan.table)
        return dimension_frame(catalog, scan, v)

    out = local_frame(shape, sample.path, SID, dimension) if local else None
    if out is None:
        if widen_sample(catalog, sample.table, sample.version, sample.path, sample.meta, None):
            df = None  # the Spark plan reads every column of the scan: widen the sample to all of them
        view = catalog.view_name(sample.table, sample.version,
                                 "_smp" + hashlib.sha1(sample.path.encode()).hexdigest()[:8])
        spark_df().createOrReplaceTempView(view)
        spj = spj_sql(shape.inner.child, shape.fact.scan_id, view,
                       lambda s: table_view(catalog, s.table, versions.get(s.table)))
        top = ", ".join([q(k) for k in shape.keys] + [f"CAST({e} AS DOUBLE) AS {c}" for c, e in shape.args.items()]
                        + [SID])
        out = catalog.spark.sql(f"SELECT {top} FROM ({spj}) x").toPandas()
    pdf = _combine(base, out)
    for i, (k, p) in enumerate(sorted((k, p) for k, p in parts.items() if k not in own)):
        fcols[k] = f"__d{i}"  # a joined table's group-by column: the fragment of each row's key value
        pdf[f"__d{i}"] = _key_fragments(pdf[_key_column(shape, p)], p)
    if pdf[SID].duplicated().any():  # a sampled row joined several rows: keep weights per fact row
        g = pdf.groupby("_stratum")[SID]
        pdf["_n_g"] = pdf["_n_g"] * g.transform("size") / g.transform("nunique")
    return pdf, fcols


def _combine(base, out):
    """``base`` (one row per sampled row) left-joined with the aggregation's input ``out`` on the
    sample row id, ``U`` marking the rows that reach the aggregation."""

    if len(out) == len(base) and np.array_equal(out[SID].to_numpy(dtype=np.int64), base[SID].to_numpy()):
        # every sampled row reaches the aggregation once, in the sample's order (no WHERE, no
        # fan-out): the merge's result without its hash join (~6 ms of a crimes estimate)
        pdf = pd.concat([base, out.drop(columns=[SID]).reset_index(drop=True)], axis=1)
        pdf[U] = np.ones(len(pdf), dtype=bool)
        return pdf
    pdf = base.merge(out, on=SID, how="left", indicator=True)
    pdf[U] = (pdf.pop("_merge") == "both").to_numpy()
    return pdf


def _key_column(shape: Shape, part) -> str:
    """The frame column (an inner group-by key) holding a joined table's partitioned column."""
    scan = next(s for s in shape.inner.child.walk() if isinstance(s, ir.Scan) and s.table == part.table)
    return next(c.name for c in scan.cols if c.source == part.attr and c.name in shape.keys)


def _key_fragments(vals, part) -> np.ndarray:
    """Fragment ids of key values (NULL and unmatched rows: the partition's NULL fragment)."""
    return np.asarray(assign(vals.reset_index(drop=True), part), dtype=np.int64)
