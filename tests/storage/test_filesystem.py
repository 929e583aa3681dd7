"""The file-system layer does the same on a local directory and on a real HDFS: directories,
atomic renames, listings, sizes, bytes and Parquet round trips, the paths of a table's files."""

from __future__ import annotations

import pyarrow as pa
import pytest

from advisor.warehouse import atomic, filesystem
from advisor.warehouse.table_files import parquet_files, read_columns

pytestmark = pytest.mark.storage


@pytest.fixture(params=["local", "hdfs"])
def root(request, tmp_path):
    if request.param == "local":
        return str(tmp_path / "fs")
    return f"{request.getfixturevalue('hdfs')}/fs-{tmp_path.name}"


def test_the_same_operations_on_a_local_disk_and_on_hdfs(spark, root):
    top = filesystem.location(root)
    assert isinstance(top, filesystem.RemotePath) != filesystem.is_local(root)
    d = top / "tables" / "t"
    d.mkdir(parents=True, exist_ok=True)
    assert d.is_dir() and not d.is_file() and d.exists()
    fs = filesystem.for_path(str(d))
    tmp = d / atomic.tmp_name("x")
    tmp.mkdir(parents=True, exist_ok=True)
    tab = pa.table({"_rid": pa.array([3, 1, 2], pa.int64()), "v": ["c", "a", "b"]})
    filesystem.write_parquet(tab, str(tmp / "part-0.parquet"))
    filesystem.write_parquet(tab.slice(0, 1), str(tmp / "part-1.parquet"))
    fs.write_bytes(str(tmp / "_SUCCESS"), b"")
    final = d / atomic.unique("v000001_base")
    atomic.publish(tmp, final)
    assert not tmp.exists() and final.is_dir()
    files = parquet_files([str(final), None])
    assert [f.rsplit("/", 1)[-1] for f in files] == ["part-0.parquet", "part-1.parquet"]
    assert all(f.startswith(str(final)) for f in files)
    assert read_columns(files, ["v"]).column("v").to_pylist() == ["c", "a", "b", "c"]
    assert filesystem.read_parquet(str(final)).num_rows == 4
    assert filesystem.parquet_file(files[0]).metadata.num_rows == 3
    assert fs.size(str(final)) == sum(len(fs.read_bytes(f)) for f in files) > 0
    assert [p.rsplit("/", 1)[-1] for p in fs.list(str(d))] == [final.name]
    assert fs.stamp(files[0]) == fs.stamp(files[0])
    assert spark.read.parquet(str(final)).count() == 4  # the executors read what the driver wrote
    atomic.remove(final)
    assert not final.exists() and fs.list(str(d)) == [] and fs.list(str(d / "gone")) == []


def test_create_new_writes_once_and_never_replaces(spark, root):
    """The warehouse claim's primitive: a create that fails, writing nothing, where a file exists."""
    fs = filesystem.for_path(root, spark)
    fs.mkdirs(root)
    path = f"{root}/claim.json"
    assert fs.create_new(path, b"first") is True
    assert fs.create_new(path, b"second") is False
    assert fs.read_bytes(path) == b"first"
