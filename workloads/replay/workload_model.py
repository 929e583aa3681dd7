"""What a checked workload file is (``Workload``, with its ``Template``s, ``Param``s and
``UpdateRule``s): built by the file's parsing and validation (``workload_file``,
``workload_checks``) and read by the step generation (``step_list``) and the replay.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp


@dataclass
class Param:
    name: str
    kind: str                      # uniform | choice | quantile
    spec: Any
    integer: bool = False


@dataclass
class Template:
    name: str
    sql: str
    weight: float
    params: list[Param]
    line: int


@dataclass
class UpdateRule:
    """A batch every ``every`` queries: ``inserts``/``deletes`` drawn rows, the next of the
    ``changes`` files, or the next commit of a Delta table (``delta_history``)."""
    table: str
    every: int
    inserts: int
    deletes: int
    changes: list[str] | None = None   # change files, in the order they are applied
    delta_history: bool = False
    line: int = 1

    @property
    def limit(self) -> int | None:
        """How many update steps the rule can feed, when the file says (its change files)."""
        return len(self.changes) if self.changes is not None else None


PLAN_KEYS = ("seed", "datasets", "layouts", "layout_rows_per_file", "queries", "templates", "updates", "sequence",
             "rounds")


@dataclass
class Workload:
    name: str
    path: str
    sha256: str
    description: str
    seed: int
    datasets: list[dict]
    layouts: list[tuple[str, str]]
    layout_rows_per_file: int
    strategies: list[str]
    policy: str
    sample_rate: float
    fragments: int | None
    method: str
    measure_recapture: bool
    queries: int
    templates: dict[str, Template]
    updates: list[UpdateRule]
    sequence: list[dict] | None
    raw: dict = field(repr=False, default_factory=dict)
    measured_costs: bool = True
    warmup: int = 0
    query_log: str | None = None       # the query log's path, when it replaces queries + templates
    statements: list[dict] = field(default_factory=list)  # its entries: {sql, at, line, template}
    inputs: dict = field(default_factory=dict)  # digests of the query log and change files

    def tables_read(self, known: list[str]) -> list[str]:
        """The tables of ``known`` that the workload's queries, parameter queries or updates name
        (every known table when a query log supplies the statements): the ones worth statistics.

        >>> t = Template("t", "SELECT a FROM lineitem JOIN orders ON a = b WHERE c > {c}", 1.0, [], 1)
        >>> w = Workload("w", "w.yaml", "", "", 1, [], [], 1, [], "lazy", 0.05, None, "bootstrap", False, 1,
        ...              {"t": t}, [], None)
        >>> w.tables_read(["customer", "lineitem", "nation", "orders"])
        ['lineitem', 'orders']
        """
        if self.query_log is not None:
            return list(known)
        texts = [t.sql for t in self.templates.values()]
        texts += [p.spec["sql"] for t in self.templates.values() for p in t.params
                  if p.kind == "quantile" and isinstance(p.spec, dict) and "sql" in p.spec]
        names = {u.table for u in self.updates}
        names |= {p.spec["column"].split(".")[0] for t in self.templates.values() for p in t.params
                  if p.kind == "quantile" and isinstance(p.spec, dict) and "column" in p.spec}
        for text in texts:
            try:
                tree = sqlglot.parse_one(re.sub(r"\{[^}]*\}", "0", text), read="spark")
            except sqlglot.errors.ParseError:
                return list(known)
            names |= {t.name.lower() for t in tree.find_all(exp.Table)}
        return [t for t in known if t.lower() in names]

    @property
    def plan_sha256(self) -> str:
        """Fingerprint of what ``replay.prepare`` builds from the file (data, layouts, statistics,
        the job-cost probe, the drawn steps and batches): a prepared run directory serves every file
        that agrees on these keys, whatever its strategies, policy, estimation or warm-up."""

        keys = {k: self.raw.get(k) for k in PLAN_KEYS}
        keys["measured_costs"] = self.measured_costs  # decides whether the probe is recorded
        if self.inputs:  # the files the steps come from: another query log or change file, other steps
            keys["inputs"] = self.inputs
        return hashlib.sha256(json.dumps(keys, sort_keys=True, default=str).encode()).hexdigest()
