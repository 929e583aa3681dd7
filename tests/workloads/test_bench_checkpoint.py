"""The advice harness's checkpoint: an interrupted run resumes from its log, never from another config's."""

from __future__ import annotations

import numpy as np

from workloads.bench.advice_accuracy import Checkpoint
from workloads.bench.advice_templates import GenQuery


def test_checkpoint_resumes_queries_and_records(tmp_path):
    path = tmp_path / "run.json.partial.jsonl"
    cfg = {"sf": 1.0, "queries_per_dataset": 2, "thetas": [0.05]}
    gen = [GenQuery("tpch", "Q-AGH", "SELECT 1", 0.7, 12), GenQuery("tpch", "Q-TOPK", "SELECT 2", 0.9, 40)]
    a = Checkpoint(path, cfg)
    assert a.queries("tpch") is None and a.record("tpch", 0, "SELECT 1") is None
    a.save_queries("tpch", gen)
    a.save_record("tpch", 0, "SELECT 1", {"rows": np.int64(6_000_000), "theta": {"0.05": {"est_s": 0.25}}})

    b = Checkpoint(path, cfg)
    assert b.queries("tpch") == gen
    rec = b.record("tpch", 0, "SELECT 1")
    assert rec == {"rows": 6_000_000, "theta": {"0.05": {"est_s": 0.25}}} and isinstance(rec["rows"], int)
    assert b.record("tpch", 1, "SELECT 2") is None          # not finished: run again
    assert b.record("tpch", 0, "SELECT other") is None      # same index, other query: not reused


def test_checkpoint_of_another_config_is_set_aside(tmp_path):
    path = tmp_path / "run.json.partial.jsonl"
    a = Checkpoint(path, {"sf": 0.1})
    a.save_record("tpch", 0, "SELECT 1", {"x": 1})
    b = Checkpoint(path, {"sf": 1.0})
    assert b.record("tpch", 0, "SELECT 1") is None
    assert len(list(tmp_path.glob("run.json.partial.stale*"))) == 1
    assert path.read_text().splitlines() == ['{"config": {"sf": 1.0}}']
