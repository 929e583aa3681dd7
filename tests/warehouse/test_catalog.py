"""Versioned warehouse: snapshot reads, batches, deltas, compaction, atomic failure."""

import pandas as pd
import pytest

from advisor.errors import BadInput
from advisor.warehouse.catalog import Catalog
from advisor.warehouse.store import Store


@pytest.fixture()
def cat(spark, tmp_path):
    c = Catalog(spark, Store(tmp_path / "wh"))
    df = spark.createDataFrame(pd.DataFrame({"k": range(100), "g": [i % 7 for i in range(100)],
                                             "v": [float(i) for i in range(100)]}))
    c.create_table("t", df, "test")
    return c


def write_batch(spark, path, rows, cols=("op", "_rid", "k", "g", "v")):
    pdf = pd.DataFrame(rows, columns=list(cols))
    spark.createDataFrame(pdf).coalesce(1).write.parquet(str(path))
    return str(path)


def test_versions_and_delta(spark, cat, tmp_path):
    rids = [r["_rid"] for r in cat.read("t", with_rid=True).orderBy("k").limit(5).collect()]
    rows = [("insert", None, 1000 + i, 1, 1.0) for i in range(10)] + [("delete", r, None, None, None) for r in rids]
    v2 = cat.apply_batch("t", write_batch(spark, tmp_path / "b1", rows))
    assert v2.version == 2 and v2.rows == 105
    assert cat.read("t").count() == 105
    assert cat.read("t", 1).count() == 100          # the old version still reads the old rows
    ins, dels = cat.delta("t", 1, 2)
    assert ins.count() == 10 and dels.count() == 5
    assert sorted(r["k"] for r in dels.collect()) == [0, 1, 2, 3, 4]  # deleted rows keep their values
    new_rids = {r["_rid"] for r in ins.collect()}
    assert not new_rids & {r["_rid"] for r in cat.read("t", 1, with_rid=True).collect()}  # fresh row ids


def test_delta_pandas_matches_spark_delta_and_keeps_only_asked_columns(spark, cat, tmp_path):
    rids = [r["_rid"] for r in cat.read("t", with_rid=True).orderBy("k").limit(3).collect()]
    rows = [("insert", None, 2000 + i, 7, 2.5) for i in range(4)] + [("delete", r, None, None, None) for r in rids]
    cat.apply_batch("t", write_batch(spark, tmp_path / "b1", rows))
    ins, dels = cat.delta_pandas("t", 1, 2)
    assert sorted(ins["k"]) == [2000, 2001, 2002, 2003] and sorted(dels["k"]) == [0, 1, 2]
    ins_k, dels_k = cat.delta_pandas("t", 1, 2, columns=["v", "k"])
    assert list(ins_k.columns) == ["k", "v"] and list(dels_k.columns) == ["k", "v"]  # table order
    assert ins_k.sort_values("k").reset_index(drop=True).equals(ins[["k", "v"]].sort_values("k").reset_index(drop=True))
    with pytest.raises(BadInput, match="no column"):
        cat.delta_pandas("t", 1, 2, columns=["k", "nope"])


def test_delete_of_inserted_row_nets_out(spark, cat, tmp_path):
    cat.apply_batch("t", write_batch(spark, tmp_path / "b1", [("insert", None, 500, 1, 1.0)]))
    rid = cat.read("t", with_rid=True).filter("k = 500").first()["_rid"]
    cat.apply_batch("t", write_batch(spark, tmp_path / "b2", [("delete", rid, None, None, None)]))
    ins, dels = cat.delta("t", 1, 3)
    assert ins.count() == 0 and dels.count() == 0
    assert cat.delta_pandas("t", 1, 3) == (None, None)  # the driver-side read nets it out too
    ins2, _ = cat.delta_pandas("t", 1, 2)
    assert ins2["k"].tolist() == [500]
    assert cat.read("t").count() == 100


def test_compaction_keeps_rows_and_ids(spark, cat, tmp_path):
    cat.apply_batch("t", write_batch(spark, tmp_path / "b1", [("insert", None, 500, 1, 1.0)]))
    before = sorted((r["_rid"], r["k"]) for r in cat.read("t", with_rid=True).collect())
    v = cat.compact("t")
    assert v.kind == "base" and v.rows == 101
    assert sorted((r["_rid"], r["k"]) for r in cat.read("t", with_rid=True).collect()) == before


@pytest.mark.parametrize("rows,cols,msg", [
    ([("delete", 999999, None, None, None)], None, "not in"),
    ([("upsert", None, 1, 1, 1.0)], None, "unknown op"),
    ([("insert", 1, 2)], ("op", "k", "zzz"), "not in the table"),
    ([("insert", 1)], ("op", "k"), "lacks column"),
])
def test_bad_batches_leave_table_unchanged(spark, cat, tmp_path, rows, cols, msg):
    path = write_batch(spark, tmp_path / "bad", rows, cols or ("op", "_rid", "k", "g", "v"))
    with pytest.raises(BadInput, match=msg):
        cat.apply_batch("t", path)
    assert cat.current_version("t") == 1 and cat.read("t").count() == 100


def test_csv_batch_with_bad_type(spark, cat, tmp_path):
    p = tmp_path / "b.csv"
    p.write_text("op,k,g,v\ninsert,1,2,notanumber\n")
    with pytest.raises(BadInput, match="not a valid double"):
        cat.apply_batch("t", str(p))
    p.write_text("op,k,g,v\ninsert,1,2,3.5\n")
    assert cat.apply_batch("t", str(p)).rows == 101


def test_unknown_table(cat):
    with pytest.raises(BadInput, match="unknown table"):
        cat.read("nope")


def test_delta_pandas_prefilters_only_large_batches(spark, cat, tmp_path):
    import sqlglot

    from advisor.plan import arrow_filter

    n = arrow_filter.MIN_ROWS + 10
    ins = pd.DataFrame({"k": range(5000, 5000 + n), "g": [i % 3 for i in range(n)], "v": [0.5] * n})
    v = cat.apply_frames("t", spark.createDataFrame(ins), None).version
    where = sqlglot.parse_one("g = 1")
    seen: list = []
    big, _ = cat.delta_pandas("t", v - 1, v, where=where, seen=seen)
    assert seen == [n] and set(big["g"]) == {1} and len(big) == sum(1 for i in range(n) if i % 3 == 1)
    small = pd.DataFrame({"k": [1, 2, 3], "g": [0, 1, 2], "v": [1.0, 2.0, 3.0]})
    v2 = cat.apply_frames("t", spark.createDataFrame(small), None).version
    few, _ = cat.delta_pandas("t", v2 - 1, v2, where=where)
    assert sorted(few["g"]) == [0, 1, 2]   # a small batch is not pre-filtered: the engine filters it


def test_replacing_a_table_reads_the_new_rows_and_forgets_the_old_versions(spark, cat, tmp_path):
    """``create_table`` over an existing table (``replace``, the default): the old table directory
    goes, the new write must survive that (it was staged inside it)."""
    rows = [("insert", None, 1000 + i, 1, 1.0) for i in range(3)]
    cat.apply_batch("t", write_batch(spark, tmp_path / "b1", rows))
    assert cat.read("t").count() == 103  # the old base's DataFrame is now kept (``Catalog.parquet``)
    new = spark.createDataFrame(pd.DataFrame({"k": [7, 8], "g": [1, 2], "v": [0.5, 1.5]}))
    v = cat.create_table("t", new, "test")
    assert v.version == 1 and [x.version for x in cat.versions("t")] == [1]
    assert sorted(r["k"] for r in cat.read("t").collect()) == [7, 8]
    with pytest.raises(BadInput, match="already exists"):
        cat.create_table("t", new, "test", replace=False)


def test_parquet_frames_are_kept_while_their_files_are_unchanged(spark, cat, tmp_path):
    """``Catalog.parquet`` builds one DataFrame per unchanged path (file listing and schema inference
    once); a file written anew under the same name is read anew."""
    base = cat.version("t", 1).base_path
    assert cat.parquet(base) is cat.parquet(base)
    p = write_batch(spark, tmp_path / "b1", [("insert", None, 1, 1, 1.0)])
    first = cat.parquet(p)
    assert first.count() == 1
    import shutil
    shutil.rmtree(p)
    write_batch(spark, tmp_path / "b1", [("insert", None, k, 1, 1.0) for k in range(4)])
    assert cat.parquet(p) is not first and cat.parquet(p).count() == 4


def test_tables_are_written_and_read_without_hadoop_checksum_files(spark, cat, tmp_path):
    """Local files go through the raw local file system (``advisor.engine.session``): no .crc side files
    are written, and a stale one left by a checksummed writer is neither listed nor verified."""
    files = [p for p in (tmp_path / "wh").rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in files)
    assert not [p for p in files if p.name.endswith(".crc")]
    part = next(p for p in files if p.suffix == ".parquet")
    (part.parent / f".{part.name}.crc").write_bytes(b"crc\x00\x00\x02\x00" + b"\xde\xad\xbe\xef" * 64)
    spark.catalog.clearCache()
    assert cat.read("t").count() == 100
    assert sorted(r["k"] for r in cat.read("t").where("k < 3").collect()) == [0, 1, 2]
