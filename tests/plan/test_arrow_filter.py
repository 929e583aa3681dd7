"""The delta pre-filter (`advisor.plan.arrow_filter`) must never drop a row the engine's own predicate
evaluation (`maintain.exprs`) keeps: checked on fixed cases and on generated predicates."""

from __future__ import annotations

import datetime as dt
import decimal

import numpy as np
import pyarrow as pa
import sqlglot
from hypothesis import given, settings, strategies as st

from advisor.maintain import exprs
from advisor.maintain.frames import normalize_frame
from advisor.plan import arrow_filter

D = decimal.Decimal


def _table(n: int = 40, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    q = [None if i % 11 == 0 else D(int(rng.integers(0, 5001))) / 100 for i in range(n)]
    f = [None if i % 13 == 0 else (float("nan") if i % 17 == 0 else float(rng.normal(0, 10))) for i in range(n)]
    k = [None if i % 7 == 0 else int(rng.integers(-5, 50)) for i in range(n)]
    s = [None if i % 9 == 0 else ["AIR", "MAIL", "RAIL", "SHIP", "TRUCK"][int(rng.integers(0, 5))] for i in range(n)]
    d = [None if i % 10 == 0 else dt.date(1995, 1, 1) + dt.timedelta(days=int(rng.integers(0, 60))) for i in range(n)]
    return pa.table({"q": pa.array(q, pa.decimal128(15, 2)), "f": pa.array(f, pa.float64()),
                     "k": pa.array(k, pa.int64()), "s": pa.array(s, pa.string()),
                     "d": pa.array(d, pa.date32()), "rid": pa.array(range(n), pa.int64())})


def _engine_keeps(t: pa.Table, sql: str) -> set[int]:
    df = normalize_frame(t.to_pandas())
    m = exprs.mask(sqlglot.parse_one(sql), df)
    return set(df["rid"][m].astype(int).tolist())


def _filter_keeps(t: pa.Table, sql: str) -> set[int]:
    return set(arrow_filter.apply(t, sqlglot.parse_one(sql)).column("rid").to_pylist())


def test_a_decimal_threshold_keeps_exactly_the_rows_above_it():
    t = pa.table({"q": pa.array([D("48.99"), D("49.00"), D("49.01"), None], pa.decimal128(15, 2)),
                  "rid": pa.array([0, 1, 2, 3], pa.int64())})
    assert _filter_keeps(t, "q > 49") == {1, 2}  # 49.00 survives the widening; the engine drops it
    assert _engine_keeps(t, "q > 49") == {2}


def test_and_keeps_what_it_can_translate_and_or_needs_both_sides():
    t = _table()
    # k * 2 > 10 is arithmetic: not translated, so the AND filters by s alone
    assert _filter_keeps(t, "s = 'AIR' AND k * 2 > 10") == _engine_keeps(t, "s = 'AIR'")
    # an OR with an untranslated side cannot drop anything
    assert _filter_keeps(t, "s = 'AIR' OR k * 2 > 10") == set(range(t.num_rows))


def test_is_null_keeps_nan_and_dates_compare_with_iso_literals():
    t = _table()
    nan_rows = {i for i, v in enumerate(t.column("f").to_pylist()) if v is not None and v != v}
    assert nan_rows and nan_rows <= _filter_keeps(t, "f IS NULL")
    assert _filter_keeps(t, "d >= '1995-02-01'") == _engine_keeps(t, "d >= '1995-02-01'")


def test_untranslatable_predicates_keep_every_row():
    t = _table()
    for sql in ("NOT k > 3", "k <> 3", "k > q", "d > '1995-02-01 12:00:00'", "s LIKE 'A%'"):
        assert _filter_keeps(t, sql) == set(range(t.num_rows)), sql


# ---------- generated predicates ----------
_ATOMS = st.one_of(
    st.builds(lambda c, op, v: f"{c} {op} {v}", st.sampled_from(["q", "f", "k"]),
              st.sampled_from(["<", "<=", "=", ">", ">=", "<>"]),
              st.one_of(st.integers(-10, 60).map(str), st.sampled_from(["0.5", "25.25", "-3.75", "49.99"]))),
    st.builds(lambda v, op: f"s {op} '{v}'", st.sampled_from(["AIR", "MAIL", "RAIL", "ZZZ", ""]),
              st.sampled_from(["<", "=", ">=", "<>"])),
    st.builds(lambda d, op: f"d {op} '1995-{d}'", st.sampled_from(["01-01", "01-31", "02-15", "03-02"]),
              st.sampled_from(["<", "<=", "=", ">"])),
    st.builds(lambda c, neg: f"{c} IS {'NOT ' if neg else ''}NULL", st.sampled_from(["q", "f", "k", "s", "d"]),
              st.booleans()),
    st.builds(lambda lo, hi: f"k BETWEEN {lo} AND {hi}", st.integers(-5, 30), st.integers(0, 50)),
    st.builds(lambda xs: f"s IN ({', '.join(repr(x) for x in xs)})",
              st.lists(st.sampled_from(["AIR", "MAIL", "SHIP", "X"]), min_size=1, max_size=3)),
)
_PREDS = st.recursive(_ATOMS, lambda sub: st.one_of(
    st.builds(lambda a, b: f"({a} AND {b})", sub, sub),
    st.builds(lambda a, b: f"({a} OR {b})", sub, sub),
    st.builds(lambda a: f"NOT ({a})", sub)), max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(pred=_PREDS, seed=st.integers(0, 3))
def test_the_filter_never_drops_a_row_the_engine_keeps(pred, seed):
    t = _table(seed=seed)
    assert _engine_keeps(t, pred) <= _filter_keeps(t, pred)
