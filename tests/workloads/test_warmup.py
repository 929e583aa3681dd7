"""The replay's untimed warm-up (``workloads.replay.warmup``): it warms the process and leaves no trace in
what the strategies decide, read, answer or store (differential against the same replay without it)."""

from __future__ import annotations

import hashlib
import json
import sqlite3

from advisor.context import Context

WORKLOAD = (
    "name: warm\nseed: 5\ndatasets: [{name: crimes, rows: 30000, seed: 7}]\n"
    "strategies: [NO-PS, CB-OPT-GB]\nmeasured_costs: false\nmethod: exact\n"
    "layouts: [crimes.beat, crimes.ward]\nlayout_rows_per_file: 1000\n"
    "templates:\n"
    "  beats:\n    sql: SELECT beat, count(*) AS n FROM crimes GROUP BY beat HAVING count(*) > {c}\n"
    "    params: {c: {quantile: {sql: 'SELECT count(*) AS n FROM crimes GROUP BY beat', between: [0.9, 0.99]},"
    " integer: true}}\n"
    "  wards:\n    sql: SELECT ward, count(*) AS n FROM crimes GROUP BY ward ORDER BY n DESC LIMIT {k}\n"
    "    params: {k: {choice: [3, 5]}}\n"
    "queries: 6\nupdates:\n  - {table: crimes, every: 2, inserts: 200, deletes: 40}\n")


def _facts(doc: dict) -> list:
    """What a replay decided, read and answered per (strategy, step), without timings."""
    return sorted((q["strategy"], q["step"], q["decision"]["action"], q["decision"]["attr"],
                   q["decision"]["fragments"], q["sketch_id"], q["selectivity"]["real"], q["scan"]["rows"],
                   q["scan"]["files"], q["result"]["digest"]) for q in doc["queries"])


def _store_counts(run_dir, strategy: str) -> dict:
    con = sqlite3.connect(run_dir / "strategies" / strategy / "advisor.db")
    try:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("runs", "sketches", "samples", "decisions", "states")}
    finally:
        con.close()


def test_warm_up_leaves_decisions_reads_answers_and_stores_as_without_it(spark, tmp_path):
    from advisor.maintain.spark import state_store as states
    from workloads.replay.runner import replay

    cold, warm = tmp_path / "cold.yaml", tmp_path / "warm.yaml"
    cold.write_text(WORKLOAD)
    warm.write_text(WORKLOAD + "warmup: 5\n")
    ctx = Context(tmp_path / "wh", spark=spark)
    a = replay(ctx, str(cold), out=str(tmp_path / "cold"))
    b = replay(ctx, str(warm), out=str(tmp_path / "warm"))
    da, db = (json.loads((d / "run.json").read_text()) for d in (a, b))
    assert da["summary"]["answers_identical"] and db["summary"]["answers_identical"]
    assert any(q["decision"]["action"] == "reuse" for q in db["queries"])  # sketches were used
    assert _facts(da) == _facts(db)
    assert sorted((m["strategy"], m["step"], m["how"], m["new_sketch_id"]) for m in da["maintenance"]) == \
        sorted((m["strategy"], m["step"], m["how"], m["new_sketch_id"]) for m in db["maintenance"])
    for s in ("NO-PS", "CB-OPT-GB"):
        assert _store_counts(a, s) == _store_counts(b, s)
    # the warm-up ran once per strategy, untimed, and its scratch stores are gone
    log = [json.loads(x) for x in (b / "log.jsonl").read_text().splitlines()]
    ups = [e for e in log if e["type"] == "warmup"]
    assert [(e["strategy"], e["steps"]) for e in ups] == [("NO-PS", 5), ("CB-OPT-GB", 5)]
    assert db["warmup"]["steps"] == 5 and set(db["warmup"]["seconds"]) == {"NO-PS", "CB-OPT-GB"}
    assert da["warmup"] == {"steps": 0, "seconds": {}}
    assert not (b / "warmup").exists()
    assert not [k for k in states._cache if "warmup" in k[0]]
    # temp views are namespaced by warehouse (``Catalog.view_prefix``): none of the scratch ones is left
    def prefix(d):
        return "w" + hashlib.sha1(str(d.resolve()).encode()).hexdigest()[:8]

    scratch = {prefix(b / "warmup" / s / r) for s in ("NO-PS", "CB-OPT-GB") for r in ("NO-PS", "CB-OPT-GB")}
    views = {t.name.split("_")[0] for t in spark.catalog.listTables() if t.isTemporary}
    assert prefix(b / "strategies" / "CB-OPT-GB") in views  # the timed run's views are there to be seen
    assert not views & scratch


def test_a_negative_warmup_is_a_schema_error(tmp_path):
    import pytest

    from advisor.errors import BadInput
    from workloads.replay.workload_file import load_workload

    p = tmp_path / "w.yaml"
    p.write_text(WORKLOAD + "warmup: -1\n")
    with pytest.raises(BadInput, match=r"w\.yaml:\d+: key 'warmup': must be >= 0"):
        load_workload(str(p))
