"""Which recursive queries are recognised, which are named unsupported (they run without a
sketch), which are malformed (bad input), and the `advisor explain`/`run` contract for them."""

from __future__ import annotations

import json

import pytest
from cli_helpers import cli

from advisor.errors import BadInput, Unsupported
from advisor.recursive.shape import recognise

BASE = "SELECT src, dst FROM link"
STEP = "SELECT l.src, r.dst FROM link l JOIN r ON l.dst = r.src"


def q(body: str, outer: str = "SELECT * FROM r", cols: str = "r(src, dst)") -> str:
    return f"WITH RECURSIVE {cols} AS ({body}) {outer}"


def test_linear_shapes_in_both_directions_with_bounds_and_selections():
    s = recognise(q(f"{BASE} UNION {STEP}"))
    assert (s.forward, s.cost_col, s.max_hops, s.sources, s.kind) == (False, None, None, None, "all")
    s = recognise(
        q(
            "SELECT src, dst, cost, 1 FROM link WHERE src IN (1, 2) UNION SELECT p.src, l.dst, "
            "p.cost + l.cost, p.hops + 1 FROM p, link l WHERE p.dst = l.src AND p.hops <= 4",
            "SELECT src, dst, MAX(hops), MIN(cost) FROM p WHERE src = 2 GROUP BY src, dst",
            "p(src, dst, cost, hops)",
        )
    )
    assert (s.forward, s.cost_col, s.max_hops, s.sources, s.kind) == (
        True,
        "cost",
        5,
        frozenset({2}),
        "minmax",
    )
    assert set(s.aggregates) == {("max", "hops"), ("min", "cost")}
    # a selection that is not on the source keeps every view tuple (no MIN/MAX shortcut)
    s = recognise(
        q(
            "SELECT src, dst, cost, 1 FROM link UNION SELECT p.src, l.dst, p.cost + l.cost, p.hops + 1 "
            "FROM p JOIN link l ON p.dst = l.src WHERE p.hops < 3",
            "SELECT src, dst, MIN(cost) FROM p WHERE hops > 1 GROUP BY src, dst",
            "p(src, dst, cost, hops)",
        )
    )
    assert s.kind == "all"


@pytest.mark.parametrize(
    "sql, needle",
    [
        (q(f"{BASE} UNION ALL {STEP}"), "UNION ALL"),
        (q(f"{BASE} UNION {STEP} WHERE NOT EXISTS (SELECT 1 FROM down d WHERE d.src = l.src)"), "negation"),
        (
            "WITH RECURSIVE a(x) AS (SELECT src FROM link UNION SELECT y FROM b), "
            "b(y) AS (SELECT dst FROM link "
            "UNION SELECT x FROM a) SELECT * FROM a",
            "mutual",
        ),
        (
            q(
                f"{BASE} UNION SELECT l.src, r.dst FROM link l JOIN r ON l.dst = r.src "
                "JOIN other o ON o.a = l.src"
            ),
            "joins other tables",
        ),
        (
            q(
                "SELECT src, dst, cost, 1 FROM link UNION "
                "SELECT p.src, l.dst, p.cost + l.cost, p.hops + 1 FROM p "
                "JOIN link l ON p.dst = l.src",
                cols="p(src, dst, cost, hops)",
            ),
            "without a hop bound",
        ),
        (
            q(f"{BASE} UNION {STEP}", "SELECT r.src, n.name FROM r JOIN nodes n ON n.id = r.dst"),
            "joins the recursive view",
        ),
    ],
)
def test_other_recursive_shapes_are_named_unsupported(sql, needle):
    with pytest.raises(Unsupported, match=needle):
        recognise(sql)


@pytest.mark.parametrize(
    "sql, needle",
    [
        (q(STEP), "no base case"),
        (q(f"{STEP} UNION SELECT r.src, l.dst FROM r JOIN link l ON r.dst = l.src"), "no base case"),
        (q(f"{BASE} UNION SELECT a.src, b.dst FROM r a JOIN r b ON a.dst = b.src"), "non-linear"),
    ],
)
def test_malformed_recursion_is_bad_input(sql, needle):
    with pytest.raises(BadInput, match=needle) as e:
        recognise(sql)
    assert not isinstance(e.value, Unsupported)


def test_explain_names_an_unsupported_shape_and_exits_0(tmp_path, capsys):
    code, out, err = cli(
        ["--warehouse", str(tmp_path), "explain", "--json", q(f"{BASE} UNION ALL {STEP}")], capsys
    )
    info = json.loads(out)
    assert code == 0 and not info["supported"] and "UNION ALL" in info["reason"]
    code, out, err = cli(
        [
            "--warehouse",
            str(tmp_path),
            "explain",
            q(f"{BASE} UNION {STEP} WHERE NOT EXISTS (SELECT 1 FROM d WHERE d.x = l.src)"),
        ],
        capsys,
    )
    assert code == 0 and "negation in the recursion" in out


@pytest.mark.parametrize(
    "sql", [q(STEP), q(f"{BASE} UNION SELECT a.src, b.dst FROM r a JOIN r b ON a.dst = b.src")]
)
def test_explain_of_malformed_recursion_exits_2_with_one_line(tmp_path, capsys, sql):
    code, out, err = cli(["--warehouse", str(tmp_path), "explain", sql], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and err.startswith("error: ")


def test_explain_gives_verdicts_for_a_supported_shape(tmp_path, capsys):
    sql = q(
        "SELECT src, dst, cost, 1 FROM link WHERE src = 3 UNION "
        "SELECT p.src, l.dst, p.cost + l.cost, p.hops + 1 "
        "FROM p JOIN link l ON p.dst = l.src WHERE p.hops < 4",
        "SELECT src, dst, MIN(cost) FROM p GROUP BY src, dst",
        "p(src, dst, cost, hops)",
    )
    code, out, _ = cli(["--warehouse", str(tmp_path), "explain", "--json", sql], capsys)
    info = json.loads(out)
    assert code == 0 and info["supported"] and info["recursive"]
    cands = {c["attr"]: c for c in info["tables"][0]["candidates"]}
    assert cands["src"]["safe"] and "Z3 proved" in cands["src"]["reason"]


@pytest.mark.parametrize("func", ["min", "max"])
def test_z3_proves_the_arg_extreme_rule_and_refutes_its_weaker_forms(func):
    from advisor.recursive.proof import min_lemma

    v = min_lemma(4, func)
    assert v.safe
    proved = [d for d in v.details if d.endswith("proved")]
    refuted = [d for d in v.details if "refuted" in d]
    assert len(proved) == 2 and len(refuted) == 3
    assert any("any one kept tuple" in d for d in refuted) and any("COUNT" in d for d in refuted)


def test_the_non_recursive_planner_names_a_recursive_query_unsupported_instead_of_looping():
    from advisor.plan.parse import parse_sql

    with pytest.raises(Unsupported, match="recursive CTE"):
        parse_sql(q(f"{BASE} UNION {STEP}"), {"link": [("src", "bigint"), ("dst", "bigint")]}.get)


def test_node_sets_in_both_directions_and_link_selections_are_recognised():
    fwd = recognise(
        "WITH RECURSIVE reach(node) AS (SELECT dst FROM link WHERE src = 0 UNION SELECT l.dst FROM reach r "
        "JOIN link l ON l.src = r.node) SELECT node FROM reach"
    )
    assert (fwd.nodes, fwd.src_col, fwd.dst_col, fwd.sources, fwd.step_filter) == (True, "src", "dst", {0}, None)
    back = recognise(
        "WITH RECURSIVE up(node, hops) AS (SELECT src, 1 FROM link WHERE dst IN (3, 4) AND cost > 1 UNION "
        "SELECT l.src, u.hops + 1 FROM up u, link l WHERE l.dst = u.node AND u.hops < 5 AND l.cost <> 50) "
        "SELECT node, MIN(hops) FROM up GROUP BY node"
    )
    assert (back.src_col, back.dst_col, back.sources, back.max_hops) == ("dst", "src", {3, 4}, 5)
    assert (back.base_filter, back.step_filter, back.kind) == ("(cost > 1)", "(cost <> 50)", "minmax")
    pairs = recognise(q(f"{BASE} WHERE dst = 2 UNION {STEP} WHERE l.cost < 9"))
    assert (pairs.nodes, pairs.base_targets, pairs.step_filter) == (False, {2}, "(cost < 9)")


@pytest.mark.parametrize(
    "sql, needle",
    [
        ("WITH RECURSIVE r(n) AS (SELECT 0 UNION SELECT l.dst FROM r JOIN link l ON l.src = r.n) SELECT * FROM r",
         "does not read one link table"),
        ("WITH RECURSIVE r(n) AS (SELECT dst FROM link UNION SELECT l.dst FROM r JOIN link l ON l.src = r.n "
         "WHERE l.cost < r.n) SELECT * FROM r", "condition"),
    ],
)
def test_node_set_shapes_outside_the_sketch_family_are_named(sql, needle):
    with pytest.raises(Unsupported, match=needle):
        recognise(sql)
