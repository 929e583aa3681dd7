"""The Python API for PySpark users: the advise path (``advisor.serve``) behind one object.

A ten-line session (the test suite runs the same steps against its own SparkSession)::

    from pyspark.sql import SparkSession
    from advisor import Advisor

    spark = (SparkSession.builder.master("local[2]")
             .config(map=Advisor.session_conf()).getOrCreate())    # the confs the advisor wants
    adv = Advisor(spark, warehouse="/tmp/adv")
    adv.add_table("sales", spark.range(100_000).selectExpr("id % 1000 AS shop", "id AS amount"))
    df = adv.sql("SELECT shop, sum(amount) AS s FROM sales GROUP BY shop HAVING sum(amount) > 5e7")
    df.show()                       # a DataFrame: the sketch (if any) is pushed into its scan
    print(adv.last_decision["decision"]["reason"])

``Advisor.run`` does the same eagerly and returns rows, scan metrics and the decision record.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterable

from advisor.context import Context
from advisor.engine.execute import plain_source
from advisor.engine.session import DEFAULT_CONF
from advisor.errors import BadInput
from advisor.maintain.spark.service import maintain_sketch, stale_heads
from advisor.plan.parse import parse_sql
from advisor.plan.read_columns import read_columns
from advisor.plan.to_sql import query_sql
from advisor.selection.recommend import recommend, what_if_params
from advisor.serve.decision_record import one_line
from advisor.serve.query_path import Served, decide_query, serve_query, serve_update
from advisor.serve.settings import AdviseSettings
from advisor.sketch.apply import sketch_source
from advisor.sketch.capture import capture

# Set when the session is built; without them answers are the same, but sketched scans are slower
# (the reason for each is at ``advisor.engine.session.DEFAULT_CONF``).
SPEED_CONFS = ("spark.hadoop.parquet.filter.dictionary.enabled", "spark.hadoop.fs.file.impl",
               "spark.sql.codegen.cache.maxEntries")
# SQL confs the advisor sets on the session it is given (runtime settings, listed in docs/reference/settings.md).
RUNTIME_CONFS = ("spark.sql.constraintPropagation.enabled", "spark.sql.parquet.pushdown.inFilterThreshold",
                 "spark.sql.parquet.filterPushdown", "spark.sql.parquet.outputTimestampType")


class Advisor:
    """Provenance-sketch skipping from PySpark.

    ``spark``: the caller's SparkSession (None: the advisor builds its own, as the CLI does);
    ``warehouse``: the directory of the advisor's store and tables (default ``./.advisor`` or
    ``$ADVISOR_HOME``); ``strategy`` and ``uses`` as for `advisor run`."""

    def __init__(self, spark=None, warehouse: str | Path | None = None, strategy: str = "CB-OPT-GB",
                 uses: float | None = None, master: str | None = None, conf: dict | None = None):
        if spark is not None:
            check_session(spark)
        self.ctx = Context(warehouse, master, conf, spark=spark)
        self.settings = AdviseSettings(strategy=strategy, uses=uses)
        self.last_decision: dict | None = None

    @staticmethod
    def session_conf() -> dict:
        """The confs to build a session with (``SparkSession.builder.config(map=...)``)."""
        return {k: v for k, v in DEFAULT_CONF.items() if not k.startswith("spark.ui") and k != "spark.driver.memory"}

    @property
    def spark(self):
        return self.ctx.spark

    def add_table(self, name: str, df) -> int:
        """Store a DataFrame as the advisor's table ``name`` (version 1); returns its rows."""
        return self.ctx.catalog.create_table(name.lower(), df).rows

    def tables(self) -> list[str]:
        return list(self.ctx.catalog.tables())

    def sql(self, text: str, advise: bool = True):
        """A ``pyspark.sql.DataFrame`` answering ``text``, with the sketch the advise path chose (a
        stored one, or one captured now when the cost model says it pays) pushed into its scans.
        The decision is in ``last_decision`` (scan metrics are filled by ``run``)."""
        dd = decide_query(self.ctx, text, self._settings(advise))
        self.last_decision = dd.rec
        if dd.sketch is not None:
            dd.rec["sketch_id"] = dd.sketch.id
        cat = self.ctx.catalog
        if dd.q is None or dd.answers:  # answered while deciding (capture job, unsupported query)
            res = dd.answers[0]
            return self.spark.createDataFrame([tuple(r) for r in res.rows], schema=self._schema(dd, res))
        source = (plain_source(cat, dd.versions) if dd.sketch is None
                  else sketch_source(cat, dd.sketch, dd.versions, reads=read_columns(dd.q)))
        return self.spark.sql(query_sql(dd.q, source))

    def run(self, text: str, advise: bool = True) -> Served:
        """Answer ``text`` eagerly: ``.rows``, ``.columns``, ``.result.metrics`` and ``.record``
        (the decision record, also kept as ``last_decision``)."""
        served = serve_query(self.ctx, text, self._settings(advise))
        self.last_decision = served.record
        return served

    def explain_decision(self) -> str:
        """The last decision in one sentence (what `advisor run` prints)."""
        if self.last_decision is None:
            raise BadInput("no query has been served yet")
        return one_line(self.last_decision)

    def recommend(self, text: str, sample_rate: float = 0.05, method: str = "bootstrap",
                  capture: bool = False) -> dict:
        """The what-if record of `advisor recommend` (sizes with CIs per candidate, the pick, go/no-go)."""
        return recommend(self.ctx, text, self.settings.strategy, sample_rate, capture=capture, method=method,
                         params=what_if_params(self.settings.uses))

    def capture(self, text: str, on: str | Iterable[str], fragments: int = 1000) -> dict:
        """Capture the sketch of ``text`` on ``table.attr`` (or several); returns the sketch as JSON."""
        specs = [on] if isinstance(on, str) else list(on)
        where = {}
        for sp in specs:
            t, dot, a = sp.lower().partition(".")
            if not dot:
                raise BadInput(f"capture on expects TABLE.ATTR, got {sp!r}")
            where[t] = a
        q = parse_sql(text, self.ctx.schema_lookup())
        return capture(self.ctx.catalog, q, where, fragments).sketch.to_json()

    def apply(self, batch, table: str) -> dict:
        """Apply an insert/delete batch (a file path with an ``op`` column, as `advisor data apply`)
        as the table's next version; sketches are maintained per the policy."""
        v = self.ctx.catalog.apply_batch(table, str(batch))
        maintained = serve_update(self.ctx, v.table, v.n_ins + v.n_del, self.settings)
        return {"table": v.table, "version": v.version, "inserted": v.n_ins, "deleted": v.n_del,
                "rows": v.rows, "maintained": maintained}

    def maintain(self) -> list[dict]:
        """Bring every stale sketch up to date now (incrementally where possible)."""
        cat = self.ctx.catalog
        return [maintain_sketch(cat, s.id).to_json() for s in stale_heads(cat)]

    def close(self) -> None:
        """Close the store (the SparkSession stays the caller's)."""
        self.ctx.store.close()

    def _settings(self, advise: bool) -> AdviseSettings:
        s = self.settings
        return s if advise == s.advise else AdviseSettings(strategy=s.strategy, uses=s.uses, advise=advise)

    def _schema(self, dd, res):
        """The result schema of an answered query: the plain plan's (types as Spark derives them)."""
        if dd.q is None:
            return getattr(res, "schema", None) or self.spark.sql(dd.sql).schema
        return self.spark.sql(query_sql(dd.q, plain_source(self.ctx.catalog, dd.versions))).schema


def check_session(spark) -> None:
    """Refuse a session whose time zone is not UTC (the advisor compares timestamps on the driver in
    UTC), set the runtime SQL confs it needs, and say which speed confs are missing (one line)."""
    tz = spark.conf.get("spark.sql.session.timeZone", None)
    if tz not in ("UTC", "Etc/UTC", "GMT", "Z"):
        raise BadInput(f"the session's spark.sql.session.timeZone is {tz!r}; the advisor needs UTC: build the "
                       "session with .config('spark.sql.session.timeZone', 'UTC')")
    for k in RUNTIME_CONFS:
        spark.conf.set(k, DEFAULT_CONF[k])
    missing = [k for k in SPEED_CONFS if spark.sparkContext.getConf().get(k) != DEFAULT_CONF[k]]
    if missing:
        print(f"advisor: session built without {', '.join(missing)} (queries run slower; build it with "
              ".config(map=Advisor.session_conf()))", file=sys.stderr)
