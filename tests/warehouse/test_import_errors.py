"""Bad imports and bad change files: one line on stderr, exit code 2, and the warehouse unchanged."""

from __future__ import annotations

import json

import pytest
from cli_helpers import cli


@pytest.fixture(scope="module")
def files(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("imports")
    csv = root / "people.csv"
    csv.write_text("id,name,age\n1,ann,34\n2,bob,27\n3,cid,41\n")
    spark.createDataFrame([(1, "x")], "id INT, s STRING").write.parquet(str(root / "plain_parquet"))
    (spark.createDataFrame([(1, 2.0), (2, 3.0)], "id BIGINT, v DOUBLE").write.format("delta")
     .save(str(root / "no_cdf")))
    (spark.createDataFrame([(1, 2.0), (1, 3.0)], "id BIGINT, v DOUBLE").write.format("delta")
     .option("delta.enableChangeDataFeed", "true").save(str(root / "dup_key")))
    return root


def _fails(capsys, args, *words):
    code, _, err = cli(args, capsys)
    assert code == 2, err
    line = err.strip()
    assert len(line.splitlines()) == 1 and all(w in line for w in words), line
    return line


def _tables(capsys, wh) -> list:
    code, out, _ = cli(["--warehouse", str(wh), "data", "list", "--json"], capsys)
    return sorted({r["table"] for r in json.loads(out)}) if code == 0 else None


def test_unknown_format(files, tmp_path, capsys):
    _fails(capsys, ["--warehouse", str(tmp_path), "data", "import", "p", str(files / "people.csv"), "--format", "avro"],
           "unknown format 'avro'", "delta, parquet, csv, orc, json")
    assert _tables(capsys, tmp_path) == []


def test_a_path_that_is_not_a_delta_table(files, tmp_path, capsys):
    _fails(capsys, ["--warehouse", str(tmp_path), "data", "import", "p", str(files / "plain_parquet"), "--format", "delta"],
           "is not a Delta table")
    _fails(capsys, ["--warehouse", str(tmp_path), "data", "import", "p", str(files / "nothing_here"), "--format", "parquet"],
           "no files at")
    _fails(capsys, ["--warehouse", str(tmp_path), "data", "import", "p", str(files / "no_cdf"), "--format", "parquet"],
           "is a Delta table: import it with --format delta")
    assert _tables(capsys, tmp_path) == []


def test_a_delta_table_without_change_feed_says_how_to_enable_it(files, tmp_path, capsys):
    line = _fails(capsys, ["--warehouse", str(tmp_path), "data", "import", "t", str(files / "no_cdf"),
                           "--format", "delta", "--key", "id"], "no change data feed", "ALTER TABLE delta.`")
    assert "delta.enableChangeDataFeed = true" in line
    assert _tables(capsys, tmp_path) == []


def test_a_delta_table_needs_a_row_identity_and_a_unique_key(files, tmp_path, capsys):
    _fails(capsys, ["--warehouse", str(tmp_path), "data", "import", "t", str(files / "dup_key"), "--format", "delta"],
           "no row identity", "--key", "delta.enableRowTracking = true")
    _fails(capsys, ["--warehouse", str(tmp_path), "data", "import", "t", str(files / "dup_key"), "--format", "delta",
                    "--key", "id"], "is not unique", "id=1")
    _fails(capsys, ["--warehouse", str(tmp_path), "data", "import", "t", str(files / "dup_key"), "--format", "delta",
                    "--key", "nope"], "no key column(s) nope")
    _fails(capsys, ["--warehouse", str(tmp_path), "data", "import", "t", str(files / "dup_key"), "--format", "delta",
                    "--key", "id", "--as-of", "7"], "--as-of 7", "versions 0 to 0")
    assert _tables(capsys, tmp_path) == []


def test_a_change_file_that_does_not_match_the_schema_changes_nothing(files, tmp_path, capsys):
    wh = str(tmp_path / "wh")
    code, out, err = cli(["--warehouse", wh, "data", "import", "people", str(files / "people.csv"), "--format", "csv",
                          "--key", "id"], capsys)
    assert code == 0 and "imported people: 3 rows" in out, err
    bad = tmp_path / "bad.csv"
    bad.write_text("op,id,name,age\ninsert,4,dan,old\n")
    _fails(capsys, ["--warehouse", wh, "data", "apply", str(bad), "--table", "people"], "'old'", "age", "int")
    extra = tmp_path / "extra.csv"
    extra.write_text("op,id,name,age,shoe\ninsert,4,dan,50,44\n")
    _fails(capsys, ["--warehouse", wh, "data", "apply", str(extra), "--table", "people"], "not in the table: shoe")
    snap = tmp_path / "snap.csv"
    snap.write_text("id,name\n1,ann\n")
    _fails(capsys, ["--warehouse", wh, "data", "apply", "--snapshot", str(snap), "--table", "people"],
           "has columns id, name", "id, name, age")
    code, out, _ = cli(["--warehouse", wh, "data", "list", "--json"], capsys)
    assert [(r["version"], r["rows"]) for r in json.loads(out)] == [(1, 3)]


def test_a_new_snapshot_is_applied_as_its_difference_by_key(files, tmp_path, capsys, spark):
    wh = str(tmp_path / "wh")
    assert cli(["--warehouse", wh, "data", "import", "people", str(files / "people.csv"), "--format", "csv",
                "--key", "id"], capsys)[0] == 0
    snap = tmp_path / "snap.csv"
    snap.write_text("id,name,age\n1,ann,35\n3,cid,41\n4,dee,19\n")  # 1 changed, 2 gone, 3 same, 4 new
    code, out, err = cli(["--warehouse", wh, "data", "apply", "--snapshot", str(snap), "--table", "people"], capsys)
    assert code == 0 and "+2 -2 rows, now 3 rows" in out, err
    from advisor.context import Context

    rows = Context(wh, spark=spark).catalog.read("people").orderBy("id").collect()
    assert [tuple(r) for r in rows] == [(1, "ann", 35), (3, "cid", 41), (4, "dee", 19)]


def _listing(root) -> list:
    """Every file below ``root`` with its size and modification time."""
    import os

    return sorted((os.path.join(d, f), os.stat(os.path.join(d, f)).st_size, os.stat(os.path.join(d, f)).st_mtime_ns)
                  for d, _, fs in os.walk(root) for f in fs)


def test_refused_delta_imports_write_nothing_anywhere(files, tmp_path, capsys):
    """A Delta table without its change feed, a path that is no table and a directory whose log
    holds no commit: one line, exit 2, the user's files untouched and no table in the warehouse."""
    empty = tmp_path / "empty_log"
    (empty / "_delta_log").mkdir(parents=True)
    before = _listing(files), _listing(empty)
    wh = tmp_path / "wh"
    _fails(capsys, ["--warehouse", str(wh), "data", "import", "t", str(files / "no_cdf"), "--format", "delta",
                    "--key", "id"], "no change data feed")
    _fails(capsys, ["--warehouse", str(wh), "data", "import", "t", str(tmp_path / "missing"), "--format", "delta"],
           "is not a Delta table")
    _fails(capsys, ["--warehouse", str(wh), "data", "import", "t", str(empty), "--format", "delta"],
           "is not a Delta table")
    assert (_listing(files), _listing(empty)) == before
    assert not (tmp_path / "missing").exists()
    assert [p for p in _listing(wh) if "/tables/" in p[0]] == [] and _tables(capsys, wh) == []
