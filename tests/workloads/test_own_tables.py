"""Replaying users' own tables end to end on Spark: real public files that no generator of the
project made (vega-datasets' 3M flights as Parquet, Seattle weather as CSV) imported by a workload
file, a query log of HAVING / top-k / group-by statements, change files applied in order, and a
Delta table's own commits; CB-OPT-GB must answer every step as NO-PS does.  Plus the cache of
fetched files (``workloads.data.external``), offline."""

from __future__ import annotations

import io
import json
import tarfile
import time
from pathlib import Path

import pytest

from advisor.errors import BadInput
from advisor.serve.decision_record import digest
from workloads.data import external

FLIGHTS_LOG = """-- a dashboard's queries over the imported tables, replayed as written
SELECT origin, count(*) AS n FROM flights3m GROUP BY origin HAVING count(*) > 20000
SELECT origin, avg(delay) AS d FROM flights3m GROUP BY origin ORDER BY d DESC LIMIT 5
SELECT weather, avg(temp_max) AS t, count(*) AS n FROM weather GROUP BY weather
SELECT origin, destination, count(*) AS n FROM flights3m WHERE delay > 15 GROUP BY origin, destination \
HAVING count(*) > 1000
SELECT weather, sum(precipitation) AS p FROM weather GROUP BY weather HAVING sum(precipitation) > 100
SELECT origin, avg(delay) AS d FROM flights3m GROUP BY origin ORDER BY d DESC LIMIT 3

SELECT weather, count(*) AS n FROM weather GROUP BY weather ORDER BY n DESC LIMIT 2
SELECT origin, avg(delay) AS d FROM flights3m GROUP BY origin ORDER BY d DESC LIMIT 5
"""
WEATHER_SCHEMA = "date DATE, precipitation DOUBLE, temp_max DOUBLE, temp_min DOUBLE, wind DOUBLE, weather STRING"
# two change files of the weather table, as `advisor data apply` takes them: new days, then fixes;
# deletes name row ids (one CSV file: the rows of the import are 0..1460 in file order)
CHANGES = {
    "001_new_days.csv": "op,date,precipitation,temp_max,temp_min,wind,weather,_rid\n"
                        "insert,2016-01-01,0.0,8.3,1.1,2.0,sun,\ninsert,2016-01-02,5.1,7.2,2.8,4.1,rain,\n"
                        "insert,2016-01-03,0.0,9.4,0.6,1.9,sun,\ndelete,,,,,,,3\n",
    "002_fixes.csv": "op,date,precipitation,temp_max,temp_min,wind,weather,_rid\n"
                     "delete,,,,,,,10\ndelete,,,,,,,11\ninsert,2016-01-04,12.0,6.1,3.3,6.0,rain,\n",
}


def _cli(*args) -> int:
    from advisor.cli.main import main

    with pytest.raises(SystemExit) as e:
        main(list(args))
    return e.value.code


def _by_step(doc: dict, strategy: str) -> dict[int, dict]:
    return {q["step"]: q for q in doc["queries"] if q["strategy"] == strategy}


# ---------- fetched files, offline ----------

def _fake_tarball(cache: Path, files: dict[str, bytes]) -> Path:
    p = cache / f"{external.PACKAGE}-{external.VERSION}.tgz"
    p.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(p, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"package/data/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return p


def test_files_are_extracted_from_the_cached_tarball_without_network(tmp_path, monkeypatch):
    monkeypatch.setenv(external.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(external, "URL", "http://127.0.0.1:9/unreachable.tgz")  # any download would fail
    tgz = _fake_tarball(tmp_path / "cache", {"a.csv": b"x,y\n1,2\n"})
    p = external.vega_file("data/a.csv")
    assert p == tmp_path / "cache" / f"vega-datasets-{external.VERSION}" / "data" / "a.csv"
    assert p.read_bytes() == b"x,y\n1,2\n"
    tgz.unlink()  # a second call needs neither the network nor the tarball
    assert external.vega_file("a.csv") == p
    assert not [f for f in p.parent.iterdir() if f.name.startswith(".")]  # no temporary left behind
    _fake_tarball(tmp_path / "cache", {"a.csv": b""})
    with pytest.raises(BadInput, match="has no file data/missing.csv"):
        external.vega_file("missing.csv")
    with pytest.raises(BadInput, match="not a file name under data/"):
        external.vega_file("../x.csv")


def test_a_download_with_another_checksum_is_refused_and_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv(external.CACHE_ENV, str(tmp_path / "cache"))
    bogus = tmp_path / "bogus.tgz"
    bogus.write_bytes(b"not the package")
    monkeypatch.setattr(external, "URL", bogus.as_uri())
    with pytest.raises(BadInput, match="checksum mismatch"):
        external.vega_tarball()
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").iterdir())
    monkeypatch.setattr(external, "URL", "http://127.0.0.1:9/unreachable.tgz")
    with pytest.raises(BadInput, match="cannot download"):
        external.vega_tarball()


# ---------- imported files and a query log, replayed ----------

@pytest.fixture(scope="module")
def vega():
    """The two real files (fetched once into the user's cache; without them the test fails)."""
    files = {n: external.vega_file(n) for n in ("flights-3m.parquet", "seattle-weather.csv")}
    assert external._integrity(external.vega_tarball()) == external.INTEGRITY
    return files


@pytest.fixture(scope="module")
def own_run(spark, vega, tmp_path_factory):
    """The workload replayed once through `advisor replay` (the advise path): flights imported
    from the vega cache, weather from a path relative to the workload file, a change file applied
    to weather after every 3 statements."""
    base = tmp_path_factory.mktemp("own")
    (base / "data").mkdir()
    (base / "data" / "seattle-weather.csv").symlink_to(vega["seattle-weather.csv"])
    (base / "changes").mkdir()
    for name, text in CHANGES.items():
        (base / "changes" / name).write_text(text)
    (base / "queries.sql").write_text(FLIGHTS_LOG)
    wl = base / "own.yaml"
    wl.write_text(
        "name: own\nseed: 3\ndatasets:\n"
        "  - {import: flights3m, vega: flights-3m.parquet}\n"
        "  - {import: weather, path: data/seattle-weather.csv, format: csv, key: [date],\n"
        f"     schema: '{WEATHER_SCHEMA}'}}\n"
        "layouts: [flights3m.origin]\nstrategies: [NO-PS, CB-OPT-GB]\nmeasured_costs: false\n"
        "query_log: queries.sql\nupdates:\n  - {table: weather, every: 3, changes: changes}\n")
    t0 = time.perf_counter()
    code = _cli("--warehouse", str(base / "wh"), "replay", str(wl), "--out", str(base / "run"), "--no-report")
    secs = time.perf_counter() - t0
    assert code == 0
    doc = json.loads((base / "run" / "run.json").read_text())
    print(f"own tables: replay {secs:.1f} s, prepare {doc['prepare_seconds']}")
    return base, doc


def test_imported_files_replay_a_query_log_with_the_same_answers(own_run):
    _, doc = own_run
    from reports.schema import validate_run

    validate_run(doc)
    assert doc["status"] == "complete" and doc["strategies"] == ["NO-PS", "CB-OPT-GB"]
    rows = {t: n for d in doc["datasets"] for t, n in d["tables"].items()}
    assert rows == {"flights3m": 3_000_000, "weather": 1461}
    assert {d["name"]: d["import"]["format"] for d in doc["datasets"]} == {"flights3m": "parquet", "weather": "csv"}
    # every statement of the log is a step, replayed as written, in order, with its line in the log
    queries = [s for s in doc["steps"] if s["kind"] == "query"]
    statements = [ln for ln in FLIGHTS_LOG.splitlines() if ln.strip() and not ln.startswith("--")]
    assert [s["sql"] for s in queries] == statements
    assert [s["line"] for s in queries] == [2, 3, 4, 5, 6, 7, 9, 10]
    plain, cb = _by_step(doc, "NO-PS"), _by_step(doc, "CB-OPT-GB")
    assert sorted(plain) == sorted(cb) == [s["step"] for s in queries]
    for s in queries:  # the same answer at every step, and the parser's template
        assert cb[s["step"]]["result"] == plain[s["step"]]["result"], s
        assert plain[s["step"]]["template"] == cb[s["step"]]["template"] == s["template"]
    assert doc["summary"]["answers_identical"], doc["summary"]["mismatches"]
    assert plain[queries[0]["step"]]["result"]["rows"] > 0 and plain[queries[0]["step"]]["scan"]["rows"] == 3_000_000
    # the top-k statement over origin finds a sketch worth capturing on the clustered copy, and a
    # later instance of it is answered from a sketch (reused or captured again)
    sketched = [q for q in cb.values()
                if q["decision"]["action"] in ("capture", "reuse") and q["sketch_id"] is not None]
    assert sketched, [q["decision"]["reason"] for q in cb.values()]
    last = cb[queries[-1]["step"]]
    assert last["decision"]["action"] in ("capture", "reuse"), last["decision"]["reason"]
    assert last["scan"]["rows"] < plain[queries[-1]["step"]]["scan"]["rows"]
    for q in cb.values():
        assert q["decision"]["reason"], q


def test_change_files_advance_the_versions_in_order(own_run):
    _, doc = own_run
    ups = [s for s in doc["steps"] if s["kind"] == "update"]
    assert [(Path(s["file"]).name, s["table"], s["version"], s["inserts"], s["deletes"]) for s in ups] == [
        ("001_new_days.csv", "weather", 2, 3, 1), ("002_fixes.csv", "weather", 3, 1, 2)]
    assert doc["steps"].index(ups[0]) == 3 and doc["steps"].index(ups[1]) == 7  # after statements 3 and 6
    plain = _by_step(doc, "NO-PS")
    weather = [s["step"] for s in doc["steps"] if s["kind"] == "query" and "FROM weather" in s["sql"]]
    # the weather rows each statement saw: as imported, after the first file, after the second
    assert [plain[s]["table_rows"] for s in weather] == [1461, 1463, 1462]
    assert doc["summary"]["answers_identical"] and doc["summary"]["maintained_equal_to_recapture"]


def test_a_bad_change_file_is_reported_by_name(spark, tmp_path, capsys):
    (tmp_path / "t.csv").write_text("id,g,v\n" + "".join(f"{i},{i % 3},{i * 1.5}\n" for i in range(30)))
    (tmp_path / "changes").mkdir()
    (tmp_path / "changes" / "1.csv").write_text("op,id,g,v,_rid\ninsert,100,1,2.0,\n")
    (tmp_path / "changes" / "2.csv").write_text("op,id,g,colour\ninsert,101,1,red\n")
    (tmp_path / "q.sql").write_text("SELECT g, sum(v) AS s FROM t GROUP BY g HAVING sum(v) > 10\n" * 3)
    wl = tmp_path / "w.yaml"
    wl.write_text("name: bad\ndatasets:\n  - {import: t, path: t.csv, format: csv, key: [id]}\nmeasured_costs: false\n"
                  "query_log: q.sql\nupdates:\n  - {table: t, every: 1, changes: changes}\n")
    capsys.readouterr()
    assert _cli("--warehouse", str(tmp_path / "wh"), "replay", str(wl), "--out", str(tmp_path / "run")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{wl}:7: key 'updates.0.changes'" in err[0], err
    assert str(tmp_path / "changes" / "2.csv") in err[0] and "colour" in err[0], err


# ---------- a Delta table's own commits ----------

SQL = "SELECT g, sum(v) AS s FROM dt GROUP BY g HAVING sum(v) > {c}"


def test_a_delta_tables_commits_are_replayed_version_by_version(spark, tmp_path):
    """Version 0 written with plain Spark (change feed on), then an INSERT and a DELETE: imported
    at version 0, each update step moves the replay to the next commit; nothing is written to it."""
    from advisor.context import Context
    from advisor.warehouse import delta_source
    from workloads.replay.runner import replay

    path = str(tmp_path / "dt")
    df = spark.range(0, 20000).selectExpr("id", "cast(id % 500 as int) AS g").selectExpr(
        "id", "g", "cast(g * 2 + (id * 7919) % 100 AS double) AS v")
    (df.repartitionByRange(8, "g").sortWithinPartitions("g").write.format("delta")
     .option("delta.enableChangeDataFeed", "true").save(path))
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (900001, 7, 999.0), (900002, 8, 50000.0)")  # g=8 joins the result
    spark.sql(f"DELETE FROM delta.`{path}` WHERE g = 499 OR id % 97 = 0")                     # g=499 leaves it
    assert delta_source.latest_version(path) == 2
    thresholds = (38000, 37000, 38000)
    (tmp_path / "q.sql").write_text("".join(SQL.format(c=c) + "\n" for c in thresholds))
    wl = tmp_path / "w.yaml"
    wl.write_text(f"name: delta\nseed: 2\ndatasets:\n  - {{import: dt, path: {path}, format: delta, key: [id]}}\n"
                  "strategies: [NO-PS, CB-OPT-GB]\nmeasured_costs: false\nquery_log: q.sql\n"
                  "updates:\n  - {table: dt, every: 1, delta_history: true}\n")
    run = replay(Context(tmp_path / "wh", spark=spark), str(wl), out=str(tmp_path / "run"))
    doc = json.loads((run / "run.json").read_text())
    plan = json.loads((run / "plan.json").read_text())
    assert plan["initial_versions"] == {"dt": 0}
    assert [(s["kind"], s.get("version")) for s in doc["steps"]] == [
        ("query", None), ("update", 1), ("query", None), ("update", 2), ("query", None)]
    assert next((s["inserts"], s["deletes"]) for s in doc["steps"] if s["kind"] == "update") == (2, 0)
    assert delta_source.latest_version(path) == 2  # the replay committed nothing to the table
    # each query step read the version its pin had reached: 0, then 1, then 2 (answers of plain
    # Spark time travel at those versions)
    plain, cb = _by_step(doc, "NO-PS"), _by_step(doc, "CB-OPT-GB")
    steps = [s["step"] for s in doc["steps"] if s["kind"] == "query"]
    for version, step, c in zip((0, 1, 2), steps, thresholds):
        spark.read.format("delta").option("versionAsOf", version).load(path).createOrReplaceTempView("dt_plain")
        want = digest([tuple(r) for r in spark.sql(SQL.format(c=c).replace("FROM dt", "FROM dt_plain")).collect()])
        assert plain[step]["result"]["digest"] == want, (version, step)
        assert cb[step]["result"] == plain[step]["result"], (version, step)
    rows = [plain[s]["table_rows"] for s in steps]
    assert rows[0] == 20000 and rows[1] == 20002 and rows[2] < rows[1]
    assert doc["summary"]["answers_identical"] and doc["summary"]["maintained_equal_to_recapture"]
    acts = [cb[s]["decision"]["action"] for s in steps]
    assert "capture" in acts or "reuse" in acts, [cb[s]["decision"]["reason"] for s in steps]
