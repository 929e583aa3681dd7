"""Recursive queries as analysts write them, end to end on Spark: the textbook node-set query and
its variants (backward, pairs, hop-bounded, a selection in the step, and a shape no sketch covers)
through `advisor run --file`, `advisor run` and the Python API, before and after a batch of link
deletions and insertions; every answer equals networkx's on the link table as it then is."""

from __future__ import annotations

import json

import networkx as nx
from cli_helpers import cli

REACH = (
    "WITH RECURSIVE reach(node) AS (SELECT dst FROM link WHERE src = 0 UNION SELECT l.dst FROM reach r "
    "JOIN link l ON l.src = r.node) SELECT node FROM reach"
)
QUERIES = {
    "nodes": REACH,
    "backward": "WITH RECURSIVE up(node) AS (SELECT src FROM link WHERE dst = 3 UNION SELECT l.src FROM up u "
    "JOIN link l ON l.dst = u.node) SELECT node FROM up",
    "pairs": "WITH RECURSIVE r(src, dst) AS (SELECT src, dst FROM link WHERE src IN (0, 5) UNION SELECT r.src, "
    "l.dst FROM r JOIN link l ON r.dst = l.src) SELECT src, dst FROM r",
    "hops": "WITH RECURSIVE reach(node, hops) AS (SELECT dst, 1 FROM link WHERE src = 0 UNION SELECT l.dst, "
    "r.hops + 1 FROM reach r JOIN link l ON l.src = r.node WHERE r.hops < 3) SELECT node, MIN(hops) AS h "
    "FROM reach GROUP BY node",
    "step selection": "WITH RECURSIVE reach(node) AS (SELECT dst FROM link WHERE src = 0 UNION SELECT l.dst "
    "FROM reach r JOIN link l ON l.src = r.node WHERE l.cost < 10) SELECT node FROM reach",
    "pairs within 3 hops": "WITH RECURSIVE r(src, dst, hops) AS (SELECT src, dst, 1 FROM link WHERE src = 5 "
    "UNION SELECT r.src, l.dst, r.hops + 1 FROM r JOIN link l ON r.dst = l.src WHERE r.hops < 3) "
    "SELECT DISTINCT dst FROM r",
}
# no sketch shape covers a base without a link table: it runs in the semi-naive loop on Spark
UNSKETCHED = (
    "WITH RECURSIVE reach(node) AS (SELECT 0 UNION SELECT l.dst FROM reach r JOIN link l "
    "ON l.src = r.node) SELECT node FROM reach"
)


def truth(links: dict, name: str) -> set:
    """The answer of ``QUERIES[name]`` by networkx on link(src, dst, cost)."""
    g = nx.MultiDiGraph()
    g.add_nodes_from(set(links["src"]) | set(links["dst"]))
    edges = list(zip(links["src"], links["dst"], links["cost"]))
    g.add_edges_from((s, d) for s, d, _ in edges)
    after_one = lambda g, s: {n for f in g.successors(s) for n in nx.descendants(g, f) | {f}}  # noqa: E731
    if name == "nodes":
        return {(n,) for n in after_one(g, 0)}
    if name == "backward":
        return {(n,) for n in after_one(g.reverse(), 3)}
    if name == "pairs":
        return {(s, d) for s in (0, 5) for d in after_one(g, s)}
    if name in ("hops", "pairs within 3 hops"):
        best: dict = {}
        frontier = {0 if name == "hops" else 5}
        for h in (1, 2, 3):  # nodes at the end of a walk of h links
            frontier = {d for s in frontier for d in g.successors(s)}
            for d in frontier:
                best.setdefault(d, h)
        return set(best.items()) if name == "hops" else {(d,) for d in best}
    if name == "step selection":
        cheap = nx.MultiDiGraph()
        cheap.add_nodes_from(g)
        cheap.add_edges_from((s, d) for s, d, c in edges if c < 10)
        return {(d,) for f in g.successors(0) for d in nx.descendants(cheap, f) | {f}}
    return {(n,) for n in nx.descendants(g, 0) | {0}}


def current_links(wh) -> dict:
    from advisor.warehouse.catalog import Catalog
    from advisor.warehouse.store import Store

    return Catalog.offline(Store(wh)).read_arrow("link").to_pydict()


def check_file(wh, path, capsys, names) -> list:
    code, out, err = cli(["--warehouse", wh, "run", "--file", str(path), "--json", "--show", "100000"], capsys)
    assert code == 0, err
    recs = json.loads(out)["queries"]
    links = current_links(wh)
    assert len(recs) == len(names)
    for name, rec in zip(names, recs):
        assert {tuple(r) for r in rec["answer"]["rows"]} == truth(links, name), name
    return [r["decision"] for r in recs]


def test_every_variant_answers_like_networkx_before_and_after_a_batch_through_cli_and_api(spark, tmp_path, capsys):
    wh = str(tmp_path)
    assert cli(["--warehouse", wh, "data", "load", "topology", "--nodes", "30", "--seed", "3"], capsys)[0] == 0
    qfile, first_file = tmp_path / "queries.sql", tmp_path / "first.sql"
    qfile.write_text(";\n".join(QUERIES.values()) + ";\n")
    first_file.write_text(";\n".join([*QUERIES.values(), UNSKETCHED]) + ";\n")
    first = check_file(wh, first_file, capsys, [*QUERIES, "unsketched"])
    assert [d["action"] for d in first[:-1]] == ["capture"] * len(QUERIES)
    assert first[-1]["action"] == "unsupported" and "semi-naive loop" in first[-1]["reason"]
    batch = str(tmp_path / "b1")
    args = ["data", "make-batch", "link", "--out", batch, "--inserts", "3", "--deletes", "6", "--seed", "2"]
    assert cli(["--warehouse", wh, *args], capsys)[0] == 0
    assert cli(["--warehouse", wh, "data", "apply", batch, "--table", "link"], capsys)[0] == 0
    again = check_file(wh, qfile, capsys, list(QUERIES))
    assert all(d["action"] == "reuse" and "maintained" in d["reason"] for d in again)
    code, out, _ = cli(["--warehouse", wh, "run", "--json", REACH], capsys)
    assert code == 0 and {tuple(r) for r in json.loads(out)["rows"]} == truth(current_links(wh), "nodes")
    from advisor.api import Advisor

    adv = Advisor(spark, warehouse=wh)
    got = {tuple(r) for r in adv.sql(QUERIES["backward"]).collect()}
    assert got == truth(current_links(wh), "backward")


def test_explain_names_the_plan_and_refuses_what_no_loop_evaluates(spark, tmp_path, capsys):
    wh = str(tmp_path)
    code, out, _ = cli(["--warehouse", wh, "explain", "--json", REACH], capsys)
    info = json.loads(out)
    assert code == 0 and info["supported"]
    assert any("node set" in p for p in info["plan"]) and any("semi-naive" in p for p in info["plan"])
    code, out, _ = cli(["--warehouse", wh, "explain", "--json", UNSKETCHED], capsys)
    info = json.loads(out)
    assert code == 0 and not info["supported"] and "semi-naive loop on Spark" in info["plan"][0]
    nonlinear = (
        "WITH RECURSIVE r(s, d) AS (SELECT src, dst FROM link UNION SELECT a.s, b.d FROM r a JOIN r b "
        "ON a.d = b.s) SELECT * FROM r"
    )
    mutual = (
        "WITH RECURSIVE a(x) AS (SELECT src FROM link UNION SELECT y FROM b), b(y) AS (SELECT dst FROM link "
        "UNION SELECT x FROM a) SELECT * FROM a"
    )
    for sql, needle in ((nonlinear, "non-linear"), (mutual, "mutual")):
        code, out, err = cli(["--warehouse", wh, "run", sql], capsys)
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1
        assert "Spark rejected" not in err
