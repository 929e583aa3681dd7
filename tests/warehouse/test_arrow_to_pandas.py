"""Arrow -> pandas in the engine's dtypes; decimals must equal Python's float(Decimal) exactly."""

import datetime as dt
import decimal

import pandas as pd
import pyarrow as pa
from hypothesis import given, settings, strategies as st

from advisor.maintain.frames import coerce_to
from advisor.warehouse.arrow_to_pandas import decimal_to_float, to_nullable_pandas


def _ref(arr):
    return [None if v is None else float(v) for v in arr.to_pylist()]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 12), st.data())
def test_decimals_convert_as_python_floats_do(scale, data):
    prec = 38
    mag = 10 ** (prec - 1)
    ints = data.draw(st.lists(st.one_of(st.none(), st.integers(-mag, mag), st.integers(-2 ** 60, 2 ** 60)),
                              max_size=60))
    vals = [None if i is None else decimal.Decimal(i).scaleb(-scale) for i in ints]
    arr = pa.array(vals, type=pa.decimal128(prec, scale))
    off = data.draw(st.integers(0, len(vals)))
    for a in (arr, arr.slice(off)):
        assert decimal_to_float(a).to_pylist() == _ref(a)


def test_prices_that_arrows_own_cast_rounds_wrongly():
    # 608 of these 4,000 two-decimal prices come out one ulp off with Arrow's decimal->double cast
    vals = [decimal.Decimal(f"{i}.{j:02d}") for i in range(1000, 1040) for j in range(100)]
    arr = pa.array(vals, type=pa.decimal128(15, 2))
    wrong = sum(x != y for x, y in zip(arr.cast(pa.float64()).to_pylist(), _ref(arr)))
    assert wrong > 0                      # the reason this module exists
    assert decimal_to_float(arr).to_pylist() == _ref(arr)


def test_frame_arrives_in_nullable_dtypes_that_coerce_to_keeps():
    t = pa.table({"i": pa.array([1, None], pa.int32()), "f": pa.array([1.5, None]),
                  "d": pa.array([decimal.Decimal("0.10"), None], pa.decimal128(15, 2)),
                  "s": pa.array(["a", None]), "b": pa.array([True, None]),
                  "dt": pa.array([dt.date(1998, 1, 28), None], pa.date32())})
    df = to_nullable_pandas(t)
    assert {c: str(d) for c, d in df.dtypes.items()} == {
        "i": "Int64", "f": "Float64", "d": "Float64", "s": "string", "b": "boolean", "dt": "datetime64[ns]"}
    assert df["d"].tolist()[0] == 0.1 and df["dt"].tolist()[0] == dt.datetime(1998, 1, 28)
    for c, typ in [("i", "int"), ("f", "double"), ("d", "decimal(15,2)"), ("s", "string"), ("b", "boolean"),
                   ("dt", "date")]:
        assert coerce_to(df[c], typ) is df[c]   # nothing left to convert


def test_chunked_and_sliced_columns_keep_values_and_nulls():
    a = pa.table({"i": pa.array([1, None, 3], pa.int64()), "f": pa.array([0.5, 1.5, None]),
                  "d": pa.array([decimal.Decimal("1.10"), None, decimal.Decimal("-2.25")], pa.decimal128(15, 2)),
                  "u": pa.array([1, 2, None], pa.uint8())})
    t = pa.concat_tables([a, a.slice(1)])
    df = to_nullable_pandas(t)
    assert [None if v is pd.NA else v for v in df["i"].tolist()] == [1, None, 3, None, 3]
    assert [None if v is pd.NA else v for v in df["f"].tolist()] == [0.5, 1.5, None, 1.5, None]
    assert [None if v is pd.NA else v for v in df["d"].tolist()] == [1.1, None, -2.25, None, -2.25]
    assert str(df["u"].dtype) == "Int64" and df["u"].isna().tolist() == [False, False, True, False, True]


def test_columns_do_not_share_arrows_read_only_buffers():
    df = to_nullable_pandas(pa.table({"i": pa.array([1, 2], pa.int64()), "f": pa.array([0.5, 1.5])}))
    df.loc[0, "i"] = 7          # would fail on a zero-copy view of the Arrow buffer
    df.loc[0, "f"] = 2.5
    assert df["i"].tolist() == [7, 2] and df["f"].tolist() == [2.5, 1.5]
