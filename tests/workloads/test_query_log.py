"""Workloads over users' own tables and queries, without Spark: query logs (SQL lines, ``;``-ended
statements, JSON lines with ``at``), ``import:`` datasets, ``changes:`` / ``delta_history`` update
rules, and the file:line a bad entry is reported at (exit code 2 through the CLI)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.errors import BadInput
from advisor.plan.parse import parse_sql
from workloads.replay.query_log import parse_query_log, read_query_log
from workloads.replay.step_list import plan_order
from workloads.replay.workload_file import load_workload

SCHEMA = {"flights3m": [("date", "timestamp"), ("delay", "bigint"), ("distance", "bigint"), ("origin", "string"),
                        ("destination", "string")]}
BASE = """name: own
seed: 1
datasets:
  - {import: flights3m, path: f.parquet, format: parquet}
strategies: [NO-PS, CB-OPT-GB]
query_log: q.sql
"""


def _setup(tmp_path: Path, log: str, workload: str = BASE, log_name: str = "q.sql") -> Path:
    (tmp_path / "f.parquet").write_bytes(b"")  # only its existence is checked without Spark
    (tmp_path / log_name).write_text(log)
    p = tmp_path / "w.yaml"
    p.write_text(workload)
    return p


def test_plain_lines_skip_blank_lines_and_comments(tmp_path):
    log = ("-- dashboard queries\n\n"
           "SELECT origin, count(*) AS n FROM flights3m GROUP BY origin HAVING count(*) > 20000\n"
           "   -- indented comment\n"
           "SELECT origin, avg(delay) AS d FROM flights3m GROUP BY origin ORDER BY d DESC LIMIT 5  \n\n"
           "SELECT origin, count(*) AS n FROM flights3m GROUP BY origin HAVING count(*) > 30000\n")
    got = parse_query_log(log, "q.sql")
    assert [(e["line"], e["at"]) for e in got] == [(3, None), (5, None), (7, None)]
    assert got[1]["sql"] == "SELECT origin, avg(delay) AS d FROM flights3m GROUP BY origin ORDER BY d DESC LIMIT 5"
    # the template is the parser's: literals of HAVING / LIMIT become placeholders
    for e in got:
        assert e["template"] == parse_sql(e["sql"], SCHEMA.get).template
    assert got[0]["template"] == got[2]["template"] != got[1]["template"]


def test_statements_ended_by_semicolons_may_span_lines(tmp_path):
    log = ("-- two statements\nSELECT origin, count(*) AS n\n  FROM flights3m\n  GROUP BY origin\n"
           "  -- a comment inside\n  HAVING count(*) > 5;\n\nSELECT ';' AS s, count(*) AS n FROM flights3m;\n")
    got = parse_query_log(log, "q.sql")
    assert [e["line"] for e in got] == [2, 8]
    assert got[0]["sql"] == "SELECT origin, count(*) AS n\n  FROM flights3m\n  GROUP BY origin\n  HAVING count(*) > 5"
    assert got[1]["sql"] == "SELECT ';' AS s, count(*) AS n FROM flights3m"


def test_json_lines_keep_their_order_and_at(tmp_path):
    rows = [{"sql": "SELECT origin, count(*) AS n FROM flights3m GROUP BY origin HAVING count(*) > 9;",
             "at": "2024-05-01T08:00:00Z", "user": "ana"},
            {"sql": "SELECT origin, count(*) AS n FROM flights3m GROUP BY origin HAVING count(*) > 7", "at": 12.5},
            {"sql": "SELECT origin, avg(delay) AS d FROM flights3m GROUP BY origin ORDER BY d DESC LIMIT 2",
             "at": "2024-04-30"},
            {"sql": "SELECT origin, avg(delay) AS d FROM flights3m GROUP BY origin ORDER BY d DESC LIMIT 4"}]
    p = tmp_path / "q.jsonl"
    p.write_text(json.dumps(rows[0]) + "\n\n" + "\n".join(json.dumps(r) for r in rows[1:]) + "\n")
    got = read_query_log(p)
    # replayed in the order written, not sorted by ``at``; a trailing ';' is dropped; other fields ignored
    assert [(e["line"], e["at"]) for e in got] == [(1, "2024-05-01T08:00:00Z"), (3, 12.5), (4, "2024-04-30"),
                                                   (5, None)]
    assert got[0]["sql"].endswith("> 9") and set(got[0]) == {"sql", "at", "line", "template"}


@pytest.mark.parametrize("name,text,where,problem", [
    ("q.jsonl", '{"sql": "SELECT 1"}\n{"sql": "SELECT 2"\n', ":2:", "invalid JSON"),
    ("q.jsonl", '{"sql": "SELECT 1"}\n\n{"query": "SELECT 2"}\n', ":3:", 'missing "sql" (keys: query)'),
    ("q.jsonl", '{"sql": "SELECT 1"}\n[1, 2]\n', ":2:", "expected a JSON object"),
    ("q.jsonl", '{"sql": ""}\n', ":1:", '"sql" must be a non-empty string'),
    ("q.jsonl", '{"sql": "SELECT 1", "at": "yesterday"}\n', ":1:", '"at" must be an ISO timestamp or a number'),
    ("q.jsonl", '{"sql": "SELECT 1", "at": true}\n', ":1:", '"at" must be an ISO timestamp or a number'),
    ("q.sql", "", ":1:", "holds no statement"),
    ("q.sql", "-- nothing but comments\n\n  \n", ":1:", "holds no statement"),
    ("q.sql", "SELECT 1\nSELECT FROM WHERE\n", ":2:", "malformed SQL"),
    ("q.sql", "SELECT 1\n\nDELETE FROM flights3m WHERE delay > 3\n", ":3:", "only SELECT queries are replayed"),
    ("q.sql", "SELECT 1\nSELECT 'abc FROM t\n", ":2:", "unterminated quote"),
    ("q.sql", "SELECT 1;\nSELECT 2\nSELECT 3;\n", ":2:", "at line 3, column 6 (a missing ';'?)"),
    ("q.sql", "SELECT 1 +\n", ":1:", "malformed SQL: Required keyword"),
])
def test_bad_entries_name_the_log_file_and_line(tmp_path, name, text, where, problem):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(BadInput) as e:
        read_query_log(p)
    assert str(e.value).startswith(f"{p}{where} ") and problem in str(e.value), str(e.value)
    # the same error through a workload file that names the log
    wl = _setup(tmp_path, text, BASE.replace("q.sql", name), name)
    with pytest.raises(BadInput) as e:
        load_workload(wl)
    assert str(e.value).startswith(f"{p}{where} "), str(e.value)


def test_a_workload_replays_its_log_with_updates_counted_in_statements(tmp_path):
    log = "".join(f"SELECT origin, count(*) AS n FROM flights3m GROUP BY origin HAVING count(*) > {c}\n"
                  for c in (10, 20, 30))
    log += "SELECT origin, avg(delay) AS d FROM flights3m GROUP BY origin ORDER BY d DESC LIMIT 5\n"
    ch = tmp_path / "changes"
    ch.mkdir()
    for f in ("b.csv", "a.parquet", "_SUCCESS", ".a.parquet.crc", "notes.txt", "c.csv"):
        (ch / f).write_text("op\n")
    wl = load_workload(_setup(tmp_path, log, BASE + "updates:\n  - {table: flights3m, every: 2, changes: changes}\n"))
    assert wl.queries == 4 and wl.query_log == str(tmp_path / "q.sql")
    assert [t.weight for t in wl.templates.values()] == [3.0, 1.0]
    # change files in name order (hidden and _-files, other suffixes skipped), one per update step
    assert wl.updates[0].changes == [str(ch / "a.parquet"), str(ch / "b.csv"), str(ch / "c.csv")]
    order = plan_order(wl)
    assert [s["kind"] for s in order] == ["query", "query", "update", "query", "query", "update"]
    assert [s["line"] for s in order if s["kind"] == "query"] == [1, 2, 3, 4]
    assert [s["file"] for s in order if s["kind"] == "update"] == wl.updates[0].changes[:2]
    # the rule stops when its files run out
    wl = load_workload(_setup(tmp_path, log, BASE + "updates:\n  - {table: flights3m, every: 1, changes: changes}\n"))
    assert [s["kind"] for s in plan_order(wl)] == ["query", "update"] * 3 + ["query"]
    assert sum(s["kind"] == "update" for s in plan_order(wl, {0: 1})) == 1  # a given limit wins


def test_the_plan_fingerprint_covers_the_log_and_change_files(tmp_path):
    """Another query log (same workload text) means other steps: a prepared run directory refuses it."""
    from workloads.replay.runner import prepare

    p = _setup(tmp_path, "SELECT origin, count(*) AS n FROM flights3m GROUP BY origin HAVING count(*) > 9\n")
    a = load_workload(p)
    (tmp_path / "q.sql").write_text("SELECT origin, count(*) AS n FROM flights3m GROUP BY origin HAVING count(*) > 8\n")
    b = load_workload(p)
    assert a.sha256 == b.sha256 and a.plan_sha256 != b.plan_sha256
    run = tmp_path / "run"
    run.mkdir()
    (run / "plan.json").write_text(json.dumps({"sha256": a.sha256, "plan_sha256": a.plan_sha256, "steps": []}))

    def no_spark(_):
        raise AssertionError("a prepared directory must not be prepared again")

    assert prepare(no_spark, a, run, print)["steps"] == []
    with pytest.raises(BadInput, match="query log or change files changed"):
        prepare(no_spark, b, run, print)
    # so does another change file's content
    (tmp_path / "changes").mkdir()
    (tmp_path / "changes" / "1.csv").write_text("op,_rid\nd,1\n")
    p.write_text(BASE + "updates:\n  - {table: flights3m, every: 1, changes: changes}\n")
    c = load_workload(p)
    (tmp_path / "changes" / "1.csv").write_text("op,_rid\nd,2\n")
    assert load_workload(p).plan_sha256 != c.plan_sha256 and load_workload(p).sha256 == c.sha256


GOOD_IMPORTS = """name: own
datasets:
  - {import: weather, path: data/w.csv, format: csv, key: [date], schema: "date DATE, t DOUBLE"}
  - {import: trips, path: trips, format: delta, key: "id, day", as_of: 2}
  - {import: orders, table: sales.orders}
  - {import: flights3m, vega: flights-3m.parquet}
  - {name: crimes, rows: 1000}
strategies: [NO-PS, CB-OPT-GB]
query_log: q.sql
updates:
  - {table: trips, every: 2, delta_history: true}
  - {table: orders, every: 3, delta_history: true}
  - {table: crimes, every: 3, inserts: 5}
"""


def _imports(tmp_path: Path, text: str = GOOD_IMPORTS) -> Path:
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "w.csv").write_text("date,t\n")
    (tmp_path / "trips" / "_delta_log").mkdir(parents=True, exist_ok=True)
    return _setup(tmp_path, "SELECT 1\n", text)


def test_import_datasets_resolve_paths_from_the_workload_directory(tmp_path):
    wl = load_workload(_imports(tmp_path))
    d = {x.get("import", x.get("name")): x for x in wl.datasets}
    assert d["weather"]["path"] == str(tmp_path / "data" / "w.csv") and d["weather"]["key"] == ["date"]
    assert d["trips"] | {"line": 0} == {"import": "trips", "path": str(tmp_path / "trips"), "table": None,
                                        "vega": None, "format": "delta", "key": ["id", "day"], "schema": None,
                                        "as_of": 2, "line": 0}
    assert d["orders"]["table"] == "sales.orders" and d["orders"]["format"] is None
    assert d["flights3m"]["format"] == "parquet" and d["crimes"] == {"name": "crimes", "rows": 1000}
    assert [u.delta_history for u in wl.updates] == [True, True, False]


@pytest.mark.parametrize("old,new,where", [
    ("format: csv, key", "format: xls, key", ":3: key 'datasets.0.format': unknown format"),
    ("format: csv, key", "key", ":3: key 'datasets.0': missing required key 'format'"),
    ("{import: orders, table: sales.orders}", "{import: orders, table: sales.orders, sf: 1}",
     ":5: key 'datasets.2.sf': unknown key for an import"),
    ("{import: orders, table: sales.orders}", "{import: orders, table: sales.orders, path: x, format: csv}",
     ":5: key 'datasets.2': give exactly one of path"),
    ("path: data/w.csv", "path: data/missing*.csv", ":3: key 'datasets.0.path': no files at"),
    ("{import: trips,", "{import: 2trips,", ":4: key 'datasets.1.import'"),
    ("{import: orders,", "{import: weather,", ":5: key 'datasets.2.import': table weather is imported twice"),
    ("key: [date]", "key: [date, 3]", ":3: key 'datasets.0.key'"),
    ("format: csv, key: [date]", "format: parquet, key: [date]", ":3: key 'datasets.0.schema'"),
    ("key: [date],", "key: [date], as_of: 1,", ":3: key 'datasets.0.as_of'"),
    ("vega: flights-3m.parquet", "vega: flights.arrow", ":6: key 'datasets.3.vega'"),
    ("{name: crimes, rows: 1000}", "{rows: 1000}", ":7: key 'datasets.4': expected {name: DATASET}"),
    ("{table: crimes, every: 3, inserts: 5}", "{table: crimes, every: 3, inserts: 5, changes: x}",
     ":13: key 'updates.2': give one of"),
    ("{table: crimes, every: 3, inserts: 5}", "{table: crimes, every: 3, delta_history: true}",
     ":13: key 'updates.2.delta_history': table crimes is not imported from a Delta table"),
    ("{table: crimes, every: 3, inserts: 5}", "{table: weather, every: 3, changes: nowhere}",
     ":13: key 'updates.2.changes'"),
    ("{table: crimes, every: 3, inserts: 5}", "{table: weather, every: 3, changes: trips}",
     ":13: key 'updates.2.changes': no change files"),
    ("{table: crimes, every: 3, inserts: 5}", "{table: trips, every: 3, inserts: 5}",
     ":13: key 'updates.2': table trips is a Delta table: replay its commits with delta_history"),
    ("{table: crimes, every: 3, inserts: 5}", "{table: trips, every: 3, delta_history: true}",
     ":13: key 'updates.2.delta_history': the commits of trips are replayed by an earlier rule"),
    ("{table: trips, every: 2, delta_history: true}", "{table: trips, every: 2, delta_history: false}",
     ":11: key 'updates.0.delta_history'"),
    ("query_log: q.sql", "query_log: q.sql\nqueries: 3", ":10: key 'queries'"),
    ("query_log: q.sql", "query_log: q.sql\ntemplates: {t: {sql: SELECT 1}}", ":10: key 'templates'"),
    ("query_log: q.sql", "query_log: q.sql\nsequence: [{query: t}]", ":10: key 'sequence'"),
    ("query_log: q.sql", "query_log: missing.sql", ":9: key 'query_log': cannot read"),
])
def test_import_and_update_errors_name_line_and_key(tmp_path, old, new, where):
    assert old in GOOD_IMPORTS
    p = _imports(tmp_path, GOOD_IMPORTS.replace(old, new, 1))
    with pytest.raises(BadInput) as e:
        load_workload(p)
    assert str(e.value).startswith(str(p) + where), str(e.value)


def test_cli_rejects_a_bad_query_log_with_exit_2(tmp_path, capsys):
    from cli_helpers import cli

    p = _setup(tmp_path, '{"sql": "SELECT 1"}\n{"at": 3}\n', BASE.replace("q.sql", "q.jsonl"), "q.jsonl")
    code, _, err = cli(["--warehouse", str(tmp_path / "wh"), "replay", str(p)], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"{tmp_path / 'q.jsonl'}:2: missing \"sql\"" in lines[0], err
    assert not (tmp_path / "wh" / "runs").exists()  # nothing started
