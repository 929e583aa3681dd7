"""The driver's exact evaluator: three-valued logic, scales, and refusals where Spark would differ."""

import decimal

import numpy as np
import pyarrow as pa
import pytest
from sqlglot import parse_one

from advisor.maintain import exact_arrow as ea

TYPES = {"a": "int", "b": "bigint", "p": "decimal(15,2)", "s": "string", "w": "decimal(20,2)", "x": "double"}


def _tab(**cols):
    return pa.table(cols)


def test_and_or_not_follow_three_valued_logic():
    t = _tab(a=pa.array([1, None, 5, None], pa.int32()), b=pa.array([None, None, 1, 7], pa.int64()))
    cases = {  # per row: TRUE / FALSE / NULL, as SQL defines them
        "a > 2 AND b > 2": [False, None, False, None],
        "a > 2 OR b > 2": [None, None, True, True],
        "NOT (a > 2)": [True, None, False, None],
        "a < 2 AND b IS NULL": [True, None, False, False],
        "b IN (1, 7)": [None, None, True, True],
    }
    for sql, want in cases.items():
        got = ea.truth(parse_one(sql), t, TYPES)
        assert [bool(v) if k else None for v, k in zip(got.value, got.known)] == want, sql
    assert ea.keep(parse_one("a > 2 OR b > 2"), t, TYPES).tolist() == [False, False, True, True]


def test_decimal_arithmetic_is_exact_at_spark_scales():
    p = pa.array([decimal.Decimal("0.10"), decimal.Decimal("99999.99"), decimal.Decimal("-3.05")], pa.decimal128(15, 2))
    t = _tab(p=p, a=pa.array([3, 4, 5], pa.int32()))
    v = ea.number(parse_one("p * a + 0.001"), t, TYPES)
    assert v.scale == 3 and v.decimal
    want = [decimal.Decimal("0.10") * 3, decimal.Decimal("99999.99") * 4, decimal.Decimal("-3.05") * 5]
    assert v.values.tolist() == [int((w + decimal.Decimal("0.001")).scaleb(3)) for w in want]
    assert ea.keep(parse_one("p > 0.1"), t, TYPES).tolist() == [False, True, False]
    assert ea.keep(parse_one("p >= 0.1"), t, TYPES).tolist() == [True, True, False]


def test_refuses_what_it_cannot_do_exactly():
    t = _tab(a=pa.array([2 ** 30], pa.int32()), b=pa.array([2 ** 62], pa.int64()),
             w=pa.array([decimal.Decimal("1.00")], pa.decimal128(20, 2)), x=pa.array([1.5]),
             s=pa.array(["1995-01-01"]))
    for sql in ("a * 4",          # an INT result past 32 bits: Spark overflows
                "b * 4",          # past 64 bits
                "w + 1",          # a DECIMAL wider than one 64-bit word
                "x + 1",          # doubles
                "a / 2"):         # division
        with pytest.raises(ea.ArrowUnsupported):
            ea.number(parse_one(sql), t, TYPES)
    with pytest.raises(ea.ArrowUnsupported):
        ea.truth(parse_one("s > CAST('1995-01-01' AS DATE)"), t, TYPES)   # a string against a date
    assert ea.number(parse_one("b * 1"), t, TYPES).values.tolist() == [2 ** 62]
    assert ea.number(parse_one("a * 1"), t, TYPES).values.tolist() == [2 ** 30]
    assert np.array_equal(ea.number(parse_one("-a"), t, TYPES).values, [-(2 ** 30)])
