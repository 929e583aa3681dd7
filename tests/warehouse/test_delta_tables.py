"""Delta Lake tables read in place: a table written with plain Spark is imported, sketched, then
changed by a separate plain Spark writer (INSERT, DELETE, MERGE, UPDATE); the advisor's next run
sees the commits, maintains the sketch from the Change Data Feed (read on the driver from the log),
answers as a plain run does, and the maintained sketch equals a recapture: after every commit, for
a table at a path and one in the Spark catalog (deletion vectors on), and after all four at once
for a table without deletion vectors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import cli
from delta_writer import Writer

from advisor.context import Context
from advisor.partition.range_partition import load_partition
from advisor.plan.parse import parse_sql
from advisor.sketch.capture import capture
from advisor.warehouse.sketch_records import all_sketches

SQL = "SELECT g, sum(v) AS s FROM {t} GROUP BY g HAVING sum(v) > 38000"


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


STEPS = [
    "INSERT INTO {t} VALUES (900001, 7, 999.0), (900002, 8, 50000.0)",            # g=8 joins the result
    # g=499 leaves it; without deletion vectors only the two files touched are rewritten
    "DELETE FROM {t} WHERE g = 499 OR (g < 40 AND id % 97 = 0)",
    "MERGE INTO {t} t USING (SELECT id, g, v + 60 AS v FROM {t} WHERE g IN (400, 401) "
    "UNION ALL SELECT 900003L, 12, 26001.0) u ON t.id = u.id "
    "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",                  # updates and an insert
    "UPDATE {t} SET v = v - 30 WHERE g = 460",                                        # g=460 drops out
]


def _run_json(ctx, sql: str, capsys) -> list:
    code, outp, err = cli(["--warehouse", str(ctx.warehouse), "run", sql, "--json"], capsys)
    assert code == 0, err
    return sorted(tuple(r) for r in json.loads(outp[outp.index("{"):])["rows"])


def _recaptured(ctx, name: str, version: int, partition_id: int) -> frozenset:
    """The sketch captured afresh at ``version`` on the maintained sketch's partition (not stored)."""
    from advisor.sketch.capture import capture_batch

    q = parse_sql(SQL.format(t=name), ctx.schema_lookup())
    part = load_partition(ctx.store, partition_id)
    sk, _ = capture_batch(ctx.catalog, [(q, {name: "g"}, {name: part})], versions={name: version})
    return sk[0].parts[0].fragments


@pytest.fixture(scope="module")
def changed(spark, tmp_path_factory):
    """Three Delta tables in one warehouse, each sketched at version 0: ``dv_on`` (deletion vectors)
    and ``dv_off`` imported by path, ``dv_cat`` (deletion vectors) from the Spark catalog.  A
    separate plain Spark process then commits ``STEPS`` one by one; between two commits the
    advisor runs the query on ``dv_on`` and ``dv_cat`` (which maintains their sketches) and each
    run's answer, plain Spark's, the maintained sketch and a recapture are recorded per version."""
    root = tmp_path_factory.mktemp("delta")
    wh = root / "wh"
    tables = {"dv_on": str(root / "dv_on"), "dv_off": str(root / "dv_off"), "dv_cat": str(root / "dv_cat")}
    for name, path in tables.items():
        _write_table(spark, path, dv=name != "dv_off")
    spark.sql(f"CREATE TABLE delta_cat_t USING delta LOCATION '{tables['dv_cat']}'")
    ctx = Context(wh, spark=spark)
    from advisor.maintain.spark import state_rental
    from advisor.warehouse.imports import import_table

    sketches = {}
    for name, path in tables.items():
        if name == "dv_cat":
            import_table(ctx.catalog, name, None, None, table="delta_cat_t", key=["id"])
        else:
            import_table(ctx.catalog, name, path, "delta", key=["id"])
        q = parse_sql(SQL.format(t=name), ctx.schema_lookup())
        sketches[name] = capture(ctx.catalog, q, {name: "g"}, fragments=100).sketch
    seen: dict = {"dv_on": [], "dv_cat": []}
    writer = Writer()
    try:
        # the policy may first rent a chain by recapturing (no state yet); here the state is bought at
        # once, so each sketch is brought forward from the change feed
        with pytest.MonkeyPatch.context() as mp, _capsys() as cap:
            mp.setattr(state_rental, "should_rent", lambda *a, **k: False)
            for version, stmt in enumerate(STEPS, start=1):
                writer.commit([(path, stmt) for path in tables.values()])
                for name in seen:
                    got = _run_json(ctx, SQL.format(t=name), cap)
                    head = [s for s in all_sketches(ctx.store) if s.data_versions == {name: version}
                            and s.parts[0].table == name]
                    seen[name].append({"version": version, "got": got, "want": _plain(spark, tables[name], name),
                                       "heads": [(s.how, s.parts[0].fragments, s.parts[0].partition_id) for s in head]})
    finally:
        writer.close()
    for name in seen:
        for rec in seen[name]:
            rec["fresh"] = [_recaptured(ctx, name, rec["version"], pid) for _, _, pid in rec["heads"]]
    return ctx, tables, sketches, seen


class _capsys:
    """Captured stdout and stderr for ``cli`` in a module fixture (which cannot take ``capsys``)."""

    def __enter__(self):
        import io
        from contextlib import redirect_stderr, redirect_stdout

        self.out, self.err = io.StringIO(), io.StringIO()
        self._o, self._e = redirect_stdout(self.out), redirect_stderr(self.err)
        self._o.__enter__()
        self._e.__enter__()
        return self

    def readouterr(self):
        from collections import namedtuple

        r = namedtuple("R", "out err")(self.out.getvalue(), self.err.getvalue())
        self.out.truncate(0)
        self.out.seek(0)
        self.err.truncate(0)
        self.err.seek(0)
        return r

    def __exit__(self, *exc):
        self._e.__exit__(*exc)
        self._o.__exit__(*exc)
        return False


@pytest.mark.parametrize("name", ["dv_on", "dv_cat"])
def test_every_commit_between_runs_is_maintained_and_answered_as_plain_spark(changed, name):
    ctx, tables, sketches, seen = changed
    recs = seen[name]
    assert [r["version"] for r in recs] == [1, 2, 3, 4] and ctx.catalog.current_version(name) == 4
    for r in recs:
        assert r["got"] == r["want"], r["version"]
        # one sketch for the version, brought forward from the previous one's, equal to a recapture
        assert [h[0] for h in r["heads"]] == ["maintain"], r["version"]
        assert r["heads"][0][1] == r["fresh"][0], r["version"]
    by_version = {r["version"]: r["want"] for r in recs}
    assert any(r[0] == 8 for r in by_version[1]) and not any(r[0] == 8 for r in _plain_at(ctx, tables[name], 0))
    assert not any(r[0] == 499 for r in by_version[2]) and not any(r[0] == 460 for r in by_version[4])
    assert recs[-1]["heads"][0][1] != sketches[name].parts[0].fragments  # the commits changed which groups qualify
    chain = [s.how for s in all_sketches(ctx.store) if s.parts[0].table == name]
    assert chain == ["capture", "maintain", "maintain", "maintain", "maintain"], chain
    if name == "dv_on":  # the deletes were written as deletion vectors, not file rewrites
        ops = [json.loads(x)["add"] for f in sorted(Path(tables[name], "_delta_log").glob("*.json"))
               for x in f.read_text().splitlines() if '"add"' in x]
        assert any(a.get("deletionVector") for a in ops)


def _plain_at(ctx, path: str, version: int) -> list:
    spark = ctx.spark
    spark.read.format("delta").option("versionAsOf", version).load(path).createOrReplaceTempView("plain_at")
    return sorted(tuple(r) for r in spark.sql(SQL.format(t="plain_at")).collect())


def test_commits_by_another_writer_are_maintained_from_the_change_feed(changed, spark, capsys, monkeypatch):
    """All four commits at once, on a table without deletion vectors: one maintenance step."""
    ctx, tables, sketches, _ = changed
    from advisor.maintain.spark import state_rental

    monkeypatch.setattr(state_rental, "should_rent", lambda *a, **k: False)
    name = "dv_off"
    path, old = tables[name], sketches[name]
    assert ctx.catalog.current_version(name) == 4  # the writer's four commits, seen in the log
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
    assert _recaptured(ctx, name, 4, maintained.partition_id) == maintained.fragments
    assert maintained.fragments != old.parts[0].fragments  # the commits changed which groups qualify


def test_time_travel_reads_an_older_version(changed, capsys):
    ctx, tables, _, _ = changed
    code, outp, err = cli(["--warehouse", str(ctx.warehouse), "run", SQL.format(t="dv_off"), "--as-of", "dv_off=0",
                           "--json", "--no-use"], capsys)
    assert code == 0, err
    rows = json.loads(outp[outp.index("{"):])["rows"]
    assert not any(r[0] == 8 for r in rows) and any(r[0] == 499 for r in rows)


def test_the_advisor_does_not_write_a_delta_table(changed, capsys, tmp_path):
    ctx, tables, _, _ = changed
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
