"""Safety checker gc (seed 001 §2) on the running example (§1.6) and small hand-built trees.

Trees are built by hand (no SQL parser). A brute-force property test checks soundness: whenever
the checker accepts popden, running the query on the sketched data gives the same result.
"""

from __future__ import annotations

import sqlglot
from hypothesis import given, settings, strategies as st

from advisor.plan import ir
from advisor.safety.static_check import NOT_NULL, check_combination, check_safety, safe_candidates

STATS = {("cities", "popden"): (2000, 7000), ("cities", "city"): ("Anchorage", "San Diego"),
         ("cities", "state"): ("AK", "TX")}


def E(sql: str) -> sqlglot.exp.Expression:
    return sqlglot.parse_one(sql, read="spark")


def C(name: str, dtype: str) -> ir.Col:
    return ir.Col(name, dtype)


def cities(sid: int = 1, prefix: str = "") -> ir.Scan:
    cols = [ir.Col(prefix + c, t, "cities", c) for c, t in (("popden", "int"), ("city", "string"), ("state", "string"))]
    return ir.Scan("cities", "cities", cols, sid)


def agg(child: ir.Node, keys: list[str], *calls: tuple) -> ir.Aggregate:
    """calls: (func, arg sql or None, out name, out dtype[, distinct])."""
    return ir.Aggregate(child, keys, [ir.AggCall(f, E(a) if a else None, bool(d and d[0]), C(o, t))
                                      for f, a, o, t, *d in calls])


def q2(func: str = "avg", out_t: str = "double") -> ir.Node:
    """SELECT state, func(popden) AS v FROM cities GROUP BY state ORDER BY v DESC LIMIT 1."""
    arg = None if func == "count" else "popden"
    return ir.TopK(agg(cities(), ["state"], (func, arg, "v", out_t)), [("v", False)], 1)


def q_total() -> ir.Node:
    """TR Ex. 9 literally: DESC encoded as ascending order on -sum(popden)."""
    g = agg(cities(), ["state"], ("sum", "popden", "sd", "bigint"))
    p = ir.Project(g, [(ir.col_ref("state"), C("state", "string")), (E("-1 * sd"), C("desc", "bigint"))])
    return ir.TopK(p, [("desc", True)], 1)


def having(op: str, c: int = 10, func: str = "count", arg=None) -> ir.Node:
    g = agg(cities(), ["state"], (func, arg, "cnt", "bigint"))
    return ir.Select(g, E(f"cnt {op} {c}"))


# ---------------- running example ----------------
def test_q2_avg_state_safe_popden_unsafe():
    v = check_safety(q2(), {"state"}, STATS)
    assert v.safe and v.checks > 0 and "state" in v.reason
    v = check_safety(q2(), {"popden"}, STATS)
    assert not v.safe
    assert "avg(popden)" in v.reason and "ORDER BY" in v.reason and "LIMIT 1" in v.reason


def test_q2_sum_and_count_make_popden_safe():
    v = check_safety(q2("sum", "bigint"), {"popden"}, STATS)
    assert v.safe, v.reason
    assert "sum(popden)" in v.reason and "ORDER BY" in v.reason and "keep-large" in v.reason
    assert check_safety(q2("count", "bigint"), {"popden"}, STATS).safe
    # -sum ascending: NULLs sort first, so it needs popden NULL-free (the example's table is)
    assert not check_safety(q_total(), {"popden"}, STATS).safe
    assert check_safety(q_total(), {"popden"}, {**STATS, NOT_NULL: frozenset({("cities", "popden")})}).safe
    assert check_safety(q_total(), {"state"}, STATS).safe


def test_ascending_order_on_a_changed_aggregate_needs_a_null_free_argument():
    """Found by the differential soak: ORDER BY min(v) ASC LIMIT 1 sketched on another column. A
    group whose kept rows all have v NULL gets min NULL on the sketched data and sorts first."""
    q = ir.TopK(agg(cities(), ["state"], ("min", "popden", "m", "int")), [("m", True)], 1)
    v = check_safety(q, {"popden"}, STATS)
    assert not v.safe and "NULL" in v.reason
    assert check_safety(q, {"popden"}, {**STATS, NOT_NULL: frozenset({("cities", "popden")})}).safe
    # descending puts NULLs last: a group turned NULL sinks, as a smaller value would
    assert check_safety(ir.TopK(q.child, [("m", False)], 1), {"popden"}, {}).safe is False  # min may shrink
    mx = ir.TopK(agg(cities(), ["state"], ("max", "popden", "m", "int")), [("m", False)], 1)
    assert check_safety(mx, {"popden"}, STATS).safe
    # a tie-break column is ascending too
    tie = ir.TopK(agg(cities(), ["state"], ("count", None, "n", "bigint"), ("min", "popden", "m", "int")),
                  [("n", False)], 1)
    assert not check_safety(tie, {"popden"}, STATS).safe
    assert check_safety(tie, {"popden"}, {**STATS, NOT_NULL: frozenset({("cities", "popden")})}).safe


def test_sum_needs_sign_from_statistics():
    assert not check_safety(q2("sum", "bigint"), {"popden"}, {}).safe
    neg = {("cities", "popden"): (-5, 7000)}
    assert not check_safety(q2("sum", "bigint"), {"popden"}, neg).safe
    assert check_safety(q2("max", "int"), {"popden"}, neg).safe   # max of a sub-bag never grows
    assert not check_safety(q2("min", "int"), {"popden"}, STATS).safe


def test_monotone_query_every_attribute_safe():
    q1 = ir.Project(ir.Select(cities(), E("state = 'CA'")),
                    [(ir.col_ref("city"), C("city_o", "string")), (ir.col_ref("popden"), C("popden_o", "int"))])
    res = safe_candidates(q1, STATS, {1: ["popden", "city", "state"]})
    assert set(res) == {"popden", "city", "state"}
    for name, v in res.items():
        assert v.safe, (name, v.reason)
        assert "monotone" in v.reason
    assert check_safety(ir.Distinct(q1), {"popden"}, STATS).safe


def test_having_keep_large_safe_keep_small_unsafe():
    v = check_safety(having(">"), {"popden"}, STATS)
    assert v.safe, v.reason
    assert "popden is not a group-by attribute" in v.reason and "HAVING" in v.reason
    assert "keep-large" in v.reason and "count(*)" in v.reason
    v = check_safety(having("<"), {"popden"}, STATS)
    assert not v.safe and "HAVING" in v.reason and "count(*)" in v.reason
    assert check_safety(having("<"), {"state"}, STATS).safe
    assert check_safety(having(">", 100, "sum", "popden"), {"popden"}, STATS).safe
    assert not check_safety(having(">", 100, "avg", "popden"), {"popden"}, STATS).safe
    assert check_safety(having("<", 100, "min", "popden"), {"popden"}, STATS).safe


def test_join_equates_sketch_attribute_with_group_key():
    c = cities(1, "c_")
    s = ir.Scan("states", "s", [ir.Col("s_name", "string", "states", "name"),
                                ir.Col("s_region", "string", "states", "region")], 2)
    j = ir.Join(c, s, E("c_state = s_name"))
    q = ir.TopK(agg(j, ["s_name"], ("avg", "c_popden", "v", "double")), [("v", False)], 1)
    v = check_safety(q, {"c_state"}, STATS)
    assert v.safe, v.reason
    assert "equal to group-by attribute" in v.reason and "GROUP BY" in v.reason
    assert check_safety(q, {"s_name"}, STATS).safe
    assert not check_safety(q, {"c_popden"}, STATS).safe
    assert check_combination(q, {1: "c_state", 2: "s_name"}, STATS).safe
    assert not check_combination(q, {1: "c_state", 2: "s_region"}, STATS).safe


def test_topk_tie_break_must_be_covered():
    g = agg(cities(), ["state"], ("sum", "popden", "s", "bigint"), ("count", None, "c", "bigint"))
    v = check_safety(ir.TopK(g, [("s", False)], 1), {"popden"}, STATS)
    assert not v.safe and "ties are broken by count(*)" in v.reason
    g2 = agg(cities(), ["state"], ("sum", "popden", "s", "bigint"))
    assert check_safety(ir.TopK(g2, [("s", False)], 1), {"popden"}, STATS).safe
    # ascending order on a shrinking value is unsafe
    assert not check_safety(ir.TopK(g2, [("s", True)], 1), {"popden"}, STATS).safe


def test_nested_aggregate_group_check_and_union():
    inner = agg(cities(), ["state"], ("count", None, "cnt", "bigint"))
    outer = agg(inner, ["cnt"], ("count", None, "n", "bigint"))
    v = check_safety(outer, {"popden"}, STATS)
    assert not v.safe and "GROUP BY count(*)" in v.reason
    u = ir.Union(ir.Select(cities(1, "a_"), E("a_popden > 3000")), ir.Select(cities(2, "b_"), E("b_state = 'CA'")),
                 [C("u_popden", "int"), C("u_city", "string"), C("u_state", "string")])
    assert check_safety(u, {"a_popden", "b_city"}, STATS).safe
    top = ir.Select(agg(u, ["u_state"], ("count", None, "k", "bigint")), E("k >= 2"))
    assert check_safety(top, {"a_popden"}, STATS).safe
    assert not check_safety(ir.Select(top, E("k <= 5")), {"a_popden"}, STATS).safe


def test_validation_cache_and_opaque_predicates():
    import pytest
    with pytest.raises(ValueError):
        check_safety(q2(), {"popden", "state"}, STATS)
    with pytest.raises(ValueError):
        check_safety(q2(), {"nope"}, STATS)
    a, b = check_safety(q2(), {"popden"}, STATS), check_safety(q2(), {"popden"}, STATS)
    assert (a.safe, a.reason, a.details) == (b.safe, b.reason, b.details)
    q = ir.Select(agg(ir.Select(cities(), E("city LIKE 'S%' AND upper(state) <> 'NY'")), ["state"],
                      ("count", None, "cnt", "bigint")), E("cnt > 1"))
    assert check_safety(q, {"popden"}, STATS).safe
    q = ir.Select(agg(cities(), ["state"], ("count", None, "cnt", "bigint")), E("abs(cnt) > 1"))
    assert not check_safety(q, {"popden"}, STATS).safe   # abs is opaque: nothing to conclude


# ---------------- brute-force soundness ----------------
STATES = ["AK", "CA", "NY", "TX"]


def _run(shape: str, c: int, rows: list[tuple[int, str]]):
    """(result, lineage row indexes) of each query shape, evaluated directly in Python."""
    groups: dict[str, list[int]] = {}
    for i, (_, s) in enumerate(rows):
        groups.setdefault(s, []).append(i)
    val = {"cnt": lambda ix: len(ix), "sum": lambda ix: sum(rows[i][0] for i in ix),
           "avg": lambda ix: sum(rows[i][0] for i in ix) / len(ix),
           "max": lambda ix: max(rows[i][0] for i in ix), "min": lambda ix: min(rows[i][0] for i in ix)}
    f, kind = shape.split(":")
    res = {s: val[f](ix) for s, ix in groups.items()}
    if kind == "gt":
        keep = [s for s in res if res[s] > c]
    elif kind == "lt":
        keep = [s for s in res if res[s] < c]
    else:  # top-1 by value DESC, ties by state ascending
        keep = sorted(res, key=lambda s: (-res[s], s))[:1]
    return sorted((s, res[s]) for s in keep), {i for s in keep for i in groups[s]}


def _tree(shape: str, c: int) -> ir.Node:
    f, kind = shape.split(":")
    arg = None if f == "cnt" else "popden"
    g = agg(cities(), ["state"], ("count" if f == "cnt" else f, arg, "v", "double" if f == "avg" else "bigint"))
    if kind == "top":
        return ir.TopK(g, [("v", False)], 1)
    return ir.Select(g, E(f"v {'>' if kind == 'gt' else '<'} {c}"))


SHAPES = [f"{f}:{k}" for f in ("cnt", "sum", "avg", "max", "min") for k in ("gt", "lt", "top")]
VERDICT = {s: check_safety(_tree(s, 5), {"popden"}, {("cities", "popden"): (0, 40)}).safe for s in SHAPES}


def test_expected_verdicts_of_shapes():
    assert {s for s, ok in VERDICT.items() if ok} == {"cnt:gt", "cnt:top", "sum:gt", "sum:top", "max:gt",
                                                     "max:top", "min:lt"}


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 40), st.sampled_from(STATES)), min_size=1, max_size=12),
       bounds=st.lists(st.integers(1, 40), max_size=4), c=st.integers(0, 60), shape=st.sampled_from(SHAPES))
def test_accepted_sketches_are_safe(rows, bounds, c, shape):
    if not VERDICT[shape]:
        return
    cuts = sorted(set(bounds))
    frag = lambda v: sum(v >= b for b in cuts)  # noqa: E731
    want, lineage = _run(shape, c, rows)
    sketch = {frag(rows[i][0]) for i in lineage}
    kept = [r for r in rows if frag(r[0]) in sketch]
    got = _run(shape, c, kept)[0] if kept else []
    assert got == want


# ---------------- encoder ----------------
def test_encoder_semantics():
    from advisor.safety.z3_encoding import Encoder, valid
    enc = Encoder({"a": "int", "b": "decimal(10,2)", "s": "string", "d": "date", "t": "timestamp"})
    D, P = enc.side(""), enc.side("__ps")
    f = lambda sql, v=D: enc.encode_bool(E(sql), v)  # noqa: E731
    assert valid([f("d >= DATE '2020-01-02'")], f("d > '2020-01-01'"))
    assert valid([f("t >= TIMESTAMP '2020-01-01 00:00:01'")], f("t > DATE '2020-01-01'"))
    assert valid([f("a BETWEEN 2 AND 3")], f("a IN (2, 3)"))
    assert valid([f("a > 1")], f("CASE WHEN a > 1 THEN b ELSE 0 END = b"))
    assert valid([f("a / 2 > 1")], f("a > 2"))
    # opaque parts: congruence across sides, nothing else
    for sql in ("s LIKE 'C%'", "upper(s) = 'CA'", "s IS NOT NULL", "s < 'M'", "abs(a) > 3"):
        assert valid([D("s") == P("s"), D("a") == P("a"), f(sql, P)], f(sql)), sql
        assert not valid([f(sql, P)], f(sql)), sql
    assert not valid([f("s < 'M'")], f("s < 'N'"))   # str order is uninterpreted: sound, incomplete
    assert not valid([f("myf(a) > 0")], f("myf(a) >= 1"))  # unknown result type is not assumed integral


# ---------------- with the SQL parser, when present ----------------
def test_parser_running_example():
    import advisor.plan.parse as parse
    schema = lambda t: [("popden", "int"), ("city", "string"), ("state", "string")]  # noqa: E731

    def verdicts(sql):
        q = parse.parse_sql(sql, schema)
        s = q.scans()[0]
        by_src = {c.name: c.source for c in s.cols}
        return {by_src[k]: v.safe for k, v in safe_candidates(q.root, STATS, {s.scan_id: s.names}).items()}

    base = "SELECT state, {f}(popden) AS v FROM cities GROUP BY state ORDER BY v DESC LIMIT 1"
    assert verdicts(base.format(f="avg")) == {"popden": False, "city": False, "state": True}
    assert verdicts(base.format(f="sum"))["popden"]
    assert verdicts("SELECT city, popden FROM cities WHERE state = 'CA'") == dict.fromkeys(
        ["popden", "city", "state"], True)
    assert verdicts("SELECT state FROM cities GROUP BY state HAVING count(*) > 1")["popden"]
    assert not verdicts("SELECT state FROM cities GROUP BY state HAVING count(*) < 3")["popden"]


def test_z3_work_runs_with_automatic_collection_off_and_restores_it():
    import gc

    from advisor.safety.z3_encoding import z3_section

    assert gc.isenabled()
    with z3_section():
        assert not gc.isenabled()
        with z3_section():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner section does not re-enable it under the outer one
    assert gc.isenabled()
    try:
        with z3_section():
            raise KeyError("x")
    except KeyError:
        pass
    assert gc.isenabled()
