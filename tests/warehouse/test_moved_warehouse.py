"""A warehouse copied to another directory (and the original removed) answers the same queries with
the same sketches: its store names its files by their place below the warehouse root.  A store
written with absolute paths (an older warehouse) is migrated on open, even after a move.  Real
Spark, differential: sketched answers equal plain ones, maintained sketches equal recaptures."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from advisor import Advisor
from advisor.layout.clustered_copy import build_layout
from advisor.layout.registry import find_layout
from advisor.partition.range_partition import load_partition
from advisor.plan.parse import parse_sql
from advisor.plan.to_sql import query_sql
from advisor.sketch.apply import sketch_source
from advisor.sketch.capture import capture_batch
from advisor.warehouse import stored_paths
from advisor.warehouse.sketch_records import latest_versions
from workloads.data.datasets import load_dataset
from workloads.data.update_batches import make_batch

SQL = "SELECT beat, count(*) AS n FROM crimes GROUP BY beat HAVING count(*) > 13"
PATH_COLUMNS = [("versions", "base_path"), ("versions", "ins_path"), ("versions", "del_path"),
                ("net_deltas", "ins_path"), ("net_deltas", "del_path"), ("layouts", "path"),
                ("samples", "path"), ("states", "path")]


def _plain(adv) -> list:
    return sorted(map(tuple, adv.run(SQL, advise=False).rows))


def _sketched(adv, sk) -> list:
    """The answer with sketch ``sk`` pushed into the scan, over the layout copy it uses."""
    cat = adv.ctx.catalog
    q = parse_sql(SQL, cat.schema)
    src = sketch_source(cat, sk, {"crimes": cat.current_version("crimes")})
    return sorted(map(tuple, adv.spark.sql(query_sql(q, src)).collect()))


def _stored(wh) -> dict:
    """Every artefact path the store at ``wh`` records, per column (read straight from SQLite)."""
    conn = sqlite3.connect(wh / "advisor.db")
    try:
        return {f"{t}.{c}": sorted(r[0] for r in conn.execute(f"SELECT {c} FROM {t} WHERE {c} IS NOT NULL "
                                                               f"AND {c} != ''"))
                for t, c in PATH_COLUMNS}
    finally:
        conn.close()


def _head(adv):
    heads = [s for s in latest_versions(adv.ctx.store) if s.template == parse_sql(SQL, adv.ctx.schema_lookup()).template]
    assert len(heads) == 1, heads
    return heads[0]


def _equal_to_recapture(adv, sk) -> bool:
    cat = adv.ctx.catalog
    q = parse_sql(SQL, cat.schema)
    part = sk.parts[0]
    (fresh,), _ = capture_batch(cat, [(q, {"crimes": part.attr}, {"crimes": load_partition(cat.store, part.partition_id)})],
                                {"crimes": cat.current_version("crimes")})
    return fresh.parts[0].fragments == part.fragments


def _build(spark, wh, tmp_path) -> tuple[list, object]:
    """A warehouse with every kind of artefact: table versions, a net delta, a layout, samples, a
    sketch maintained over a batch with its operator state written."""
    adv = Advisor(spark, warehouse=wh, uses=80)
    cat = adv.ctx.catalog
    load_dataset(cat, "crimes", rows=3000, seed=7)
    build_layout(cat, "crimes", "beat", rows_per_file=500)
    adv.capture(SQL, on="crimes.beat", fragments=40)
    adv.recommend(SQL, sample_rate=0.2)  # draws and stores a sample of version 1
    for i in range(3):  # three batches: versions 2-4, read through a net block of two
        adv.apply(make_batch(cat, "crimes", 30, 6, str(tmp_path / f"b{i}.parquet"), i + 1), "crimes")
    adv.maintain()
    from advisor.maintain.spark import state_store

    state_store.flush()
    sk = _head(adv)
    assert sk.data_versions["crimes"] == 4 and _equal_to_recapture(adv, sk)
    rows = _sketched(adv, sk)
    assert rows == _plain(adv) and rows
    adv.close()
    return rows, sk


@pytest.fixture(scope="module")
def built(spark, tmp_path_factory):
    """One warehouse built by ``_build``, then moved away from where it was built (nothing may
    point there); each test starts from its own copy of it."""
    base = tmp_path_factory.mktemp("moved")
    rows, sk = _build(spark, base / "wh", base)
    (base / "wh").rename(base / "built")
    return base / "built", rows, sk


@pytest.mark.parametrize("legacy", [False, True], ids=["relative", "older-absolute-store"])
def test_a_copied_warehouse_answers_with_the_same_sketches(spark, tmp_path, legacy, built):
    old, new = tmp_path / "old" / "wh", tmp_path / "new" / "moved"
    source, rows, sk = built
    shutil.copytree(source, old)
    stored = _stored(old)
    assert all(stored[c] for c in ("versions.base_path", "versions.ins_path", "layouts.path", "samples.path",
                                   "states.path", "net_deltas.ins_path")), stored
    assert all(stored_paths.is_relative(p) for ps in stored.values() for p in ps), stored
    if legacy:  # as an older version wrote it: absolute paths, no migration mark
        conn = sqlite3.connect(old / "advisor.db")
        with conn:
            for t, c in PATH_COLUMNS:
                conn.execute(f"UPDATE {t} SET {c} = ? || '/' || {c} WHERE {c} IS NOT NULL AND {c} != ''",
                             (str(old.absolute()),))
            for lid, man in conn.execute("SELECT id, manifest_json FROM layouts").fetchall():
                conn.execute("UPDATE layouts SET manifest_json = replace(manifest_json, '\"path\": \"', ?) "
                             "WHERE id=?", (f'"path": "{old.absolute()}/', lid))
            conn.execute("DELETE FROM settings WHERE key=?", (stored_paths.SETTING,))
        conn.close()
        assert str(old.absolute()) in _stored(old)["layouts.path"][0]
    shutil.copytree(old, new)
    shutil.rmtree(old.parent)  # nothing may still point at the original

    adv = Advisor(spark, warehouse=new, uses=80)
    assert _stored(new) == stored  # migrated (older store) or untouched: no row dropped by recovery
    cat = adv.ctx.catalog
    lay = find_layout(adv.ctx.store, "crimes", "beat")
    assert lay["path"].startswith(str(new.absolute())) and all(
        m["path"].startswith(lay["path"] + "/") for m in lay["manifest"])
    assert _head(adv).id == sk.id and _head(adv).parts == sk.parts
    assert _sketched(adv, sk) == rows == _plain(adv)
    assert adv.recommend(SQL, sample_rate=0.2)  # estimates from samples in the copy
    assert all((new / p).is_dir() for p in _stored(new)["samples.path"])
    # the copy keeps working: another batch, maintained from the copied state, equals a recapture
    adv.apply(make_batch(cat, "crimes", 25, 5, str(tmp_path / "b9.parquet"), 9), "crimes")
    adv.maintain()
    head = _head(adv)
    assert head.id != sk.id and head.data_versions["crimes"] == 5 and _equal_to_recapture(adv, head)
    assert _sketched(adv, head) == _plain(adv)
    assert all(stored_paths.is_relative(p) for ps in _stored(new).values() for p in ps)
    adv.close()
