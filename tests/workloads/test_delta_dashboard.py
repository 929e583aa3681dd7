"""The Delta dashboard benchmark's setup (`advisor bench dashboard`) at a tiny scale: TPC-H lineitem
and orders written as Delta tables in the generator's order, the other writer's commits recorded,
the dashboard workload replayed through them (fewer instances, the same templates); every answer
of CB-OPT-GB equals NO-PS's and plain Spark's at the versions the replay had reached, and one
commit of each table is met between every two segments."""

from __future__ import annotations

import json

from workloads.bench import delta_dashboard as dash
from workloads.data.tpch import generate_tpch
from workloads.replay.workload_file import load_workload


def test_the_workload_interleaves_a_commit_of_each_table_after_every_segment(tmp_path):
    from workloads.replay.step_list import plan_order

    for t in dash.TABLES:  # the benchmark copies the file beside its tables
        (tmp_path / t).mkdir()
        (tmp_path / t / "part-0.parquet").write_bytes(b"")
    (tmp_path / "w.yaml").write_text(dash.WORKLOAD.read_text())
    wl = load_workload(tmp_path / "w.yaml")
    assert len(wl.templates) >= 4
    order = plan_order(wl, {0: 3, 1: 3})
    queries = [s for s in order if s["kind"] == "query"]
    assert len(queries) == 15 * len(wl.templates)
    assert all(sum(q["template"] == t for q in queries) == 15 for t in wl.templates)
    after = [(sum(1 for p in order[:i] if p["kind"] == "query"), s["table"])
             for i, s in enumerate(order) if s["kind"] == "update"]
    assert after == [(n, t) for n in (15, 30, 45) for t in ("lineitem", "orders")]
    assert not wl.layouts and wl.method == "bootstrap" and wl.fragments is None


def test_the_dashboard_at_a_tiny_scale_answers_as_plain_spark(spark, tmp_path):
    from advisor.context import Context
    from advisor.warehouse import delta_source
    from workloads.replay.runner import replay

    base = tmp_path / "tables"
    files = generate_tpch(0.01, str(tmp_path / "gen"), list(dash.TABLES))
    versions = dash.write_with(spark, {"parquet": files, "dest": str(base), "commits": dash.commits()})
    assert versions == {"lineitem": 3, "orders": 3}
    # four instances of each template, four segments of 4 queries
    text = dash.WORKLOAD.read_text().replace("rounds: 15", "rounds: 4").replace("every: 15", "every: 4")
    wl = base / "dashboard.yaml"
    wl.write_text(text.replace("measure_recapture: true", "measure_recapture: true\nmeasured_costs: false"))
    run = replay(Context(tmp_path / "wh", spark=spark), str(wl), out=str(tmp_path / "run"))
    doc = json.loads((run / "run.json").read_text())
    doc["initial_versions"] = json.loads((run / "plan.json").read_text())["initial_versions"]
    assert doc["initial_versions"] == {"lineitem": 0, "orders": 0}
    assert delta_source.latest_version(str(base / "lineitem")) == 3  # the replay wrote nothing to the tables
    res = dash.summary(doc, dash.bare_spark(spark, base, doc), {"sf": 0.01, "versions": versions})
    assert res["queries"] == 16 and res["segments"] == 4
    assert [(c["after_query"], c["table"], c["version"]) for c in res["commits_met"]] == [
        (n, t, v) for n, v in ((4, 1), (8, 2), (12, 3)) for t in ("lineitem", "orders")]
    assert res["answers_equal"] == 16 and res["answers_equal_bare_spark"] == 16, res["templates"]
    assert res["maintained_equal_to_recapture"]
