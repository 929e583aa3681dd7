"""The sample store: one stratified sample per (table, strata, theta, seed, table version).

A sample is Parquet under ``tables/<table>/samples/`` plus a row in the store's ``samples`` table.
``get_sample`` reuses the stored one, maintains the newest older one from the delta
(``estimators.sampling.sample_delta``: the maintained sample equals a fresh draw row for row), or draws
afresh -- on the driver with pyarrow for a table that fits it (``estimators.sampling.reservoir_local``, the
same rows as the Spark draw), else with Spark (``estimators.sampling.reservoir_spark``).  A sample holds the columns
its callers read and is widened for its own rows when a later caller reads more.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import pyarrow as pa
import pyarrow.compute as pc

from advisor.estimation import sample_eval, sample_files
from advisor.warehouse import atomic, filesystem
from advisor.warehouse.lock import writer_lock
from estimators.sampling import reservoir_local
from estimators.sampling.reservoir_spark import stratified_sample
from estimators.sampling.sample_delta import maintain
from estimators.sampling.stratum_labels import supported_spark_type

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog


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


SAMPLER = 3  # bump when the sampling rule changes: cached samples of other versions are redrawn
# Tables drawn on the driver (``estimators.sampling.reservoir_local``, the same sample as Spark's, row for row)
# when they are this small: the rows decoded by pyarrow take ~5x their Parquet bytes in memory.
LOCAL_DRAW = True
LOCAL_DRAW_ROWS = 12_000_000
LOCAL_DRAW_BYTES = 768 << 20


def _draw_locally(catalog: Catalog, table: str, strata: list, version: int) -> bool:
    """Whether the sample of ``table`` at ``version`` is drawn with pyarrow on the driver: small
    enough, and every stratum column of a type whose Spark label is reproduced."""

    if not LOCAL_DRAW or catalog.store.remote:  # on a URI the table's files would reach the driver through py4j
        return False
    v = catalog.version(table, version)
    types = dict(catalog.schema(table))
    return (v.rows <= LOCAL_DRAW_ROWS and v.bytes <= LOCAL_DRAW_BYTES
            and all(supported_spark_type(types[c]) for c in strata))


def _draw(catalog: Catalog, table: str, strata: list, theta: float, seed: int, version: int, path,
          columns: Optional[list], on_layout=None) -> dict:
    """Draw the sample afresh with the table ``columns`` (None: all), write it to ``path`` and return
    (the rows drawn on the driver or None, its meta).  ``on_layout(labels, k_g, n_g)`` learns each
    stratum's label, sample and population size once a stratified sample drawn on the driver is written (``LocalSample.strata_layout``)."""

    if _draw_locally(catalog, table, strata, version):

        s = reservoir_local.draw(catalog.read_arrow(table, version, columns, with_rid=True), strata, theta, seed,
                                id_col="_rid", reserve=True)
        reservoir_local.write(s.table, str(path))
        drawn = s.table
        if on_layout is not None and s.strata_layout is not None:
            # only now: work started during the draw competed with it for memory bandwidth (TPC-H
            # SF1 draws took 14 % longer and the cold ratio rose 0.194 -> 0.203)
            on_layout(*s.strata_layout)
        where = "driver"
    else:
        def rows():
            df = catalog.read(table, version, with_rid=True)
            return df if columns is None else df.select(*columns, "_rid")

        s = stratified_sample(rows(), strata, theta, seed, id_col="_rid", reserve=True)
        s.df.write.mode("overwrite").parquet(str(path))
        if not s.uniform_fallback and s.strata and sampled_rows(catalog.spark.read.parquet(str(path))).count() != s.sample_size:
            # a stratum fell short of the pre-filter threshold (rare): rank the whole table instead
            s = stratified_sample(rows(), strata, theta, seed, id_col="_rid", prefilter=False, reserve=True)
            s.df.write.mode("overwrite").parquet(str(path))
        where = "spark"
        drawn = None
    return drawn, {"sampler": SAMPLER, "population": s.population, "n_strata": s.n_strata,
            "uniform_fallback": s.uniform_fallback, "sample_size": s.sample_size,
            "reserve": bool(strata) and not s.uniform_fallback, "drawn_on": where, "columns": columns}


def _widen(catalog: Catalog, table: str, version: int, path: str, missing: list) -> None:
    """Add the table ``columns`` a stored sample lacks, read for its rows (reserve included) from the
    table at ``version``; the file is rewritten (its mtime changes, which retires the in-process
    caches keyed by it).  The rows, keys and strata do not change."""


    old = sample_files.read(path)
    extra = catalog.read_arrow(table, version, missing, with_rid=True)
    at = pc.index_in(old.column("_rid"), value_set=extra.column("_rid").cast(old.schema.field("_rid").type))
    if at.null_count:
        raise RuntimeError(f"sample {path} holds rows that table {table} v{version} does not")
    order = [c for c, _ in catalog.schema(table)]
    have = set(old.column_names) | set(missing)
    names = [c for c in order if c in have] + [c for c in old.column_names if c not in order]
    sample_files.write(pa.table({c: (old.column(c) if c in old.column_names else extra.column(c).take(at))
                                 for c in names}), path)


def _stored_columns(catalog: Catalog, table: str, meta: dict) -> set:
    """The table columns a stored sample holds (all of them for a sample stored without a list)."""
    cols = meta.get("columns")
    return set(c for c, _ in catalog.schema(table)) if cols is None else set(cols)


def widen_sample(catalog: Catalog, table: str, version: int, path: str, meta: dict, need: Optional[list]) -> bool:
    """Widen the stored sample at ``path`` to the columns ``need`` (None: all) if it lacks some, and
    record its columns in ``meta``; True if it was widened."""
    have = _stored_columns(catalog, table, meta)
    wanted = set(c for c, _ in catalog.schema(table)) if need is None else set(need)
    if wanted <= have:
        return False
    _widen(catalog, table, version, path, sorted(wanted - have))
    meta["columns"] = None if need is None else sorted(have | wanted)
    with catalog.store.tx() as c:  # a sample not yet recorded (being maintained) has no row yet
        c.execute("UPDATE samples SET meta_json=? WHERE path=?", (json.dumps(meta), catalog.store.stored(path)))
    return True


def get_sample(catalog: Catalog, table: str, strata: list, theta: float, seed: int, version: int,
               columns: Optional[list] = None, on_layout=None) -> SampleInfo:
    """The stratified sample for the key (table, strata, theta, seed, version): reuse or draw + store.

    ``columns``: the table columns the caller reads (None: all).  A sample is drawn with those and
    the strata only -- decoding every column of a wide table cost most of a draw (lineitem: 1.1-1.5 s
    of ~2.5 s) -- and a stored sample that lacks some is widened for its own rows (``_widen``),
    so one sample per key still serves every query: the rows depend on the key alone.
    ``on_layout`` learns the strata of a sample drawn afresh on the driver (``_draw``)."""
    strata = sorted(strata)
    sj = json.dumps(strata)
    need = None if columns is None else sorted(set(columns) | set(strata))
    t0 = time.perf_counter()
    r = catalog.store.one("SELECT * FROM samples WHERE table_name=? AND strata_json=? AND theta=? AND seed=? "
                          "AND table_version=? ORDER BY id DESC LIMIT 1", (table, sj, theta, seed, version))
    if r is not None:
        meta = json.loads(r["meta_json"])
        at = catalog.store.resolve(r["path"])
        if filesystem.exists(at) and meta.get("sampler") == SAMPLER:
            widened = widen_sample(catalog, table, version, at, meta, need)
            return SampleInfo(table, strata, theta, seed, version, at, meta, True,
                              time.perf_counter() - t0 if widened else 0.0)
    key = hashlib.sha1(f"{sj}|{theta}|{seed}".encode()).hexdigest()[:12]
    sdir = catalog.root / table / "samples"
    sdir.mkdir(parents=True, exist_ok=True)
    path = sdir / atomic.unique(f"v{version:06d}_{key}")
    tmp = sdir / atomic.tmp_name("sample")
    drawn = None
    try:
        meta = _maintained(catalog, table, strata, sj, theta, seed, version, tmp)
        if meta is not None:
            widen_sample(catalog, table, version, str(tmp), meta, need)
        else:
            drawn, meta = _draw(catalog, table, strata, theta, seed, version, tmp, need, on_layout)
        secs = time.perf_counter() - t0
        meta["seconds"] = round(secs, 3)
        with writer_lock(catalog.store.warehouse):
            atomic.publish(tmp, path)
            atomic.crash_point("sample.renamed")
            with catalog.store.tx() as c:
                same_key = "table_name=? AND strata_json=? AND theta=? AND seed=? AND table_version<?"
                args = (table, sj, theta, seed, version)
                old = [catalog.store.resolve(o["path"])
                       for o in c.execute(f"SELECT path FROM samples WHERE {same_key}", args).fetchall()]
                c.execute(f"DELETE FROM samples WHERE {same_key}", args)
                c.execute("INSERT INTO samples(table_name, strata_json, theta, seed, table_version, path, "
                          "meta_json, created) VALUES (?,?,?,?,?,?,?,?)",
                          (table, sj, theta, seed, version, catalog.store.stored(path), json.dumps(meta),
                           time.time()))
    except BaseException:
        atomic.remove(tmp)
        if catalog.store.one("SELECT 1 FROM samples WHERE path=?", (catalog.store.stored(path),)) is None:
            atomic.remove(path)
        raise
    if drawn is not None:
        sample_eval.prime(str(path), drawn)  # the estimate reads its rows from memory
    for o in old:
        atomic.remove(o)
    return SampleInfo(table, strata, theta, seed, version, str(path), meta, False, secs)


def sample_cached(catalog: Catalog, table: str, strata: list, theta: float, seed: int, version: int) -> bool:
    """Whether ``get_sample`` would reuse a stored sample for this key (no draw, no maintenance):
    the advice's price depends on it (``Calibration.sampled_rows``)."""
    r = catalog.store.one("SELECT path, meta_json FROM samples WHERE table_name=? AND strata_json=? AND theta=? "
                          "AND seed=? AND table_version=? ORDER BY id DESC LIMIT 1",
                          (table, json.dumps(sorted(strata)), theta, seed, version))
    return (r is not None and filesystem.exists(catalog.store.resolve(r["path"]))
            and json.loads(r["meta_json"]).get("sampler") == SAMPLER)


def sampled_rows(df):
    """The sampled rows of a stored sample (a sample drawn with a reserve also stores reserve rows)."""
    return df.filter("_in") if "_in" in df.columns else df


def _maintained(catalog: Catalog, table: str, strata: list, sj: str, theta: float, seed: int, version: int, path):
    """Write the sample for ``version`` maintained from the newest older one with the same key
    (``estimators.sampling.sample_delta``) and return its meta, or None when a fresh draw is needed: no
    older sample with a reserve, a stratum ran out of known rows, or the strata now outnumber the
    sample budget (a fresh draw would fall back to a uniform sample)."""


    prev = catalog.store.one("SELECT * FROM samples WHERE table_name=? AND strata_json=? AND theta=? AND seed=? "
                             "AND table_version<? ORDER BY table_version DESC, id DESC LIMIT 1",
                             (table, sj, theta, seed, version))
    if prev is None or not strata or catalog.is_delta(table):  # a Delta change feed carries no row ids
        return None
    pm = json.loads(prev["meta_json"])
    prev_path = catalog.store.resolve(prev["path"])
    if pm.get("sampler") != SAMPLER or not pm.get("reserve") or not filesystem.exists(prev_path):
        return None
    ins, dels = catalog.delta(table, prev["table_version"], version)
    got = maintain(catalog.spark, prev_path, ins, dels, strata, theta, seed, str(path),
                   read=sample_files.read, write=sample_files.write)
    if got is None:
        return None
    N, n_strata, k = got
    if n_strata > theta * N:
        return None
    return {"sampler": SAMPLER, "population": N, "n_strata": n_strata,
            "uniform_fallback": False, "sample_size": k, "reserve": True,
            "maintained_from": int(prev["table_version"]), "columns": pm.get("columns")}
