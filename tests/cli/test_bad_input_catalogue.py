"""Bad input of every kind: exit code 2, exactly one line on stderr naming the problem, no
traceback, and the warehouse unchanged (its file list and its store's SQL dump hash the same)."""

from __future__ import annotations

import hashlib
import os
import sqlite3

import pandas as pd
import pytest

from cli_helpers import cli

SELECT = "SELECT g, count(*) AS n FROM t GROUP BY g"


@pytest.fixture(scope="module")
def wh(spark, tmp_path_factory):
    from advisor.warehouse.catalog import Catalog
    from advisor.warehouse.store import Store

    d = tmp_path_factory.mktemp("badwh")
    cat = Catalog(spark, Store(d))
    pdf = pd.DataFrame({"g": [i % 5 for i in range(100)], "v": list(range(100)), "s": [f"x{i % 3}" for i in range(100)]})
    cat.create_table("t", spark.createDataFrame(pdf))
    cat.create_table("u", spark.createDataFrame(pdf))
    (d / "notes.txt").write_text("not a batch")
    (d / "bomb.yaml").write_text("name: [unclosed\n")
    (d / "noname.yaml").write_text("queries: 3\n")
    return str(d)


def fingerprint(wh: str) -> str:
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(wh)):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            if f.startswith("advisor.db"):
                continue
            h.update(f"{os.path.relpath(p, wh)}:{os.path.getsize(p)}\n".encode())
    con = sqlite3.connect(os.path.join(wh, "advisor.db"))
    try:
        for line in con.iterdump():
            h.update(line.encode())
    finally:
        con.close()
    return h.hexdigest()


CASES = [
    # SQL the parser refuses
    (["run", "SELEC g FROM t"], "malformed SQL"),
    (["run", "SELECT 'abc FROM t"], "malformed SQL"),
    (["run", "SELECT g FROM t WHERE (g > 1"], "malformed SQL"),
    (["run", ""], "statement"),
    (["run", "SELECT 1; SELECT 2"], "exactly one SQL statement"),
    (["run", "DROP TABLE t"], "only SELECT"),
    (["run", "CREATE TABLE x AS SELECT * FROM t"], "only SELECT"),
    (["run", "INSERT INTO t VALUES (1, 2, 'a')"], "only SELECT"),
    (["run", "SET spark.sql.ansi.enabled=false"], "only SELECT"),
    (["run", "ADD JAR /tmp/x.jar"], "only SELECT"),
    (["run", "DELETE FROM t WHERE g = 1"], "only SELECT"),
    # functions a read-only query may not call
    (["run", "SELECT reflect('java.lang.System', 'setProperty', 'advisor.ran', '1') AS r FROM t"], "reflect()"),
    (["run", "SELECT java_method('java.lang.System', 'setProperty', 'advisor.ran', '1') AS r"], "java_method()"),
    (["run", "SELECT try_reflect('java.lang.System', 'setProperty', 'advisor.ran', '1') AS r"], "try_reflect()"),
    (["explain", "SELECT g FROM t WHERE v > length(reflect('java.lang.System', 'getenv', 'HOME'))"], "reflect()"),
    (["run", "SELECT nosuch_udf(g) FROM t"], "unknown function nosuch_udf()"),
    (["run", "SELECT * FROM read_files('/etc/passwd')"], "read_files()"),
    (["run", "SELECT * FROM csv.`/etc/passwd`"], "/etc/passwd"),
    # names
    (["run", "SELECT * FROM nope"], "unknown table"),
    (["run", "SELECT zz FROM t"], "unknown column"),
    (["run", "SELECT g FROM t JOIN u ON t.v = u.v"], "ambiguous"),
    (["run", "SELECT g, v FROM t GROUP BY g"], "GROUP BY"),
    (["explain", "SELECT nope FROM t"], "unknown column"),
    (["recommend", "SELECT * FROM nope"], "unknown table"),
    # Spark's analysis and runtime errors
    (["run", "SELECT g FROM t WHERE s > 5"], "Spark rejected"),
    (["run", "SELECT g, v / 0 AS r FROM t"], "DIVIDE_BY_ZERO"),
    (["run", "SELECT CAST(v AS TINYINT) * CAST(100 AS TINYINT) AS r FROM t"], "Spark rejected"),
    # options
    (["run", SELECT, "--strategy", "NOPE"], "strategy"),
    (["run", SELECT, "--as-of", "t"], "TABLE=VERSION"),
    (["run", SELECT, "--as-of", "t=99"], "version"),
    (["recommend", SELECT, "--sample-rate", "2"], "sample"),
    (["recommend", SELECT, "--fragments", "0"], "fragments"),
    (["recommend", SELECT, "--method", "magic"], "method"),
    (["capture", SELECT, "--on", "t"], "TABLE.ATTR"),
    (["capture", SELECT, "--on", "t.nope"], "unknown column"),
    (["capture", SELECT, "--on", "nope.g"], "does not read table"),
    (["maintain", "--policy", "sometimes"], "policy"),
    (["--conf", "novalue", "data", "list"], "key=value"),
    # data commands
    (["data", "load", "nosuch"], "unknown dataset"),
    (["data", "load", "tpch", "--sf", "0"], "--sf"),
    (["data", "apply", "/nonexistent.parquet", "--table", "t"], "does not exist"),
    (["data", "apply", "{wh}/notes.txt", "--table", "t"], "batch"),
    (["data", "apply", "/nonexistent.parquet", "--table", "nope"], "nope"),
    (["data", "make-batch", "nope", "--out", "{wh}/b.parquet"], "unknown table"),
    (["partitions", "build", "t", "nope"], "unknown column"),
    (["partitions", "build", "nope", "g"], "unknown table"),
    (["layout", "t", "nope"], "unknown column"),
    # workloads and runs
    (["replay", "{wh}/missing.yaml"], "missing.yaml"),
    (["replay", "{wh}/bomb.yaml"], "bomb.yaml"),
    (["replay", "{wh}/noname.yaml"], "noname.yaml"),
    (["report", "{wh}/no-run"], "no-run"),
    (["gate", "{wh}/no-run", "--baseline", "{wh}/no-base"], "no-run"),
]


@pytest.mark.parametrize("args, needle", CASES, ids=[f"{i:02d}-{a[0]}" for i, (a, _) in enumerate(CASES)])
def test_bad_input_is_one_line_exit_2_and_changes_nothing(wh, capsys, spark, args, needle):
    before = fingerprint(wh)
    code, out, err = cli(["--warehouse", wh] + [a.replace("{wh}", wh) for a in args], capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, (code, err)
    assert len(lines) == 1, err
    assert needle.lower() in lines[0].lower(), lines[0]
    assert "Traceback" not in err and "\tat " not in err
    assert fingerprint(wh) == before
    assert spark.sparkContext._jvm.java.lang.System.getProperty("advisor.ran") is None


def test_the_catalogue_is_large_enough():
    assert len(CASES) >= 40
