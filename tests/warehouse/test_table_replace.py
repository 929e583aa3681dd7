"""Dropping or replacing a table takes the sketches and decisions that read it out of use (a real
store and Spark): a table created again restarts at version 1, which old sketches would match."""

from __future__ import annotations

from diffgen import make_facts
from sketch_helpers import clustered_sketch

from advisor.layout.clustered_copy import build_layout
from advisor.sketch.lookup import usable_sketches

SQL = "SELECT g1, sum(v) AS a FROM facts GROUP BY g1 HAVING sum(v) < 300"


def test_a_replaced_table_retires_the_sketches_and_decisions_that_read_it(spark, tmp_path):
    """Created again under the same name, a table restarts at version 1: the old sketch's data
    version would match, and its fragments (of data that is gone) would filter the new rows."""
    from advisor.selection.decision_memory import recall, remember
    from advisor.sketch.run import run_query

    cat, q, parts, sk = clustered_sketch(spark, tmp_path, SQL)
    remember(cat.store, q.template, "CB-OPT-GB", go=True, reason="go", table="facts", attr="g1",
             partition_id=parts["facts"].id, horizon=5.0, step="1")
    assert [s.id for s in usable_sketches(cat, q, {"facts": 1})[0]] == [sk.id]
    cat.create_table("facts", spark.createDataFrame(make_facts(9, 300)))
    build_layout(cat, "facts", "g1", rows_per_file=50)
    good, _ = usable_sketches(cat, q, {"facts": 1})
    assert good == [] and recall(cat.store, q.template, "CB-OPT-GB") is None
    plain = run_query(cat, q, {"facts": 1})
    expected = spark.sql("SELECT g1, sum(v) FROM parquet.`%s` GROUP BY g1 HAVING sum(v) < 300"
                         % cat.version("facts", 1).base_path).collect()
    assert sorted(plain.rows) == sorted(tuple(r) for r in expected) and plain.rows
