"""Seed 001's running example on Spark (digest §1.6): results and verdicts, including what goes
wrong when the unsafe popden sketch is forced onto the avg query."""

import pandas as pd
import pytest

from advisor.sketch.capture import capture, check_safe
from advisor.warehouse.catalog import Catalog
from advisor.errors import BadInput
from advisor.sketch.run import run_query
from advisor.partition.range_partition import build_partition
from advisor.plan.parse import parse_sql
from advisor.warehouse.store import Store

CITIES = pd.DataFrame({
    "popden": [4200, 6000, 5000, 7000, 2000, 3700, 2500],
    "city": ["Anchorage", "San Diego", "Sacramento", "New York", "Buffalo", "Austin", "Houston"],
    "state": ["AK", "CA", "CA", "NY", "NY", "TX", "TX"],
})
Q2 = "SELECT state, avg(popden) AS avgden FROM cities GROUP BY state ORDER BY avgden DESC LIMIT 1"
QTOTAL = "SELECT state, sum(popden) AS sd FROM cities GROUP BY state ORDER BY sd DESC LIMIT 1"


@pytest.fixture(scope="module")
def cat(spark, tmp_path_factory):
    c = Catalog(spark, Store(tmp_path_factory.mktemp("cities")))
    c.create_table("cities", spark.createDataFrame(CITIES))
    c.parts = {"state": build_partition(c, "cities", "state", 4), "popden": build_partition(c, "cities", "popden", 2)}
    return c


def q(cat, sql):
    return parse_sql(sql, lambda t: cat.schema(t))


def test_q2_state_sketch_is_safe_and_exact(cat):
    query = q(cat, Q2)
    assert run_query(cat, query).rows == [("CA", 5500.0)]
    res = capture(cat, query, {"cities": "state"}, 4, partitions={"cities": cat.parts["state"]})
    frags = res.sketch.parts[0].fragments
    part = cat.parts["state"]
    assert [part.range_of(f)[0] for f in frags] == ["CA"]  # only CA's range: t2, t3
    assert run_query(cat, query, sketch=res.sketch, use_layout=False).rows == [("CA", 5500.0)]


def test_popden_unsafe_for_avg_and_forcing_it_is_wrong(cat):
    query = q(cat, Q2)
    v = check_safe(cat, query, {"cities": "popden"}, {"cities": 1})
    assert not v.safe and "avg" in v.reason
    with pytest.raises(BadInput, match="cannot sketch"):
        capture(cat, query, {"cities": "popden"}, 2, partitions={"cities": cat.parts["popden"]})
    forced = capture(cat, query, {"cities": "popden"}, 2, check=False, partitions={"cities": cat.parts["popden"]})
    # the accurate sketch {g2} (popden >= 4200) gives New York, exactly the paper's counterexample
    assert run_query(cat, query, sketch=forced.sketch, use_layout=False).rows == [("NY", 7000.0)]


@pytest.mark.parametrize("agg,expected", [("sum", ("CA", 11000)), ("count", ("CA", 2))])
def test_popden_safe_for_sum_and_count(cat, agg, expected):
    sql = QTOTAL.replace("sum(popden)", f"{agg}(popden)")
    query = q(cat, sql)
    assert check_safe(cat, query, {"cities": "popden"}, {"cities": 1}).safe
    res = capture(cat, query, {"cities": "popden"}, 2, partitions={"cities": cat.parts["popden"]})
    plain = run_query(cat, query).rows
    assert plain[0] == expected  # count ties (CA, NY, TX have 2) break by state ascending: CA
    assert run_query(cat, query, sketch=res.sketch, use_layout=False).rows == plain
