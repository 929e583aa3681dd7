"""A layout clustered on a column of any type the partitions support (integer, decimal, double,
date, timestamp, string) lets a selective sketch on that column skip: the predicted read fraction
admits the sketch, and the scan Spark runs reads about the predicted rows (measured), with the
same answer as the plain run."""

from __future__ import annotations

import datetime as dt
import decimal

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from advisor.context import Context
from advisor.engine.execute import versions_now
from advisor.layout.clustered_copy import build_layout
from advisor.plan.parse import parse_sql
from advisor.sketch.capture import capture
from advisor.sketch.lookup import read_fraction, usable_sketches
from advisor.sketch.run import run_query

VALUES, PER_VALUE, PASSING = 500, 40, 10   # 20,000 rows; the first 10 values pass: 2 % of the rows
ROWS = VALUES * PER_VALUE
START = dt.datetime(2013, 1, 1)
TYPED = {
    "i": lambda h: int(h) * 7 - 1000,
    "d": lambda h: decimal.Decimal(int(h) * 25 - 3000).scaleb(-2),
    "f": lambda h: float(h) * 0.5 - 17.25,
    "dt": lambda h: (START + dt.timedelta(days=int(h))).date(),
    "ts": lambda h: START + dt.timedelta(hours=int(h)),
    "s": lambda h: f"k{int(h):04d}",
}
CASTS = {"d": "decimal(12,2)"}


@pytest.fixture(scope="module")
def typed(spark, tmp_path_factory):
    rng = np.random.default_rng(11)
    hour = rng.permutation(np.repeat(np.arange(VALUES), PER_VALUE))
    pdf = pd.DataFrame({c: [f(h) for h in hour] for c, f in TYPED.items()})
    pdf["v"] = np.where(hour < PASSING, 50, 1)
    df = spark.createDataFrame(pdf)
    for c, t in CASTS.items():
        df = df.withColumn(c, F.col(c).cast(t))
    ctx = Context(tmp_path_factory.mktemp("typed") / "wh", spark=spark)
    ctx.catalog.create_table("t", df)
    return ctx


@pytest.mark.parametrize("col", list(TYPED))
def test_a_selective_sketch_skips_on_its_own_layout(typed, col):
    ctx = typed
    cat = ctx.catalog
    build_layout(cat, "t", col)
    q = parse_sql(f"SELECT {col}, sum(v) AS s FROM t GROUP BY {col} HAVING sum(v) > 1000", ctx.schema_lookup())
    sk = capture(cat, q, {"t": col}, 100).sketch
    versions = versions_now(cat, q)
    predicted = read_fraction(cat, sk, versions)
    assert predicted <= 0.15, f"{col}: predicted read {predicted:.1%}"
    good, bad = usable_sketches(cat, q, versions)
    assert sk.id in [s.id for s in good], bad
    sketched, plain = run_query(cat, q, versions, sk), run_query(cat, q, versions)
    assert sorted(sketched.rows) == sorted(plain.rows) and len(plain.rows) == PASSING
    measured = sketched.metrics.rows_read / plain.metrics.rows_read
    assert plain.metrics.rows_read == ROWS and measured <= 0.15, f"{col}: measured read {measured:.1%}"
    assert abs(measured - predicted) <= 0.10, f"{col}: predicted {predicted:.1%}, measured {measured:.1%}"
