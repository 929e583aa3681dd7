"""Delta Lake tables read in place: a table written with plain Spark is imported, sketched, then
changed by a separate plain Spark writer (INSERT, DELETE, MERGE, UPDATE); the advisor's next run
sees the commits, maintains the sketch from the Change Data Feed, answers as a plain run does,
and the maintained sketch equals a recapture.  Once with deletion vectors, once without."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import cli

from advisor.context import Context
from advisor.partition.range_partition import load_partition
from advisor.plan.parse import parse_sql
from advisor.sketch.capture import capture
from advisor.warehouse.sketch_records import all_sketches

SQL = "SELECT g, sum(v) AS s FROM {t} GROUP BY g HAVING sum(v) > 38000"
WRITER = Path(__file__).resolve().parents[1] / "delta_writer.py"


def _write_table(spark, path: str, dv: bool) -> None:
    """20,000 rows in 500 groups; sum(v) grows with g, so the HAVING keeps the top ~10 % of groups,
    and the files are clustered on g, so a sketch on g skips most of them."""
    df = spark.range(0, 20000).selectExpr("id", "cast(id % 500 as int) AS g").selectExpr(
        "id", "g", "cast(g * 2 + (id * 7919) % 100 AS double) AS v")
    (df.repartitionByRange(8, "g").sortWithinPartitions("g").write.format("delta")
     .option("delta.enableChangeDataFeed", "true")
     .option("delta.enableDeletionVectors", str(dv).lower()).save(path))


def _plain(spark, path: str, table: str) -> list:
    spark.read.format("delta").load(path).createOrReplaceTempView(f"plain_{table}")
    return sorted(tuple(r) for r in spark.sql(SQL.format(t=f"plain_{table}")).collect())


@pytest.fixture(scope="module")
def changed(spark, tmp_path_factory):
    """Two Delta tables (deletion vectors on and off) in one warehouse, each sketched at version 0
    and then changed by a separate plain Spark process."""
    root = tmp_path_factory.mktemp("delta")
    wh = root / "wh"
    tables = {"dv_on": str(root / "dv_on"), "dv_off": str(root / "dv_off")}
    for name, path in tables.items():
        _write_table(spark, path, dv=name == "dv_on")
    ctx = Context(wh, spark=spark)
    from advisor.warehouse.imports import import_table

    sketches = {}
    for name, path in tables.items():
        import_table(ctx.catalog, name, path, "delta", key=["id"])
        q = parse_sql(SQL.format(t=name), ctx.schema_lookup())
        sketches[name] = capture(ctx.catalog, q, {name: "g"}, fragments=100).sketch
    stmts = []
    for path in tables.values():
        stmts += [
            (path, "INSERT INTO {t} VALUES (900001, 7, 999.0), (900002, 8, 50000.0)"),  # g=8 joins the result
            # g=499 leaves it; without deletion vectors only the two files touched are rewritten
            (path, "DELETE FROM {t} WHERE g = 499 OR (g < 40 AND id % 97 = 0)"),
            (path, "MERGE INTO {t} t USING (SELECT id, g, v + 60 AS v FROM {t} WHERE g IN (400, 401) "
                   "UNION ALL SELECT 900003L, 12, 26001.0) u ON t.id = u.id "
                   "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"),      # updates and an insert
            (path, "UPDATE {t} SET v = v - 30 WHERE g = 460"),                            # g=460 drops out
        ]
    subprocess.run([sys.executable, str(WRITER), json.dumps(stmts)], check=True, capture_output=True, timeout=1800)
    return ctx, tables, sketches


@pytest.mark.parametrize("name", ["dv_on", "dv_off"])
def test_commits_by_another_writer_are_maintained_from_the_change_feed(changed, spark, capsys, name, monkeypatch):
    ctx, tables, sketches = changed
    # the policy may first rent a chain by recapturing (no state yet); here the state is bought at
    # once, so the sketch is brought forward from the change feed
    from advisor.maintain.spark import state_rental

    monkeypatch.setattr(state_rental, "should_rent", lambda *a, **k: False)
    path, old = tables[name], sketches[name]
    assert ctx.catalog.current_version(name) == 4  # the writer's four commits, seen in the log
    if name == "dv_on":  # the deletes were written as deletion vectors, not file rewrites
        ops = [json.loads(x)["add"] for f in sorted(Path(path, "_delta_log").glob("*.json"))
               for x in f.read_text().splitlines() if '"add"' in x]
        assert any(a.get("deletionVector") for a in ops)
    code, outp, err = cli(["--warehouse", str(ctx.warehouse), "run", SQL.format(t=name), "--json"], capsys)
    assert code == 0, err
    rec = json.loads(outp[outp.index("{"):])
    got = sorted(tuple(r) for r in rec["rows"])
    want = _plain(spark, path, name)
    assert got == want and any(r[0] == 8 for r in want)
    assert not any(r[0] in (460, 499) for r in want)

    chain = [s for s in all_sketches(ctx.store) if s.parent_id == old.id]
    assert len(chain) == 1 and chain[0].how == "maintain" and chain[0].data_versions == {name: 4}
    maintained = chain[0].parts[0]
    part = load_partition(ctx.store, maintained.partition_id)
    q = parse_sql(SQL.format(t=name), ctx.schema_lookup())
    fresh = capture(ctx.catalog, q, {name: "g"}, versions={name: 4}, partitions={name: part}).sketch
    assert fresh.parts[0].fragments == maintained.fragments
    assert fresh.parts[0].fragments != old.parts[0].fragments  # the commits changed which groups qualify


def test_time_travel_reads_an_older_version(changed, capsys):
    ctx, tables, _ = changed
    code, outp, err = cli(["--warehouse", str(ctx.warehouse), "run", SQL.format(t="dv_off"), "--as-of", "dv_off=0",
                           "--json", "--no-use"], capsys)
    assert code == 0, err
    rows = json.loads(outp[outp.index("{"):])["rows"]
    assert not any(r[0] == 8 for r in rows) and any(r[0] == 499 for r in rows)


def test_the_advisor_does_not_write_a_delta_table(changed, capsys, tmp_path):
    ctx, tables, _ = changed
    batch = tmp_path / "b.csv"
    batch.write_text("op,id,g,v\ninsert,1,1,1.0\n")
    code, _, err = cli(["--warehouse", str(ctx.warehouse), "data", "apply", str(batch), "--table", "dv_off"], capsys)
    assert code == 2 and "is a Delta table" in err and "change feed" in err and len(err.strip().splitlines()) == 1
    assert ctx.catalog.current_version("dv_off") == 4


def test_a_gap_in_the_change_feed_is_recaptured(spark, tmp_path, capsys):
    """Commits made while the change feed was off cannot be read as changes: the sketch is
    recaptured instead, and the answer is still the plain one."""
    path = str(tmp_path / "gap")
    _write_table(spark, path, dv=False)
    ctx = Context(tmp_path / "wh", spark=spark)
    from advisor.warehouse.imports import import_table

    import_table(ctx.catalog, "gap", path, "delta", key=["id"])
    q = parse_sql(SQL.format(t="gap"), ctx.schema_lookup())
    old = capture(ctx.catalog, q, {"gap": "g"}, fragments=100).sketch
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES (delta.enableChangeDataFeed = false)")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (900001, 9, 50000.0)")
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    code, outp, err = cli(["--warehouse", str(ctx.warehouse), "run", SQL.format(t="gap"), "--json"], capsys)
    assert code == 0, err
    rows = sorted(tuple(r) for r in json.loads(outp[outp.index("{"):])["rows"])
    assert rows == _plain(spark, path, "gap") and any(r[0] == 9 for r in rows)
    chain = [s for s in all_sketches(ctx.store) if s.parent_id == old.id]
    assert [s.how for s in chain] == ["recapture"] and chain[0].data_versions == {"gap": 3}
