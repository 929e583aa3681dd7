"""A warehouse on an S3-compatible server (moto's server mode on 127.0.0.1) through ``s3a://``
with hadoop-aws 3.5.0 and its AWS SDK bundle: the crimes table loaded, a sketch captured and used,
three batches applied and the sketch maintained; sketched answers equal plain ones, the maintained
sketch equals a recapture, and every file the store names is an object below the warehouse URI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from storage_helpers import S3_BUCKET, s3a_conf

pytestmark = pytest.mark.storage
ROOT = Path(__file__).resolve().parents[2]


def test_a_warehouse_on_s3_answers_and_maintains_like_plain(s3, tmp_path):
    wh = f"s3a://{S3_BUCKET}/warehouses/crimes"
    env = dict(os.environ, ADVISOR_STORE_DIR=str(tmp_path / "store"),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, str(Path(__file__).with_name("s3_flow.py")), wh,
                          json.dumps(s3a_conf(s3)), str(tmp_path)],
                         capture_output=True, text=True, env=env, timeout=1500)
    assert out.returncode == 0, out.stderr[-4000:]
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc["base"].startswith(wh + "/tables/crimes/v000001_base")
    assert doc["first_equal"] and doc["equal"] and doc["rows"] > 0
    assert doc["maintained"] and doc["equal_to_recapture"]
    assert doc["count"] == doc["arrow_rows"] == 3000 + 3 * 24
    assert doc["paths"] >= 7 and doc["relative"] and doc["on_s3"]
