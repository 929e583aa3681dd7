"""`advisor run --file`: every query of a script or query log through the advise path in one
process, a decision line per query and a summary; with --compare the answers are checked against
plain runs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cli_helpers import cli

HAVING = "SELECT g, sum(v) AS s FROM t GROUP BY g HAVING sum(v) > {x}"



@pytest.fixture(scope="module")
def wh(spark, tmp_path_factory):
    from advisor.warehouse.catalog import Catalog
    from advisor.warehouse.store import Store

    d = tmp_path_factory.mktemp("runfile")
    Catalog(spark, Store(d)).create_table("t", spark.createDataFrame(_frame()))
    return str(d)


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    g = rng.permutation(np.repeat(np.arange(100), 100))
    return pd.DataFrame({"g": g, "v": np.where(g < 10, 50, 1) * rng.integers(1, 3, g.size)})


def test_a_script_runs_in_one_process_with_a_line_per_query(wh, tmp_path, capsys):
    f = tmp_path / "q.sql"
    f.write_text(f"-- three queries\n{HAVING.format(x=6000)};\n{HAVING.format(x=6000)};\n"
                 "SELECT g, rank() OVER (PARTITION BY g ORDER BY v) AS r FROM t;\n")
    code, out, err = cli(["--warehouse", wh, "run", "--file", str(f), "--uses", "80", "--compare"], capsys)
    assert code == 0, err
    lines = out.strip().splitlines()
    assert [ln.split("]")[0] for ln in lines[:3]] == ["[1/3", "[2/3", "[3/3"]
    assert "captured and used sketch" in lines[0] and "built layout" in lines[0]
    assert lines[1].startswith("[2/3] used sketch") and "no sketch" in lines[2] and "window" in lines[2]
    assert lines[3].startswith("3 queries in") and "1 captured, 1 reused" in lines[3]
    assert "answers identical" in lines[3]


def test_a_query_log_as_json_gives_the_records_and_summary(wh, tmp_path, capsys):
    f = tmp_path / "log.jsonl"
    f.write_text("\n".join(json.dumps({"sql": HAVING.format(x=x), "at": f"2026-01-0{i}T08:00:00"})
                           for i, x in enumerate((6100, 6200), 1)))
    code, out, err = cli(["--warehouse", wh, "run", "--file", str(f), "--compare", "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert [r["at"] for r in doc["queries"]] == ["2026-01-01T08:00:00", "2026-01-02T08:00:00"]
    assert all(r["version"] == 1 and r["decision"]["reason"] for r in doc["queries"])
    sm = doc["summary"]
    assert sm["queries"] == 2 and sm["mismatches"] == [] and sm["plain_rows_read"] == 2 * 10_000
    assert [p["result"] for p in doc["plain"]] == [r["result"] for r in doc["queries"]]
    sums = _frame().groupby("g")["v"].sum()
    for r, x in zip(doc["queries"], (6100, 6200)):  # each query's own rows, as pandas computes them
        want = sorted([int(g), int(s)] for g, s in sums[sums > x].items())
        assert r["answer"]["columns"] == ["g", "s"] and r["answer"]["row_count"] == len(want) > 0
        assert sorted(r["answer"]["rows"]) == want and not r["answer"]["truncated"]


@pytest.mark.parametrize("args,needle", [
    (["run"], "either a query or --file"),
    (["run", "SELECT 1", "--file", "x.sql"], "either a query or --file"),
    (["run", "--file", "/nonexistent.sql"], "no such file"),
    (["run", "SELECT g FROM t", "--strategy", "BEST"], "unknown strategy"),
    (["run", "SELECT g FROM t", "--uses", "0"], "expected uses"),
])
def test_bad_run_input_is_one_line(wh, capsys, args, needle):
    code, out, err = cli(["--warehouse", wh] + args, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and needle in err, err


def test_a_bad_query_log_line_is_named(wh, tmp_path, capsys):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"sql": "SELECT 1"}\n{"query": "SELECT 2"}\n')
    code, _, err = cli(["--warehouse", wh, "run", "--file", str(f)], capsys)
    assert code == 2 and "line 2" in err and '"sql"' in err
