"""Shared fixtures: one SparkSession for the whole run (local[2], UI off, few shuffle partitions).
Hypothesis runs without its per-example deadline: tests never assert on time, and a loaded 2-core
machine makes any deadline a coin toss."""

from __future__ import annotations

import pytest
from hypothesis import settings

settings.register_profile("advisor", deadline=None)
settings.load_profile("advisor")


@pytest.fixture(scope="session")
def spark():
    from advisor.engine.session import build_session

    # Delta Lake rebuilds a table's snapshot in 50 tasks unless told otherwise; test tables are tiny
    s = build_session("local[2]", {"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "2g",
                                   "spark.databricks.delta.snapshotPartitions": "2"},
                      app_name="advisor-tests")
    yield s
    s.stop()
