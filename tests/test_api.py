"""The Python API inside a SparkSession the caller built: same answers and decisions as the CLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from advisor import Advisor
from advisor.cli.main import main
from advisor.errors import BadInput

SQL = "SELECT g, sum(v) AS s FROM t GROUP BY g HAVING sum(v) > 6000"


def frame(spark):
    rng = np.random.default_rng(11)
    g = rng.permutation(np.repeat(np.arange(100), 100))
    return spark.createDataFrame(pd.DataFrame({"g": g, "v": np.where(g < 10, 50, 1) * rng.integers(1, 3, g.size)}))


def test_the_api_decides_and_answers_as_the_cli(spark, tmp_path, capsys):
    adv = Advisor(spark, warehouse=tmp_path / "api", uses=80)
    assert adv.add_table("t", frame(spark)) == 10_000
    first = adv.sql(SQL)
    api = [adv.last_decision["decision"]["action"]]
    rows1 = sorted(tuple(r) for r in first.collect())
    second = adv.sql(SQL)
    api.append(adv.last_decision["decision"]["action"])
    rows2 = sorted(tuple(r) for r in second.collect())
    assert "Filter" in second._jdf.queryExecution().optimizedPlan().toString()  # the sketch's filter
    assert adv.explain_decision().startswith("used sketch")
    served = adv.run(SQL)
    assert served.record["decision"]["action"] == "reuse" and served.result.metrics.rows_read < 10_000

    Advisor(spark, warehouse=tmp_path / "cli").add_table("t", frame(spark))
    cli = []
    for _ in range(2):
        with pytest.raises(SystemExit):
            main(["--warehouse", str(tmp_path / "cli"), "run", SQL, "--uses", "80", "--json"])
        doc = json.loads(capsys.readouterr().out)
        cli.append((doc["decision"]["decision"]["action"], sorted(map(tuple, doc["rows"]))))
    assert api == [a for a, _ in cli] == ["capture", "reuse"]
    assert rows1 == rows2 == cli[0][1] == cli[1][1] and len(rows1) == 10
    assert served.record["result"]["digest"] == adv.run(SQL, advise=False).record["result"]["digest"]


def test_the_api_refuses_a_session_outside_utc(spark, tmp_path):
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        with pytest.raises(BadInput, match="timeZone"):
            Advisor(spark, warehouse=tmp_path)
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")


def test_the_session_conf_is_what_the_advisor_builds_with():
    conf = Advisor.session_conf()
    assert conf["spark.sql.session.timeZone"] == "UTC" and "spark.ui.enabled" not in conf
    assert conf["spark.hadoop.parquet.filter.dictionary.enabled"] == "false"
