"""The reuse a template's bindings allow (``advisor.selection.binding_reuse``): the reuse test on
logged instances, and the expected reuses of a capture that the remembered go is held to (a real
SQLite store, no Spark)."""

from __future__ import annotations

from advisor.selection.binding_reuse import BindingReuse, binding_reuse, logged_instances
from advisor.warehouse.store import Store

SCHEMA = {"t": [("g", "int"), ("v", "int"), ("d", "date")]}.get


def _topk(d: str, k: int = 5) -> str:
    return f"SELECT g, sum(v) AS s FROM t WHERE d > DATE '{d}' GROUP BY g ORDER BY s DESC LIMIT {k}"


def test_a_moving_date_under_a_top_k_is_never_served():
    sqls = [_topk(f"2024-01-0{i}") for i in range(1, 6)]
    br = binding_reuse(sqls, SCHEMA)
    assert br == BindingReuse(0, 4) and br.expected_reuses(3.0) < 1.0


def test_a_repeated_binding_and_a_smaller_k_are_served():
    sqls = [_topk("2024-01-01", 10), _topk("2024-01-02"), _topk("2024-01-01", 5), _topk("2024-01-02")]
    assert binding_reuse(sqls, SCHEMA) == BindingReuse(2, 3)  # k 5 <= 10 on the same date; the same instance


def test_having_thresholds_served_only_when_they_rise():
    having = "SELECT g, sum(v) AS s FROM t GROUP BY g HAVING sum(v) > {}"
    assert binding_reuse([having.format(c) for c in (30, 20, 10)], SCHEMA) == BindingReuse(0, 2)
    assert binding_reuse([having.format(c) for c in (10, 30, 20)], SCHEMA) == BindingReuse(2, 2)


def test_expected_reuses_follow_the_prior_until_evidence_arrives():
    assert BindingReuse(0, 0).expected_reuses(4.0) == 4.0
    assert BindingReuse(3, 3).expected_reuses(4.0) == 4.0
    assert BindingReuse(0, 1).expected_reuses(4.0) == 2.0
    assert BindingReuse(1, 3).expected_reuses(4.0) == 2.0


def test_logged_instances_are_the_templates_latest_runs_oldest_first(tmp_path):
    store = Store(tmp_path)
    for i in range(12):
        store.log_run("run", _topk(f"2024-02-{i + 1:02d}"), {"template": "tk"})
        store.log_run("run", "SELECT 1", {"template": "other"})
    store.log_run("recommend", _topk("2024-03-01"), {"template": "tk"})
    got = logged_instances(store, "tk", limit=3)
    assert got == [_topk("2024-02-10"), _topk("2024-02-11"), _topk("2024-02-12")]
