"""Workload files: the shipped ones parse; schema errors name the file, line and key (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.errors import BadInput
from workloads.replay.step_list import literal, plan_order
from workloads.replay.workload_file import load_workload

ROOT = Path(__file__).resolve().parents[2]
GOOD = """name: w
seed: 1
datasets:
  - {name: crimes, rows: 1000}
strategies: [NO-PS, CB-OPT-GB]
queries: 12
templates:
  a:
    sql: SELECT beat, count(*) AS n FROM crimes GROUP BY beat HAVING count(*) > {c}
    params:
      c: {uniform: [1, 5], integer: true}
  b:
    weight: 3
    sql: SELECT ward, count(*) AS n FROM crimes GROUP BY ward ORDER BY n DESC LIMIT {k}
    params:
      k: {choice: [2, 3]}
updates:
  - {table: crimes, every: 4, inserts: 10, deletes: 2}
"""


def _write(tmp_path, text: str) -> Path:
    p = tmp_path / "w.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "workloads").glob("*.yaml")))
def test_shipped_workloads_parse(name):
    wl = load_workload(ROOT / "workloads" / name)
    assert wl.templates and wl.datasets and wl.strategies


def test_order_is_seeded_and_updates_follow_every_n_queries(tmp_path):
    wl = load_workload(_write(tmp_path, GOOD))
    order = plan_order(wl)
    assert order == plan_order(load_workload(_write(tmp_path, GOOD)))
    kinds = [s["kind"] for s in order]
    assert kinds.count("query") == 12 and kinds.count("update") == 3
    # an update comes right after query 4, 8 and 12
    q = 0
    for s in order:
        if s["kind"] == "query":
            q += 1
        else:
            assert q % 4 == 0 and s == {"kind": "update", "table": "crimes", "inserts": 10, "deletes": 2}
    other = load_workload(_write(tmp_path, GOOD.replace("seed: 1", "seed: 2")))
    assert [s.get("template") for s in plan_order(other)] != [s.get("template") for s in order]


@pytest.mark.parametrize("old,new,where", [
    ("seed: 1", "seed: 1\nbogus: 3", ":3: key 'bogus'"),
    ("[NO-PS, CB-OPT-GB]", "[NO-PS, CB-BEST]", ":5: key 'strategies.1'"),
    ("[NO-PS, CB-OPT-GB]", "[NO-PS, CB-OPT-GB@2]", ":5: key 'strategies.1'"),
    ("{name: crimes, rows: 1000}", "{name: crimez}", ":4: key 'datasets.0.name'"),
    ("HAVING count(*) > {c}", "HAVING count(*) > {d}", ":9: key 'templates.a.sql'"),
    ("{uniform: [1, 5], integer: true}", "{uniform: [5, 1]}", ":11: key 'templates.a.params.c.uniform'"),
    ("every: 4", "every: 0", ":18: key 'updates.0.every'"),
    ("queries: 12", "queries: twelve", ":6: key 'queries'"),
    ("    weight: 3", "    weight: -1", ":13: key 'templates.b.weight'"),
    ("name: w", "name: 'a b'", ":1: key 'name'"),
])
def test_schema_errors_name_line_and_key(tmp_path, old, new, where):
    assert old in GOOD
    p = _write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(BadInput) as e:
        load_workload(p)
    assert str(p) + where in str(e.value), str(e.value)


def test_bad_yaml_and_missing_file(tmp_path):
    with pytest.raises(BadInput, match=r"w.yaml:4: not valid YAML"):
        load_workload(_write(tmp_path, "name: w\nseed: 1\nx: {a: 1\n"))
    with pytest.raises(BadInput, match="cannot read workload file"):
        load_workload(tmp_path / "missing.yaml")


def test_cli_rejects_a_bad_workload_with_exit_2(tmp_path, capsys):
    from advisor.cli.main import main

    p = _write(tmp_path, GOOD.replace("policy", "x").replace("seed: 1", "seed: 1\npolicy: sometimes"))
    with pytest.raises(SystemExit) as e:
        main(["--warehouse", str(tmp_path / "wh"), "replay", str(p)])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ":3: key 'policy'" in err[0]
    assert not (tmp_path / "wh" / "runs").exists()  # nothing started


def test_literals():
    import datetime as dt

    assert literal(3) == "3" and literal(2.5) == "2.5" and literal("O'Hare") == "'O\\'Hare'"
    assert literal(dt.date(1995, 3, 15)) == "DATE '1995-03-15'" and literal(True) == "TRUE"


def test_a_random_strategy_may_be_listed_as_several_draws(tmp_path):
    wl = load_workload(_write(tmp_path, GOOD.replace("[NO-PS, CB-OPT-GB]", "[NO-PS, rand-gb, RAND-GB@2, RAND-GB@3]")))
    assert wl.strategies == ["NO-PS", "RAND-GB", "RAND-GB@2", "RAND-GB@3"]
    with pytest.raises(BadInput, match="listed twice"):
        load_workload(_write(tmp_path, GOOD.replace("[NO-PS, CB-OPT-GB]", "[NO-PS, RAND-GB@2, rand-gb@2]")))


def test_a_prepared_run_serves_a_file_that_changes_only_its_settings(tmp_path):
    """``plan_sha256`` covers what ``replay.prepare`` builds (data, layouts, steps, batches); another
    strategy list, policy or warm-up reuses the prepared directory, other steps do not, and a
    partial log of the other file is never resumed under this one."""
    import json

    from workloads.replay.runner import prepare

    base = load_workload(_write(tmp_path, GOOD))
    (tmp_path / "v2").mkdir()
    settings = load_workload(_write(tmp_path / "v2", GOOD.replace("strategies: [NO-PS, CB-OPT-GB]",
                                                                 "strategies: [NO-PS, OPT]\nwarmup: 3\npolicy: eager")))
    (tmp_path / "v3").mkdir()
    steps = load_workload(_write(tmp_path / "v3", GOOD.replace("queries: 12", "queries: 13")))
    assert settings.sha256 != base.sha256 and settings.plan_sha256 == base.plan_sha256
    assert steps.plan_sha256 != base.plan_sha256

    def no_spark(_):
        raise AssertionError("a prepared directory must not be prepared again")

    run = tmp_path / "run"
    run.mkdir()
    (run / "plan.json").write_text(json.dumps({"sha256": base.sha256, "plan_sha256": base.plan_sha256,
                                               "steps": [{"step": 0}]}))
    with pytest.raises(BadInput, match="different workload file"):
        prepare(no_spark, steps, run, print)
    (run / "log.jsonl").write_text('{"type": "query"}\n')
    with pytest.raises(BadInput, match="partial replay of another version"):
        prepare(no_spark, settings, run, print)
    (run / "log.jsonl").unlink()
    assert prepare(no_spark, settings, run, print)["steps"] == [{"step": 0}]
    assert json.loads((run / "plan.json").read_text())["sha256"] == settings.sha256  # now this file's


def test_replay_generates_only_the_tpch_tables_it_reads(tmp_path):
    from workloads.replay.runner import _tables_needed

    assert _tables_needed(load_workload(ROOT / "workloads" / "demo.yaml"), "tpch") == ["lineitem"]
    text = GOOD.replace("{name: crimes, rows: 1000}", "{name: tpch, sf: 0.01}").replace("crimes", "orders")
    text = text.replace("FROM orders GROUP BY ward", "FROM customer JOIN nation ON c_nationkey = n_nationkey "
                        "GROUP BY ward") + "layouts: [part.p_size]\n"
    assert _tables_needed(load_workload(_write(tmp_path, text)), "tpch") == ["customer", "nation", "orders", "part"]
    assert _tables_needed(load_workload(_write(tmp_path, GOOD)), "crimes") is None


def test_rounds_replay_a_sequence_that_many_times(tmp_path):
    head = GOOD.split("queries:")[0] + ("templates:\n  a:\n    sql: SELECT beat, count(*) AS n FROM crimes GROUP BY beat\n"
                                        "  b:\n    sql: SELECT ward, count(*) AS n FROM crimes GROUP BY ward\n")
    seq = "sequence:\n  - {query: a}\n  - {update: {table: crimes, inserts: 5, deletes: 1}}\n  - {query: b}\n"
    order = plan_order(load_workload(_write(tmp_path, head + "rounds: 3\n" + seq)))
    assert [s.get("template", s["kind"]) for s in order] == ["a", "update", "b"] * 3
    assert len(plan_order(load_workload(_write(tmp_path, head + seq)))) == 3
    for bad, needle in (("rounds: 0\n" + seq, "must be >= 1"), ("rounds: 2\nqueries: 4\n", "repeats a 'sequence'")):
        with pytest.raises(BadInput, match=needle):
            load_workload(_write(tmp_path, head + bad))
