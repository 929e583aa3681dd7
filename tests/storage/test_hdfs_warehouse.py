"""A warehouse on a real HDFS (MiniDFSCluster on 127.0.0.1): a TPC-H SF 0.01 table loaded to an
``hdfs://`` warehouse with a clustered layout, a sketch captured and used through the layout,
update batches applied and the sketch maintained;
sketched answers equal plain ones and the maintained sketch equals a recapture.  The store stays on
the driver's disk and names every file by its place below the warehouse URI, so the warehouse
copied to another HDFS directory (with its store) answers the same with the same sketches."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest
from cli_helpers import cli

from advisor import Advisor
from advisor.layout.clustered_copy import build_layout
from advisor.maintain.spark import state_store
from advisor.partition.range_partition import load_partition
from advisor.plan.parse import parse_sql
from advisor.plan.to_sql import query_sql
from advisor.sketch.apply import sketch_source
from advisor.sketch.capture import capture_batch
from advisor.warehouse import filesystem, stored_paths
from advisor.warehouse.sketch_records import latest_versions
from workloads.data.tpch import generate_tpch
from workloads.data.update_batches import make_batch

pytestmark = pytest.mark.storage


def _plain(adv, sql) -> list:
    return sorted(map(tuple, adv.run(sql, advise=False).rows))


def _sketched(adv, sql, sk) -> list:
    cat = adv.ctx.catalog
    src = sketch_source(cat, sk, {"orders": cat.current_version("orders")})
    return sorted(map(tuple, adv.spark.sql(query_sql(parse_sql(sql, cat.schema), src)).collect()))


def _recaptured(adv, sql, sk):
    cat = adv.ctx.catalog
    part = sk.parts[0]
    (fresh,), _ = capture_batch(cat, [(parse_sql(sql, cat.schema), {"orders": part.attr},
                                       {"orders": load_partition(cat.store, part.partition_id)})],
                                {"orders": cat.current_version("orders")})
    return fresh.parts[0].fragments


def _stored_paths(store_dir) -> list[str]:
    conn = sqlite3.connect(store_dir / "advisor.db")
    try:
        rows = conn.execute("SELECT base_path, ins_path, del_path FROM versions UNION ALL "
                            "SELECT ins_path, del_path, NULL FROM net_deltas").fetchall()
    finally:
        conn.close()
    return [p for r in rows for p in r if p]


def test_a_warehouse_on_hdfs_answers_and_maintains_like_plain(spark, hdfs, tmp_path, monkeypatch, capsys):
    store_dir = tmp_path / "store"
    monkeypatch.setenv("ADVISOR_STORE_DIR", str(store_dir))
    wh = f"{hdfs}/warehouses/tpch"
    adv = Advisor(spark, warehouse=wh)
    assert adv.ctx.store.remote and adv.ctx.store.warehouse == store_dir
    files = generate_tpch(0.01, str(tmp_path / "tpch"))
    assert adv.add_table("orders", spark.read.parquet(files["orders"])) == 15_000
    cat = adv.ctx.catalog
    assert cat.version("orders", 1).base_path.startswith(wh + "/tables/orders/")
    top = max(r[0] for r in spark.sql(
        f"SELECT count(*) FROM parquet.`{files['orders']}` GROUP BY o_custkey").collect())
    sql = f"SELECT o_custkey, count(*) AS n FROM orders GROUP BY o_custkey HAVING count(*) >= {top - 4}"
    lay = build_layout(cat, "orders", "o_custkey", rows_per_file=4000)  # sketched scans read this copy
    assert lay["path"].startswith(wh + "/tables/orders/layout_") and len(lay["manifest"]) == 4
    adv.capture(sql, on="orders.o_custkey", fragments=50)
    sk = [s for s in latest_versions(adv.ctx.store)][0]
    rows = _sketched(adv, sql, sk)
    assert rows and rows == _plain(adv, sql)
    for i in range(3):  # versions 2-4: the read from version 1 goes through a net block
        adv.apply(make_batch(cat, "orders", 40, 10, str(tmp_path / f"b{i}.parquet"), i + 1), "orders")
    adv.maintain()
    state_store.flush()
    head = [s for s in latest_versions(adv.ctx.store)][0]
    assert head.id != sk.id and head.data_versions["orders"] == 4
    assert head.parts[0].fragments == _recaptured(adv, sql, head)
    rows = _sketched(adv, sql, head)
    assert rows == _plain(adv, sql) and cat.read("orders").count() == 15_000 + 3 * 30
    assert cat.read_arrow("orders").num_rows == 15_090  # the driver reads the files through HDFS
    paths = _stored_paths(store_dir)
    assert len(paths) >= 7 and all(stored_paths.is_relative(p) for p in paths), paths
    assert all(filesystem.exists(stored_paths.join(wh, p)) for p in paths)
    assert not any(store_dir.rglob("*.parquet"))  # no table file on the driver's disk
    first = lay["manifest"][0]  # files of at most 4,000 rows, cut at o_custkey value boundaries
    assert filesystem.parquet_file(first["path"]).metadata.num_rows == first["rows"]
    assert 3_900 <= first["rows"] <= 4000 and sum(m["rows"] for m in lay["manifest"]) == 15_000
    adv.close()
    code, outp, _ = cli(["--warehouse", wh, "run", sql, "--no-use", "--json"], capsys)  # the URI as an option
    assert code == 0 and sorted(map(tuple, json.loads(outp)["rows"])) == rows

    # the warehouse copied to another HDFS directory, with its store: same answers, same sketch
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    src, dst = jvm.org.apache.hadoop.fs.Path(wh), jvm.org.apache.hadoop.fs.Path(f"{hdfs}/elsewhere/copy")
    fs = src.getFileSystem(conf)
    assert jvm.org.apache.hadoop.fs.FileUtil.copy(fs, src, fs, dst, False, conf)
    fs.delete(src, True)
    shutil.copytree(store_dir, tmp_path / "store-copy")
    monkeypatch.setenv("ADVISOR_STORE_DIR", str(tmp_path / "store-copy"))
    moved = Advisor(spark, warehouse=f"{hdfs}/elsewhere/copy")
    assert [s.parts for s in latest_versions(moved.ctx.store)] == [head.parts]
    assert _sketched(moved, sql, head) == rows == _plain(moved, sql)
    moved.close()


def test_a_second_store_is_refused_on_a_claimed_warehouse_until_it_takes_over(spark, hdfs, tmp_path, monkeypatch,
                                                                              capsys):
    """Two drivers (two stores) on one warehouse URI would write the same table files: the first to
    open it owns it; another store gets one line and exit code 2, and writes nothing, until
    ``data init --force`` hands the warehouse to it."""
    wh = f"{hdfs}/warehouses/claimed"
    monkeypatch.setenv("ADVISOR_STORE_DIR", str(tmp_path / "first"))
    code, _, err = cli(["--warehouse", wh, "data", "load", "crimes", "--rows", "500"], capsys)
    assert code == 0, err
    fs = filesystem.for_path(wh, spark)
    before = fs.list(f"{wh}/tables/crimes")
    assert before

    monkeypatch.setenv("ADVISOR_STORE_DIR", str(tmp_path / "second"))
    code, _, err = cli(["--warehouse", wh, "data", "load", "crimes", "--rows", "700"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "belongs to another store" in lines[0], err
    assert str(tmp_path / "first") in lines[0]
    assert fs.list(f"{wh}/tables/crimes") == before  # nothing written by the refused store

    # a copy of the owning store is the same owner
    shutil.copytree(tmp_path / "first", tmp_path / "first-copy")
    monkeypatch.setenv("ADVISOR_STORE_DIR", str(tmp_path / "first-copy"))
    code, outp, err = cli(["--warehouse", wh, "run", "SELECT count(*) AS n FROM crimes", "--no-use", "--json"], capsys)
    assert code == 0 and json.loads(outp)["rows"] == [[500]], err

    # the second store takes the warehouse over; now the first is refused
    monkeypatch.setenv("ADVISOR_STORE_DIR", str(tmp_path / "second"))
    code, _, err = cli(["--warehouse", wh, "data", "init", "--force"], capsys)
    assert code == 0, err
    code, _, err = cli(["--warehouse", wh, "data", "load", "crimes", "--rows", "700", "--replace"], capsys)
    assert code == 0, err
    monkeypatch.setenv("ADVISOR_STORE_DIR", str(tmp_path / "first"))
    code, _, err = cli(["--warehouse", wh, "run", "SELECT count(*) AS n FROM crimes", "--no-use"], capsys)
    assert code == 2 and "belongs to another store" in err and str(tmp_path / "second") in err, err
