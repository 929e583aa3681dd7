"""Shared fixtures: one SparkSession for the whole run (local[2], UI off, few shuffle partitions)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from advisor.engine.session import build_session

    s = build_session("local[2]", {"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "2g"},
                      app_name="advisor-tests")
    yield s
    s.stop()
