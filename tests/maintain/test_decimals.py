"""Exact DECIMAL sums and averages in maintenance (``advisor.maintain.decimals``): the values equal
Spark's, and a maintained HAVING over them equals its recapture where float sums would not (three
rows of 0.10 average 0.10000000000000002 in floats, exactly 0.1 in Spark)."""

from __future__ import annotations

import decimal
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.sketch.capture import capture, capture_batch
from advisor.warehouse.catalog import Catalog
from advisor.maintain.decimals import decimal_type, spark_avg, spark_sum, spark_sums, unscaled
from advisor.maintain.spark.service import maintain_sketch
from advisor.partition.range_partition import build_partition
from advisor.plan.parse import parse_sql
from advisor.warehouse.sketch_records import load_sketch
from advisor.warehouse.store import Store

from maintain_helpers import E

D = decimal.Decimal
TYPES = {"p": "decimal(15,2)", "q": "decimal(15,2)", "n": "bigint", "x": "double"}


def test_decimal_type_of_exact_expressions_only():
    assert decimal_type(E("p"), TYPES) == (15, 2)
    assert decimal_type(E("-(p)"), TYPES) == (15, 2)
    assert decimal_type(E("p + q"), TYPES) == (16, 2)
    assert decimal_type(E("p * 0.5"), TYPES) == (17, 3)
    assert decimal_type(E("x"), TYPES) is None          # doubles keep float sums
    assert decimal_type(E("p / 2"), TYPES) is None      # division is not exact
    assert decimal_type(E("n + 1"), TYPES) is None      # integers are exact already
    assert decimal_type(E("p * x"), TYPES) is None


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(u=st.integers(-(10 ** 14), 10 ** 14), scale=st.integers(0, 6))
def test_unscaled_recovers_the_decimal_behind_a_float(u, scale):
    f = float(D(u).scaleb(-scale))   # what the engine holds for the DECIMAL value u * 10^-scale
    assert unscaled([f, None], scale) == [u, None]


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(us=st.lists(st.one_of(st.integers(-(2 ** 53) + 1, 2 ** 53 - 1), st.integers(-(10 ** 30), 10 ** 30)),
                   min_size=0, max_size=40),
       scale=st.integers(0, 25))
def test_sums_at_once_equal_the_decimal_quotient_one_by_one(us, scale):
    """The vectorised SUM (exact doubles, one division) is bit for bit the correctly rounded
    quotient, which is also what ``float(Decimal)`` gives; past 2^53 or scale 22 it falls back."""
    import numpy as np

    got = spark_sums(np.array(us, dtype=object), scale).tolist()
    want = [float(D(u).scaleb(-scale)) for u in us]
    assert [x.hex() for x in got] == [x.hex() for x in want]
    assert [x.hex() for x in got] == [spark_sum(u, scale).hex() for u in us]


def _groups(seed: int) -> dict[int, list]:
    rnd = random.Random(seed)
    g = {0: [D("0.10")] * 3,                               # avg exactly 0.1, float sum 0.30000000000000004
         1: [D("0.01")] * 31 + [D("0.02")],                # avg 0.0103125: a tie at scale 6, HALF_UP
         2: [D("-0.01")] * 31 + [D("-0.02")],              # the same below zero: away from zero
         3: [D("99999999999.99")] * 7}                     # large magnitudes
    for k in range(4, 60):
        g[k] = [D(rnd.randint(-100_000, 100_000)).scaleb(-2) for _ in range(rnd.randint(1, 40))]
    return g


def test_sum_and_avg_equal_sparks(spark):
    """Against Spark itself: the exact sums of the generated values (Python's Decimal), turned into
    Spark's SUM/AVG values by ``spark_sum``/``spark_avg``, equal what Spark returns."""
    from pyspark.sql import types as T

    groups = _groups(3)
    rows = [(k, v, D("0.05") * (i % 3)) for k, vs in groups.items() for i, v in enumerate(vs)]
    schema = T.StructType([T.StructField("g", T.LongType()), T.StructField("p", T.DecimalType(15, 2)),
                           T.StructField("q", T.DecimalType(15, 2))])
    spark.createDataFrame(rows, schema).createOrReplaceTempView("dec_t")
    got = {r["g"]: r for r in spark.sql(
        "SELECT g, sum(p) AS s, avg(p) AS a, sum(p * (1 - q)) AS se, avg(p * (1 - q)) AS ae, count(p) AS n "
        "FROM dec_t GROUP BY g").collect()}
    ep, es = decimal_type(E("p * (1 - q)"), TYPES)
    assert spark.sql("SELECT p * (1 - q) AS e FROM dec_t").schema["e"].dataType == T.DecimalType(ep, es)
    for k, vs in groups.items():
        u = int(sum(vs).scaleb(2))
        assert spark_sum(u, 2) == float(got[k]["s"]), k
        assert spark_avg(u, len(vs), 15, 2) == float(got[k]["a"]), (k, got[k]["a"])
        ue = int(sum(v * (1 - D("0.05") * (i % 3)) for i, v in enumerate(vs)).scaleb(es))
        assert spark_sum(ue, es) == float(got[k]["se"]), k
        assert spark_avg(ue, len(vs), ep, es) == float(got[k]["ae"]), (k, got[k]["ae"])
    assert float(got[0]["a"]) == 0.1 and float(got[1]["a"]) == 0.010313 and float(got[2]["a"]) == -0.010313


QUERIES = [  # sketched on g; the batch adds a group sitting exactly on each threshold
    "SELECT g, avg(p) AS a FROM dt GROUP BY g HAVING avg(p) > 0.1",
    "SELECT g, sum(p) AS a FROM dt GROUP BY g HAVING sum(p) > 0.3",
    "SELECT g, avg(p) AS a, max(p) AS m FROM dt GROUP BY g HAVING avg(p) > 0.1",  # the multiset operator
]


@pytest.fixture(scope="module")
def dcat(spark, tmp_path_factory):
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField("g", T.LongType()), T.StructField("p", T.DecimalType(15, 2))])
    rnd = random.Random(5)
    rows = [(g, D(rnd.randint(0, 9)).scaleb(-2)) for g in range(20) for _ in range(4)]
    c = Catalog(spark, Store(tmp_path_factory.mktemp("decwh")))
    c.create_table("dt", spark.createDataFrame(rows, schema))
    c.part = build_partition(c, "dt", "g", 40)
    c.schema_t = schema
    return c


@pytest.mark.parametrize("sql", QUERIES)
def test_maintained_decimal_having_equals_recapture(dcat, spark, sql):
    q = parse_sql(sql, lambda t: dcat.schema(t))
    parts = {"dt": dcat.part}
    sk = capture(dcat, q, {"dt": "g"}, 40, check=False, partitions=parts).sketch
    assert sk.parts[0].fragments == frozenset()
    new_g = 100 + QUERIES.index(sql)
    ins = spark.createDataFrame([(new_g, D("0.10"))] * 3, dcat.schema_t)
    dcat.apply_frames("dt", ins, None)
    res = maintain_sketch(dcat, sk.id)
    assert res.how == "incremental"
    v = dcat.current_version("dt")
    (fresh,), _ = capture_batch(dcat, [(q, {"dt": "g"}, parts)], {"dt": v})
    assert load_sketch(dcat.store, res.new_id).parts[0].fragments == fresh.parts[0].fragments == frozenset()
