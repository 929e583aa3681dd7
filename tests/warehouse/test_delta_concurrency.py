"""Two advisor processes and an outside writer on one Delta table at once: each process (its own
JVM, as users run the CLI) answers the query while the writer commits a DELETE and a MERGE.  No
commit is lost (the warehouse lists every Delta version), no stale sketch is served (every answer
equals plain Spark at the version the run read, and every stored sketch equals a recapture at its
data versions), and a later run answers as plain Spark at the newest version."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from cli_helpers import cli
from delta_writer import Writer

from advisor.context import Context
from advisor.partition.range_partition import load_partition
from advisor.plan.parse import parse_sql
from advisor.sketch.capture import capture, capture_batch
from advisor.warehouse.imports import import_table
from advisor.warehouse.sketch_records import all_sketches

SQL = "SELECT g, sum(v) AS s FROM t GROUP BY g HAVING sum(v) > 38000"
# the DELETE takes g=499 out of the answer, the MERGE's insert brings g=12 in
STEPS = ["DELETE FROM {t} WHERE g = 499 OR (g < 40 AND id % 97 = 0)",
         "MERGE INTO {t} t USING (SELECT id, g, v + 60 AS v FROM {t} WHERE g IN (400, 401) "
         "UNION ALL SELECT 900003L, 12, 50000.0) u ON t.id = u.id "
         "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"]


def _plain(spark, path: str, version: int) -> list:
    spark.read.format("delta").option("versionAsOf", version).load(path).createOrReplaceTempView("conc_plain")
    return sorted(tuple(r) for r in spark.sql(SQL.replace("FROM t", "FROM conc_plain")).collect())


def _advisor(wh: str) -> subprocess.Popen:
    """``advisor run SQL --json`` as a process of its own (few shuffle partitions: a small table)."""
    code = "import sys; from advisor.cli.main import main; main(sys.argv[1:])"
    return subprocess.Popen([sys.executable, "-c", code, "--warehouse", wh, "--master", "local[1]",
                             "--conf", "spark.sql.shuffle.partitions=2",
                             "--conf", "spark.databricks.delta.snapshotPartitions=1", "run", SQL, "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)})


def test_two_processes_and_a_writer_lose_no_commit_and_serve_no_stale_sketch(spark, tmp_path, capsys):
    path, wh = str(tmp_path / "t"), tmp_path / "wh"
    df = spark.range(0, 20000).selectExpr("id", "cast(id % 500 as int) AS g").selectExpr(
        "id", "g", "cast(g * 2 + (id * 7919) % 100 AS double) AS v")
    (df.repartitionByRange(4, "g").write.format("delta").option("delta.enableChangeDataFeed", "true")
     .option("delta.enableDeletionVectors", "true").save(path))
    ctx = Context(wh, spark=spark)
    import_table(ctx.catalog, "t", path, "delta", key=["id"])
    capture(ctx.catalog, parse_sql(SQL, ctx.schema_lookup()), {"t": "g"}, fragments=100)
    ctx.store.close()

    writer = Writer()
    try:
        procs = [_advisor(str(wh)) for _ in range(2)]
        for stmt in STEPS:                      # while the two processes start and run
            writer.commit([(path, stmt)])
        outs = [p.communicate(timeout=900) for p in procs]
    finally:
        writer.close()
    answers = []
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        rec = json.loads(out[out.index("{"):])
        answers.append(sorted(tuple(r) for r in rec["rows"]))
    plain = {v: _plain(spark, path, v) for v in range(len(STEPS) + 1)}
    assert len({tuple(map(tuple, a)) for a in plain.values()}) == len(plain)  # each commit changes the answer
    for a in answers:
        assert a in plain.values()

    ctx = Context(wh, spark=spark)
    assert [v.version for v in ctx.catalog.versions("t")] == [0, 1, 2]   # no commit lost
    code, out, err = cli(["--warehouse", str(wh), "run", SQL, "--json"], capsys)
    assert code == 0, err
    assert sorted(tuple(r) for r in json.loads(out[out.index("{"):])["rows"]) == plain[2]
    q = parse_sql(SQL, ctx.schema_lookup())
    for s in all_sketches(ctx.store):          # every stored sketch is right for its versions
        part = load_partition(ctx.store, s.parts[0].partition_id)
        fresh, _ = capture_batch(ctx.catalog, [(q, {"t": "g"}, {"t": part})], versions=s.data_versions)
        assert fresh[0].parts[0].fragments == s.parts[0].fragments, (s.id, s.how, s.data_versions)
    assert any(s.data_versions == {"t": 2} for s in all_sketches(ctx.store))
