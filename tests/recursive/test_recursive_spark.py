"""Recursive queries on Spark against the warehouse, differential: the sketched answer equals the
plain one and networkx's, the Spark loop, Spark's own recursion and the driver loop agree, and after
insert and delete batches the maintained sketch equals a recaptured one."""

from __future__ import annotations

import math

import networkx as nx
import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings, strategies as st

from advisor.recursive.capture import capture_recursive, catch_up, load_links
from advisor.recursive.evaluate import run_native, run_recursive
from advisor.recursive.maintain import RecursivePolicy
from advisor.recursive.shape import recognise

REACH = (
    "WITH RECURSIVE r(src, dst) AS (SELECT src, dst FROM link UNION SELECT l.src, r.dst FROM link l "
    "JOIN r ON l.dst = r.src) SELECT src, dst FROM r WHERE src IN (0, 1)"
)
NODES = (  # the nodes reached from 0 over links cheaper than 4, within 4 hops
    "WITH RECURSIVE reach(node, hops) AS (SELECT dst, 1 FROM link WHERE src = 0 AND cost < 4 UNION SELECT "
    "l.dst, r.hops + 1 FROM reach r JOIN link l ON l.src = r.node WHERE r.hops < 4 AND l.cost < 4) "
    "SELECT node, MIN(hops) AS h FROM reach GROUP BY node"
)
CHEAP = (
    "WITH RECURSIVE p(src, dst, cost, hops) AS (SELECT src, dst, cost, 1 FROM link WHERE src = 0 UNION "
    "SELECT p.src, l.dst, p.cost + l.cost, p.hops + 1 FROM p JOIN link l ON p.dst = l.src WHERE p.hops < 3) "
    "SELECT src, dst, MIN(cost) AS c FROM p GROUP BY src, dst"
)


@pytest.fixture(scope="module")
def cat(spark, tmp_path_factory):
    from advisor.warehouse.catalog import Catalog
    from advisor.warehouse.store import Store

    return Catalog(spark, Store(tmp_path_factory.mktemp("recwh")))


def put(cat, name: str, links: list, cost: str = "cost"):
    pdf = pd.DataFrame(links, columns=["src", "dst", cost])
    return cat.create_table(name, cat.spark.createDataFrame(pdf, f"src long, dst long, {cost} long"))


def nx_reach(links, sources) -> set:
    g = nx.MultiDiGraph()
    g.add_edges_from((s, d) for s, d, _ in links)
    return {(s, d) for s in sources if s in g for f in g.successors(s) for d in nx.descendants(g, f) | {f}}


def nx_cheapest(links, source, max_hops) -> dict:
    g = nx.MultiDiGraph()
    g.add_weighted_edges_from(links)
    best, cur = {}, {source: 0} if source in g else {}
    for _ in range(max_hops):
        nxt = {}
        for u, c in cur.items():
            for _, v, w in g.out_edges(u, data="weight"):
                nxt[v] = min(nxt.get(v, math.inf), c + w)
        for v, c in nxt.items():
            best[(source, v)] = min(best.get((source, v), math.inf), c)
        cur = nxt
    return best


link_st = st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(1, 4))


def nx_hops(links, source, max_hops, max_cost) -> dict:
    """node -> fewest links of a walk from ``source`` over links cheaper than ``max_cost``."""
    g = nx.MultiDiGraph()
    g.add_edges_from((s, d) for s, d, c in links if c < max_cost)
    best, cur = {}, {source} if source in g else set()
    for h in range(1, max_hops + 1):
        cur = {d for s in cur for d in g.successors(s)}
        for d in cur:
            best.setdefault(d, h)
    return best


@settings(
    max_examples=2,
    phases=[Phase.explicit, Phase.generate],  # a Spark example is seconds: no shrinking
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.lists(link_st, min_size=1, max_size=10),
    st.lists(link_st, max_size=3),
    st.integers(0, 3),
    st.sampled_from([REACH, CHEAP, NODES]),
)
@example([(0, 1, 1), (1, 2, 3), (2, 0, 1), (1, 3, 5), (3, 4, 1)], [(4, 5, 1)], 2, NODES)  # a cycle, a dear link
def test_sketched_equals_plain_and_networkx_and_maintained_equals_recaptured(cat, links, ins, n_del, sql):
    shape = recognise(sql)
    put(cat, "link", links)
    rs = capture_recursive(cat, shape, fragments=4)
    for step in range(2):
        plain = run_recursive(cat, shape)
        used = run_recursive(cat, shape, None, rs.condition())
        assert sorted(used.rows) == sorted(plain.rows)
        assert used.link_rows <= plain.link_rows
        live = [tuple(x) for x in cat.read_pandas("link")[["src", "dst", "cost"]].itertuples(index=False)]
        if sql is REACH:
            assert set(plain.rows) == nx_reach(live, {0, 1})
        elif sql is NODES:
            assert dict(plain.rows) == nx_hops(live, 0, 4, 4)
        else:
            assert {(s, d): c for s, d, c in plain.rows} == nx_cheapest(live, 0, 3)
        if step:
            break
        ids = sorted(load_links(cat, shape))
        dels = ids[:n_del]
        ins_df = cat.spark.createDataFrame(
            pd.DataFrame(ins or [(9, 9, 1)], columns=["src", "dst", "cost"]), "src long, dst long, cost long"
        )
        cat.apply_frames(
            "link", ins_df, cat.spark.createDataFrame([(r,) for r in dels], "_rid long") if dels else None
        )
        catch_up(cat, rs)
        fresh = capture_recursive(cat, shape, fragments=4)
        assert fresh.part.id == rs.part.id
        assert rs.state.tuples() == fresh.state.tuples()
        assert rs.fragments == fresh.fragments


def test_the_spark_loop_spark_native_and_the_driver_loop_agree_with_networkx_on_a_topology(cat):
    from workloads.data.topology import topology_links

    t = topology_links(60, seed=3, density=3.0).to_pandas()
    put(cat, "link", list(t.itertuples(index=False, name=None)))
    sql = CHEAP.replace("src = 0", "src IN (0, 7)")
    shape = recognise(sql)
    loop, native = run_recursive(cat, shape, how="loop"), run_native(cat, shape)
    driver = run_recursive(cat, shape)
    assert loop.how == "semi-naive loop on Spark" and native.how.startswith("Spark recursive CTE")
    assert driver.how.startswith("semi-naive loop on the driver")
    assert sorted(loop.rows) == sorted(native.rows) == sorted(driver.rows)
    assert [f.dataType for f in driver.schema.fields] == [f.dataType for f in loop.schema.fields]
    live = list(t.itertuples(index=False, name=None))
    truth = nx_cheapest(live, 0, 3) | nx_cheapest(live, 7, 3)
    assert {(s, d): c for s, d, c in loop.rows} == truth


def test_airport_routes_reachability_and_cheapest_paths_equal_networkx_before_and_after_deletes(cat):
    from workloads.data.airports import route_links

    r = route_links(40.0).to_pandas()
    cat.create_table("route", cat.spark.createDataFrame(r))
    src = "EGLL"
    reach = recognise(
        f"WITH RECURSIVE r(src, dst) AS (SELECT src, dst FROM route WHERE src = '{src}' UNION "
        "SELECT r.src, l.dst FROM r JOIN route l ON r.dst = l.src) SELECT dst FROM r"
    )
    cheap = recognise(
        f"WITH RECURSIVE p(src, dst, km, hops) AS (SELECT src, dst, km, 1 FROM route WHERE src = "
        f"'{src}' UNION SELECT p.src, l.dst, p.km + l.km, p.hops + 1 FROM p JOIN route l "
        "ON p.dst = l.src WHERE p.hops <= 2) SELECT src, dst, MIN(km) AS km FROM p GROUP BY src, dst"
    )
    # unbounded reachability keeps BDDs while they fit a node budget, else DRed (first-derivation
    # sketches); the hop-bounded query keeps witness sets
    pol = RecursivePolicy(budget=20_000, node_budget=20_000)
    sketches = [capture_recursive(cat, s, fragments=50, policy=pol) for s in (reach, cheap)]
    for step in range(2):
        live = [tuple(x) for x in cat.read_pandas("route")[["src", "dst", "km"]].itertuples(index=False)]
        g = nx.DiGraph()
        g.add_weighted_edges_from(live)
        want = {d for f in g.successors(src) for d in nx.descendants(g, f) | {f}}
        for s, rs in zip((reach, cheap), sketches):
            plain = run_recursive(cat, s)
            used = run_recursive(cat, s, None, rs.condition())
            assert sorted(used.rows) == sorted(plain.rows)
            assert used.link_rows < plain.link_rows
            if s is reach:
                assert {d for (d,) in plain.rows} == want and len(want) > 3
            else:
                got = {d: km for _, d, km in plain.rows}
                truth = nx_cheapest(live, src, 3)
                assert got.keys() == {d for _, d in truth}
                assert all(math.isclose(got[d], c, rel_tol=1e-9) for (_, d), c in truth.items())
        if step == 0:
            near = sorted(r_ for r_, (s, d, _) in load_links(cat, reach).items() if s == src or d == src)[:2]
            cat.apply_frames("route", None, cat.spark.createDataFrame([(x,) for x in near], "_rid long"))
            for rs in sketches:
                catch_up(cat, rs)
                fresh = capture_recursive(
                    cat, rs.shape, fragments=50, policy=RecursivePolicy(budget=20_000, node_budget=20_000, mode=rs.state.policy.mode)
                )
                assert rs.state.mode == fresh.state.mode and rs.fragments == fresh.fragments


def test_dred_mode_sketch_is_sufficient_and_equals_its_recapture(cat):
    put(cat, "link", [(0, 1, 1), (1, 2, 1), (2, 0, 1), (2, 3, 2), (3, 4, 1), (4, 5, 1), (5, 3, 1)])
    shape = recognise(REACH)
    rs = capture_recursive(cat, shape, fragments=3, policy=RecursivePolicy(mode="dred"))
    assert rs.state.mode == "dred"
    plain = run_recursive(cat, shape)
    assert sorted(run_recursive(cat, shape, None, rs.condition()).rows) == sorted(plain.rows)
    ids = sorted(load_links(cat, shape))
    cat.apply_frames("link", None, cat.spark.createDataFrame([(ids[3],)], "_rid long"))
    catch_up(cat, rs)
    assert rs.fragments == capture_recursive(cat, shape, fragments=3, policy=RecursivePolicy(mode="dred")).fragments
    assert set(run_recursive(cat, shape).rows) == nx_reach(
        [(0, 1, 1), (1, 2, 1), (2, 0, 1), (3, 4, 1), (4, 5, 1), (5, 3, 1)], {0, 1}
    )


def test_the_spark_loop_runs_any_linear_union_cte_and_names_a_recursion_without_fixpoint(cat):
    from advisor.errors import BadInput
    from advisor.recursive.linear import parse_linear, run_linear

    spark = cat.spark
    q = (  # a sibling CTE, and the outer query joins the view with it
        "WITH RECURSIVE odd(n) AS (SELECT 1), evens(n) AS (SELECT 0 UNION SELECT n + 2 FROM evens WHERE n < 10) "
        "SELECT sum(e.n) AS s, count(*) AS c FROM evens e JOIN odd o ON o.n <= e.n"
    )
    df, _, rounds, _ = run_linear(spark, parse_linear(q))
    assert [tuple(r) for r in df.collect()] == [(sum(range(2, 11, 2)), 5)] and rounds == 6
    grows = "WITH RECURSIVE r(n) AS (SELECT 1 UNION SELECT n + 1 FROM r) SELECT max(n) FROM r"
    with pytest.raises(BadInput, match="did not reach a fixpoint in 3 rounds"):
        run_linear(spark, parse_linear(grows), max_rounds=3)
