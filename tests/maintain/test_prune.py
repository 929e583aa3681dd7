"""Column pruning of the maintenance plan (pure, no Spark): scans keep what is read above them,
the sketched attribute, and everything under DISTINCT / top-k."""

from __future__ import annotations

from advisor.maintain.prune import prune
from advisor.plan import ir
from advisor.plan.parse import parse_sql

SCHEMA = {"lineitem": [("l_orderkey", "bigint"), ("l_quantity", "bigint"), ("l_comment", "string"),
                       ("l_suppkey", "bigint")],
          "orders": [("o_orderkey", "bigint"), ("o_orderpriority", "string"), ("o_comment", "string")]}


def _scans(node):
    return {n.table: [c.source for c in n.cols] for n in node.walk() if isinstance(n, ir.Scan)}


def _q(sql):
    return parse_sql(sql, lambda t: SCHEMA[t]).root


def test_join_scans_keep_keys_filters_and_groups_only():
    root = _q("SELECT o.o_orderpriority, count(*) AS n FROM lineitem l JOIN orders o ON l.l_orderkey = o.o_orderkey "
              "WHERE l.l_quantity > 49 GROUP BY o.o_orderpriority HAVING count(*) > 10")
    out = prune(root)
    assert _scans(out) == {"lineitem": ["l_orderkey", "l_quantity"], "orders": ["o_orderkey", "o_orderpriority"]}
    assert out.names == root.names


def test_sketched_attribute_is_kept_and_count_star_keeps_a_column():
    root = _q("SELECT count(*) AS n FROM lineitem")
    keep = {c.name for n in root.walk() if isinstance(n, ir.Scan) for c in n.cols if c.source == "l_suppkey"}
    assert _scans(prune(root, keep)) == {"lineitem": ["l_suppkey"]}
    assert len(_scans(prune(root))["lineitem"]) == 1


def test_distinct_keeps_its_projection_and_topk_keeps_every_attribute():
    root = _q("SELECT DISTINCT l_orderkey, l_suppkey FROM lineitem WHERE l_quantity > 3")
    assert _scans(prune(root))["lineitem"] == ["l_orderkey", "l_quantity", "l_suppkey"]
    top = _q("SELECT * FROM lineitem ORDER BY l_quantity DESC LIMIT 3")
    assert _scans(prune(top))["lineitem"] == ["l_orderkey", "l_quantity", "l_comment", "l_suppkey"]
