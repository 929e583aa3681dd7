"""Dataset generators (no Spark): crimes determinism and nesting, flights shape and types, TPC-H output."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from advisor.errors import BadInput
from workloads.data.crimes import CRIME_TYPES, generate_crimes
from workloads.data.flights import flights_tables
from workloads.data.tpch import TABLES, generate_tpch

CRIME_ROWS = 50_000


@pytest.fixture(scope="module")
def crimes() -> pa.Table:
    return generate_crimes(CRIME_ROWS, 42)


@pytest.fixture(scope="module")
def flights() -> dict[str, pa.Table]:
    return flights_tables()


def _functional(table: pa.Table, key: str, value: str) -> bool:
    """True when every `key` value maps to exactly one `value` value."""
    pairs = table.group_by([key, value]).aggregate([])
    return pairs.num_rows == len(pc.unique(table[key]))


# --- crimes -------------------------------------------------------------------------------------

def test_crimes_deterministic_per_seed(crimes):
    assert generate_crimes(CRIME_ROWS, 42).equals(crimes)
    other = generate_crimes(CRIME_ROWS, 43)
    assert other.num_rows == CRIME_ROWS
    assert not other.equals(crimes)
    assert not other["block"].equals(crimes["block"])


def test_crimes_schema_and_row_count(crimes):
    assert crimes.num_rows == CRIME_ROWS
    expected = {
        "id": pa.int64(), "date": pa.timestamp("us", tz="UTC"), "year": pa.int32(), "month": pa.int32(),
        "district": pa.int32(), "ward": pa.int32(), "beat": pa.int32(), "community_area": pa.int32(),
        "block": pa.string(), "primary_type": pa.string(), "arrest": pa.bool_(),
        "latitude": pa.float64(), "longitude": pa.float64(),
    }
    assert {f.name: f.type for f in crimes.schema} == expected
    assert list(crimes.column_names) == list(expected)
    assert all(crimes[c].null_count == 0 for c in crimes.column_names)
    assert crimes["id"].to_numpy().tolist() == list(range(1, CRIME_ROWS + 1))


def test_crimes_geography_nests(crimes):
    assert _functional(crimes, "block", "beat")
    assert _functional(crimes, "beat", "district")
    assert _functional(crimes, "community_area", "district")
    assert _functional(crimes, "block", "community_area")
    # wards: a small set per community area
    wards = crimes.group_by("community_area").aggregate([("ward", "count_distinct")])
    assert max(wards["ward_count_distinct"].to_pylist()) <= 3
    # beats are district*100 + two digits
    beat, district = crimes["beat"].to_numpy(), crimes["district"].to_numpy()
    assert np.all(beat // 100 == district)


def test_crimes_value_ranges(crimes):
    def rng(col):
        mm = pc.min_max(crimes[col])
        return mm["min"].as_py(), mm["max"].as_py()

    assert 1 <= rng("district")[0] and rng("district")[1] <= 25
    assert 1 <= rng("ward")[0] and rng("ward")[1] <= 50
    assert 1 <= rng("community_area")[0] and rng("community_area")[1] <= 77
    assert 100 <= rng("beat")[0] and rng("beat")[1] <= 2599
    assert 41.6 <= rng("latitude")[0] and rng("latitude")[1] <= 42.05
    assert -87.95 <= rng("longitude")[0] and rng("longitude")[1] <= -87.52
    assert 2001 <= rng("year")[0] and rng("year")[1] <= 2023
    assert 1 <= rng("month")[0] and rng("month")[1] <= 12
    lo, hi = rng("date")
    assert lo.year >= 2001 and hi.year <= 2023
    assert pc.all(pc.equal(pc.year(crimes["date"]), pc.cast(crimes["year"], pa.int64()))).as_py()
    assert pc.all(pc.equal(pc.month(crimes["date"]), pc.cast(crimes["month"], pa.int64()))).as_py()
    micros = crimes["date"].cast(pa.timestamp("us")).cast(pa.int64()).to_numpy()
    assert np.all(np.diff(micros) >= 0)  # ids follow time order
    assert len(pc.unique(crimes["community_area"])) == 77
    assert len(pc.unique(crimes["district"])) == 25
    blocks = crimes["block"].to_pylist()[:200]
    assert all(b[3:5] == "XX" and b[:3].isdigit() and b[6] in "NSEW" for b in blocks)


def test_crimes_distributions_are_skewed(crimes):
    counts = crimes["primary_type"].value_counts().to_pylist()
    top = sorted(counts, key=lambda r: -r["counts"])
    assert top[0]["values"] == "THEFT"
    assert {r["values"] for r in top} <= {name for name, _, _ in CRIME_TYPES}
    assert top[0]["counts"] > 10 * top[15]["counts"]
    years = dict(zip(*np.unique(crimes["year"].to_numpy(), return_counts=True)))
    assert years[2002] > 1.5 * years[2021]
    months = dict(zip(*np.unique(crimes["month"].to_numpy(), return_counts=True)))
    assert months[7] > 1.2 * months[2]
    arrest = {(r["primary_type"]): r["arrest_mean"] for r in crimes.select(["primary_type", "arrest"])
              .cast(pa.schema([("primary_type", pa.string()), ("arrest", pa.float64())]))
              .group_by("primary_type").aggregate([("arrest", "mean")]).to_pylist()}
    assert arrest["NARCOTICS"] > 0.9 > 0.2 > arrest["THEFT"]


@pytest.mark.parametrize("rows, seed", [(0, 1), (-5, 1), (10, -1), (True, 1), (1.5, 1)])
def test_crimes_bad_input(rows, seed):
    with pytest.raises(BadInput):
        generate_crimes(rows, seed)


def test_crimes_single_row():
    t = generate_crimes(1, 0)
    assert t.num_rows == 1 and t["id"].to_pylist() == [1]


# --- flights ------------------------------------------------------------------------------------

def test_flights_tables_and_row_counts(flights):
    assert set(flights) == {"flights", "airlines", "airports", "planes", "weather"}
    assert flights["flights"].num_rows == 336_776
    assert {k: t.num_rows for k, t in flights.items() if k != "flights"} == {
        "airlines": 16, "airports": 1458, "planes": 3322, "weather": 26115}


def test_flights_column_types(flights):
    f = flights["flights"].schema
    assert f.names == ["year", "month", "day", "dep_time", "sched_dep_time", "dep_delay", "arr_time",
                       "sched_arr_time", "arr_delay", "carrier", "flight", "tailnum", "origin", "dest",
                       "air_time", "distance", "hour", "minute", "time_hour"]
    for name in ("dep_time", "dep_delay", "arr_time", "arr_delay", "air_time", "distance", "year"):
        assert f.field(name).type == pa.int64(), name
    for name in ("carrier", "tailnum", "origin", "dest"):
        assert f.field(name).type == pa.string(), name
    assert f.field("time_hour").type == pa.timestamp("us", tz="UTC")
    assert flights["weather"].schema.field("time_hour").type == pa.timestamp("us", tz="UTC")
    assert flights["weather"].schema.field("temp").type == pa.float64()
    assert flights["planes"].schema.field("year").type == pa.int64()
    assert flights["airports"].schema.field("lat").type == pa.float64()
    # pandas NaN became SQL NULL, not a number
    assert flights["flights"]["dep_delay"].null_count == 8255
    assert flights["flights"]["tailnum"].null_count == 2512
    first = flights["flights"].slice(0, 1).to_pylist()[0]
    assert first["dep_time"] == 517 and first["time_hour"].isoformat() == "2013-01-01T10:00:00+00:00"
    for t in flights.values():
        for fld in t.schema:
            assert fld.name == fld.name.lower() and fld.name.replace("_", "").isalnum()
            assert not pa.types.is_large_string(fld.type) and not pa.types.is_dictionary(fld.type)


# --- TPC-H --------------------------------------------------------------------------------------

# Ground truth measured from tpchgen-cli 4.0.0 at SF 0.01; it equals the row counts of the
# reference dbgen at SF 0.01 (lineitem is not a fixed multiple of SF: ~4 lines per order on average).
TPCH_SF001_ROWS = {"customer": 1500, "lineitem": 60175, "nation": 25, "orders": 15000,
                   "part": 2000, "partsupp": 8000, "region": 5, "supplier": 100}


def test_tpch_sf001(tmp_path):
    paths = generate_tpch(0.01, str(tmp_path))
    assert set(paths) == set(TABLES) and len(paths) == 8
    counts = {t: pq.ParquetFile(p).metadata.num_rows for t, p in paths.items()}
    assert counts == TPCH_SF001_ROWS
    li = pq.ParquetFile(paths["lineitem"]).schema_arrow
    assert li.field("l_quantity").type == pa.decimal128(15, 2)
    assert li.field("l_shipdate").type == pa.date32()
    assert li.field("l_orderkey").type == pa.int64()
    for p in paths.values():
        for fld in pq.ParquetFile(p).schema_arrow:
            assert not pa.types.is_string_view(fld.type), (p, fld)
    leftovers = [x.name for x in tmp_path.iterdir() if x.name.startswith(".") or x.suffix == ".tmp"]
    assert leftovers == []


@pytest.mark.parametrize("sf", [0, 20, 0.001, -1, float("nan"), "1", True])
def test_tpch_rejects_bad_scale_factor(tmp_path, sf):
    with pytest.raises(BadInput):
        generate_tpch(sf, str(tmp_path))


def test_tpch_only_some_tables(tmp_path):
    paths = generate_tpch(0.01, str(tmp_path), ["orders", "LINEITEM"])
    assert list(paths) == ["lineitem", "orders"]
    assert {t: pq.ParquetFile(p).metadata.num_rows for t, p in paths.items()} == {
        "lineitem": TPCH_SF001_ROWS["lineitem"], "orders": TPCH_SF001_ROWS["orders"]}
    assert sorted(x.name for x in tmp_path.iterdir()) == ["lineitem.parquet", "orders.parquet"]


@pytest.mark.parametrize("tables", [["lineitems"], [], [" "]])
def test_tpch_rejects_unknown_tables(tmp_path, tables):
    with pytest.raises(BadInput, match="unknown TPC-H table"):
        generate_tpch(0.01, str(tmp_path), tables)
