"""The job-cost probe on a real Spark session: logged in the store, cleaned up, used by calibrate."""

from __future__ import annotations

import json

import pytest

from advisor.calibration.measured_costs import calibrate
from advisor.cli.main import main
from advisor.context import Context
from advisor.calibration.probe import PROBE_ROWS, PROBE_RUNS, latest_probe, record_probe


def test_the_probe_is_logged_and_leaves_no_files(spark, tmp_path):
    ctx = Context(tmp_path / "wh", spark=spark)
    assert latest_probe(ctx.store) is None
    rec = record_probe(ctx)
    assert latest_probe(ctx.store) == json.loads(json.dumps(rec))
    assert rec["rows_read"] == PROBE_ROWS and len(rec["runs"]) == PROBE_RUNS
    assert min(rec["runs"][2:]) <= rec["seconds"] <= max(rec["runs"][2:])
    assert not list((tmp_path / "wh" / "_probe").iterdir())
    assert calibrate(ctx.store).fixed_s == pytest.approx(rec["seconds"])


def test_advisor_calibrate_prints_the_fixed_cost_as_json(spark, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["--warehouse", str(tmp_path / "wh"), "calibrate", "--json"])
    assert e.value.code == 0
    info = json.loads(capsys.readouterr().out)
    assert info["fixed_s"] == pytest.approx(info["probe"]["seconds"]) and "probe" in info["source"]
