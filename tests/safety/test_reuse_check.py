"""Reuse checker (seed 001 §5): Ex. 8 both directions, interval generalisation, top-k rules,
plus hypothesis properties (reflexivity/determinism, and brute-force provenance containment)."""

from __future__ import annotations

import sqlglot
from hypothesis import given, settings, strategies as st

from advisor.plan import ir
from advisor.safety.reuse_check import check_reuse, cnf
from advisor.safety.z3_encoding import Encoder

STATS = {("cities", "popden"): (2000, 7000), ("cities", "state"): ("AK", "TX")}


def E(sql: str) -> sqlglot.exp.Expression:
    return sqlglot.parse_one(sql, read="spark")


def cities() -> ir.Scan:
    cols = [ir.Col(c, t, "cities", c) for c, t in (("popden", "int"), ("city", "string"), ("state", "string"))]
    return ir.Scan("cities", "cities", cols, 1)


def ex8(p: int, c: int) -> ir.Node:
    """σ_{cnt>c}(γ_{state; count(*)→cnt}(σ_{popden>p}(cities)))."""
    g = ir.Aggregate(ir.Select(cities(), E(f"popden > {p}")), ["state"],
                     [ir.AggCall("count", None, False, ir.Col("cnt", "bigint"))])
    return ir.Select(g, E(f"cnt > {c}"))


def interval(c1: int, c2: int, c3: int, func: str = "count") -> ir.Node:
    """σ_{v>c3}(γ_{state; f→v}(σ_{popden>=c1 ∧ popden<c2}(cities)))."""
    arg = None if func == "count" else E("popden")
    g = ir.Aggregate(ir.Select(cities(), E(f"popden >= {c1} AND popden < {c2}")), ["state"],
                     [ir.AggCall(func, arg, False, ir.Col("v", "double" if func == "avg" else "bigint"))])
    return ir.Select(g, E(f"v > {c3}"))


def topq(p: int, k: int) -> ir.Node:
    g = ir.Aggregate(ir.Select(cities(), E(f"popden > {p}")), ["state"],
                     [ir.AggCall("sum", E("popden"), False, ir.Col("s", "bigint"))])
    return ir.TopK(g, [("s", False)], k)


def test_example_8_both_directions():
    v = check_reuse(ex8(100, 10), ex8(100, 15), STATS)
    assert v.safe, v.reason
    assert v.checks > 0 and "count(*) > 15 ⇒ count(*) > 10" in v.reason
    v = check_reuse(ex8(100, 15), ex8(100, 10), STATS)
    assert not v.safe
    assert "count(*) > 15" in v.reason and "count(*) > 10" in v.reason
    # stricter WHERE: the new groups are sub-bags, count can only be smaller, HAVING still implied
    v = check_reuse(ex8(100, 10), ex8(3000, 15), STATS)
    assert v.safe and "≥ the new one" in v.reason
    assert not check_reuse(ex8(100, 10), ex8(3000, 5), STATS).safe
    assert not check_reuse(ex8(3000, 10), ex8(100, 15), STATS).safe
    # without HAVING a stricter WHERE is fine (monotone)
    sel = lambda p: ir.Select(cities(), E(f"popden > {p}"))  # noqa: E731
    assert check_reuse(sel(100), sel(3000), STATS).safe
    assert not check_reuse(sel(3000), sel(100), STATS).safe


def test_interval_generalisation():
    cap = interval(3000, 5000, 3)
    assert check_reuse(cap, interval(3500, 4000, 3), STATS).safe
    assert check_reuse(cap, interval(3000, 5000, 7), STATS).safe
    assert check_reuse(cap, interval(4000, 5000, 4), STATS).safe
    assert not check_reuse(cap, interval(2500, 4000, 3), STATS).safe   # wider interval
    assert not check_reuse(cap, interval(3500, 6000, 3), STATS).safe
    assert not check_reuse(cap, interval(3500, 4000, 2), STATS).safe   # weaker HAVING
    # statistics count: popden >= 1500 and popden >= 2000 select the same rows when min(popden) = 2000
    assert check_reuse(interval(2000, 5000, 3), interval(1500, 5000, 3), STATS).safe
    assert check_reuse(interval(2000, 5000, 3, "sum"), interval(2500, 4000, 9, "sum"), STATS).safe
    assert check_reuse(interval(2000, 5000, 3, "max"), interval(2500, 4000, 9, "max"), STATS).safe
    v = check_reuse(interval(2000, 5000, 3, "avg"), interval(2500, 4000, 9, "avg"), STATS)
    assert not v.safe and "avg(popden) may differ" in v.reason
    assert check_reuse(interval(2000, 5000, 3, "avg"), interval(2000, 5000, 9, "avg"), STATS).safe
    assert not check_reuse(interval(2000, 5000, 3, "min"), interval(2500, 4000, 9, "min"), STATS).safe


def test_topk_identical_bindings_only():
    assert check_reuse(topq(100, 3), topq(100, 3), STATS).safe
    v = check_reuse(topq(100, 3), topq(200, 3), STATS)
    assert not v.safe and "top-k" in v.reason
    assert check_reuse(topq(100, 3), topq(100, 2), STATS).safe          # k′ ≤ k extension
    assert not check_reuse(topq(100, 2), topq(100, 3), STATS).safe
    having_over_top = lambda k: ir.Select(ir.Aggregate(topq(100, k), [], [  # noqa: E731
        ir.AggCall("count", None, False, ir.Col("n", "bigint"))]), E("n > 1"))
    assert not check_reuse(having_over_top(3), having_over_top(2), STATS).safe


def test_not_same_template():
    v = check_reuse(ex8(100, 10), interval(1, 2, 3), STATS)
    assert not v.safe and "template" in v.reason


def test_cnf_split():
    enc = Encoder({"a": "int", "g": "int"})
    f = enc.encode_bool(E("(a > 1 AND g < 5) OR g = 7"), enc.side(""))
    assert len(cnf(f)) == 2


# ---------------- properties ----------------
OPS = ["<", "<=", ">", ">=", "=", "<>"]


@st.composite
def agg_select(draw):
    """Random Aggregate(Select(Scan)) (optionally under a HAVING), as a builder of fresh trees."""
    conds = draw(st.lists(st.tuples(st.sampled_from(["popden", "state"]), st.sampled_from(OPS),
                                    st.integers(0, 9000), st.sampled_from(["AK", "CA", "NY"])),
                          min_size=1, max_size=3))
    func = draw(st.sampled_from(["count", "sum", "avg", "min", "max"]))
    hav = draw(st.none() | st.tuples(st.sampled_from(OPS), st.integers(-5, 9000)))
    conn = draw(st.sampled_from([" AND ", " OR "]))
    where = conn.join(f"{a} {o} {n if a == 'popden' else repr(s)}" for a, o, n, s in conds)

    def build() -> ir.Node:
        arg = None if func == "count" else E("popden")
        g = ir.Aggregate(ir.Select(cities(), E(where)), ["state"],
                         [ir.AggCall(func, arg, False, ir.Col("v", "double" if func == "avg" else "bigint"))])
        return ir.Select(g, E(f"v {hav[0]} {hav[1]}")) if hav else g
    return build


@settings(max_examples=40, deadline=None)
@given(q=agg_select(), q2=agg_select())
def test_reuse_reflexive_and_deterministic(q, q2):
    a = check_reuse(q(), q(), STATS, shortcut=False)
    assert a.safe, a.reason
    assert check_reuse(q(), q(), STATS).safe
    b, c = check_reuse(q(), q2(), STATS), check_reuse(q(), q2(), STATS)
    assert (b.safe, b.reason, b.checks) == (c.safe, c.reason, c.checks)


def _lineage(rows, c1, c2, c3, func):
    groups: dict[str, list[int]] = {}
    for i, (p, s) in enumerate(rows):
        if c1 <= p < c2:
            groups.setdefault(s, []).append(i)
    f = {"count": len, "sum": lambda ix: sum(rows[i][0] for i in ix),
         "max": lambda ix: max(rows[i][0] for i in ix), "min": lambda ix: min(rows[i][0] for i in ix),
         "avg": lambda ix: sum(rows[i][0] for i in ix) / len(ix)}[func]
    return {i for ix in groups.values() if f(ix) > c3 for i in ix}


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 20), st.sampled_from(["AK", "CA", "NY"])), max_size=14),
       cap=st.tuples(st.integers(0, 20), st.integers(0, 20), st.integers(0, 40)),
       new=st.tuples(st.integers(0, 20), st.integers(0, 20), st.integers(0, 40)),
       func=st.sampled_from(["count", "sum", "max", "min", "avg"]))
def test_reuse_implies_provenance_containment(rows, cap, new, func):
    stats = {("cities", "popden"): (0, 20)}
    if check_reuse(interval(*cap, func), interval(*new, func), stats).safe:
        assert _lineage(rows, *new, func) <= _lineage(rows, *cap, func)


def test_parser_instances():
    import advisor.plan.parse as parse
    schema = lambda t: [("popden", "int"), ("city", "string"), ("state", "string")]  # noqa: E731
    q = lambda sql: parse.parse_sql(sql, schema).root  # noqa: E731
    t = "SELECT state, count(*) AS cnt FROM cities WHERE popden > {} GROUP BY state HAVING count(*) > {}"
    assert check_reuse(q(t.format(100, 10)), q(t.format(100, 15)), STATS).safe
    assert not check_reuse(q(t.format(100, 15)), q(t.format(100, 10)), STATS).safe
    k = "SELECT state, sum(popden) AS s FROM cities GROUP BY state ORDER BY s DESC LIMIT {}"
    assert check_reuse(q(k.format(5)), q(k.format(3)), STATS).safe
    assert not check_reuse(q(k.format(3)), q(k.format(5)), STATS).safe
