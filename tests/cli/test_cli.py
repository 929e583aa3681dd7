"""The CLI's contract: commands listed, JSON output, and bad input as one stderr line with exit 2."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from cli_helpers import cli

DESIGN_COMMANDS = ["demo", "data", "partitions", "explain", "recommend", "capture", "run", "maintain", "replay",
                   "report", "gate"]



@pytest.fixture(scope="module")
def wh(spark, tmp_path_factory):
    from advisor.warehouse.catalog import Catalog
    from advisor.layout.clustered_copy import build_layout
    from advisor.warehouse.store import Store

    d = tmp_path_factory.mktemp("cliwh")
    cat = Catalog(spark, Store(d))
    pdf = pd.DataFrame({"g": [i % 5 for i in range(200)], "v": list(range(200)), "s": [f"x{i % 3}" for i in range(200)]})
    cat.create_table("t", spark.createDataFrame(pdf))
    build_layout(cat, "t", "g", rows_per_file=40)  # one file per g: a sketch on g skips files
    return str(d)


def test_help_lists_design_commands():
    r = subprocess.run([sys.executable, "-m", "advisor.cli", "--help"], capture_output=True, text=True,
                       env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0
    for c in DESIGN_COMMANDS:
        assert f" {c} " in r.stdout, c


@pytest.mark.parametrize("args,needle", [
    (["run", "SELEC g FROM t"], "malformed SQL"),
    (["run", "SELECT * FROM nope"], "unknown table"),
    (["run", "SELECT zz FROM t"], "unknown column"),
    (["run", "SELECT g, v FROM t GROUP BY g"], "GROUP BY"),
    (["capture", "SELECT g, count(*) FROM t GROUP BY g", "--on", "t"], "TABLE.ATTR"),
    (["capture", "SELECT g, count(*) FROM t GROUP BY g", "--on", "t.nope"], "unknown column"),
    (["capture", "SELECT g, avg(v) AS a FROM t GROUP BY g ORDER BY a DESC LIMIT 1", "--on", "t.v"], "cannot sketch"),
    (["capture", "SELECT a.g FROM t a LEFT JOIN t b ON a.g = b.g", "--on", "t.g"], "OUTER JOIN"),
    (["data", "load", "nosuch"], "unknown dataset"),
    (["data", "load", "tpch", "--sf", "0"], "--sf"),
    (["data", "apply", "/nonexistent.parquet", "--table", "t"], "does not exist"),
    (["--conf", "novalue", "data", "list"], "key=value"),
    (["partitions", "build", "t", "nope"], "unknown column"),
    (["bench", "maintain", "--query", "nosuch"], "unknown benchmark query"),
    (["bench", "use", "--query", "q3", "--query", "q99"], "unknown benchmark query q99"),
    (["bench", "capture", "--query", "q99"], "unknown benchmark query q99"),
    (["bench", "maintain", "--size", "ten"], "--size"),
    (["bench", "maintain", "--kind", "upsert"], "--kind"),
    (["bench", "maintain", "--order", "random"], "--order"),
    (["bench", "maintain", "--dataset", "crimes"], "--dataset"),
])
def test_bad_input_exits_2_with_one_line(wh, capsys, args, needle):
    code, out, err = cli(["--warehouse", wh] + args, capsys)
    assert code == 2
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], err
    assert "Traceback" not in err


def test_data_list_reads_versions_without_spark(wh, capsys):
    code, out, err = cli(["--warehouse", wh, "data", "list", "--json"], capsys)
    assert code == 0, err
    rows = [r for r in json.loads(out) if r["table"] == "t"]
    assert rows and rows[0]["version"] == 1 and rows[0]["kind"] == "base" and rows[0]["rows"] == 200


def test_damaged_store(tmp_path, capsys):
    (tmp_path / "advisor.db").write_bytes(b"this is not sqlite" * 100)
    code, _, err = cli(["--warehouse", str(tmp_path), "data", "list"], capsys)
    assert code == 2 and "damaged" in err


def test_capture_then_run_uses_sketch(wh, capsys):
    sql = "SELECT g, sum(v) AS total FROM t GROUP BY g HAVING sum(v) > 4040"
    code, out, _ = cli(["--warehouse", wh, "capture", sql, "--on", "t.g", "--fragments", "5", "--json"], capsys)
    assert code == 0
    cap = json.loads(out)
    assert cap["sketch"]["parts"][0]["attr"] == "g"
    code, out, _ = cli(["--warehouse", wh, "run", sql, "--json"], capsys)
    used = json.loads(out)
    code, out, _ = cli(["--warehouse", wh, "run", sql, "--no-use", "--json"], capsys)
    plain = json.loads(out)
    assert used["sketch"]["id"] == cap["sketch"]["id"] and plain["sketch"] is None
    assert sorted(map(tuple, used["rows"])) == sorted(map(tuple, plain["rows"]))
    # sum over g=k is 40k + 3900: g=3 gives 4020, g=4 gives 4060, so only g=4 passes 4040
    assert [r[0] for r in used["rows"]] == [4]
    assert set(used["metrics"]) == {"files_read", "bytes_read", "rows_read", "groups"}
    assert plain["metrics"]["rows_read"] == 200 and used["metrics"]["rows_read"] == 40
    # groups formed before HAVING: the 5 values of g plain, the one file's g with the sketch
    assert plain["metrics"]["groups"] == 5 and used["metrics"]["groups"] == 1


def test_unsupported_query_runs_plain_with_note(wh, capsys):
    code, out, err = cli(["--warehouse", wh, "run", "--json",
                          "SELECT g, v, rank() OVER (PARTITION BY g ORDER BY v) AS r FROM t"], capsys)
    assert code == 0 and "window functions" in err
    assert len(json.loads(out)["rows"]) == 200


def test_explain_reports_verdicts(wh, capsys):
    code, out, _ = cli(["--warehouse", wh, "explain", "--json",
                        "SELECT g, avg(v) AS a FROM t GROUP BY g ORDER BY a DESC LIMIT 1"], capsys)
    info = json.loads(out)
    verdicts = {c["attr"]: c for c in info["tables"][0]["candidates"]}
    assert verdicts["g"]["safe"] and not verdicts["v"]["safe"]
    assert "avg" in verdicts["v"]["reason"]


def test_a_malformed_driver_cache_budget_is_bad_input_before_any_work(wh, capsys, monkeypatch):
    monkeypatch.setenv("ADVISOR_DRIVER_CACHE_MB", "plenty")
    code, out, err = cli(["--warehouse", wh, "run", "SELECT g, sum(v) AS s FROM t GROUP BY g"], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "ADVISOR_DRIVER_CACHE_MB" in err
