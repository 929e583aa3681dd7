"""Workload files (YAML): what `advisor replay` runs.  Parsing and validation need no Spark.  Here
the YAML reading; the sections' checks are ``workload_checks``'s, what they build
``workload_model.Workload``, and a query log's statements come from ``query_log``.

A workload names the datasets to load, query templates with parameter distributions, how queries
and update batches interleave, the seed, the strategies to compare and the maintenance policy::

    name: demo                        # required, [A-Za-z0-9_.-]+
    description: free text
    seed: 7                           # every draw (bindings, batches, RAND-* picks) derives from it
    datasets:                         # loaded into the run's own warehouse
      - {name: tpch, sf: 0.1}         # tpch (sf), flights, crimes (rows), topology (nodes, density), airports (radius_km)
      - {name: flights}
    layouts: [lineitem.l_orderkey]    # optional clustered copies (TABLE.ATTR) built before replay
    layout_rows_per_file: 1000000     # rows per file of those copies (row groups stay small)
    strategies: [NO-PS, CB-OPT-GB]    # NO-PS is the reference; any of advisor.selection.strategies.STRATEGIES
                                      # RAND-GB@2: a random strategy's second draw (its picks seeded apart)
    policy: lazy                      # eager | lazy | batched:N | batched:Ns | arrival
    sample_rate: 0.05                 # theta for the stratified sample
    method: bootstrap                 # bootstrap | clt | exact (see advisor.selection.recommend)
    fragments: null                   # fix the granularity; null = chosen by the cost model
    measure_recapture: true           # time a full recapture next to every maintenance, and compare
    measured_costs: true              # decide with costs measured during the replay (advisor.calibration.measured_costs);
                                      # false keeps decisions independent of timing (CI gate baselines)
    warmup: 0                         # untimed: each strategy's process first replays this many steps
                                      # as NO-PS and as CB-OPT-GB in scratch stores (workloads.replay.warmup)
    queries: 30                       # number of query steps drawn from the templates by weight
    templates:
      big_orders:
        weight: 2                     # relative frequency (default 1)
        sql: SELECT l_orderkey, sum(l_quantity) AS q FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > {qty}
        params:                       # {name} in sql is replaced by a drawn SQL literal
          qty: {uniform: [290, 315], integer: true}
          k: {choice: [5, 10, 20]}
          d: {quantile: {column: lineitem.l_shipdate, between: [0.2, 0.8]}}
          c: {quantile: {sql: "SELECT sum(l_quantity) AS v FROM lineitem GROUP BY l_orderkey",
                         between: [0.95, 0.999]}}
    updates:                          # one batch of `inserts`/`deletes` rows after every `every` queries
      - {table: lineitem, every: 5, inserts: 1000, deletes: 200}

``sequence:`` (a list of ``{query: NAME}`` / ``{update: {table, inserts, deletes}}``) may replace
``queries`` to fix the order by hand; ``rounds: N`` replays it N times over; ``updates`` rules given
with it count the sequence's queries (every 15th query of a round-robin dashboard, a Delta table's
next commit).  Quantiles are taken on the data as loaded (before
any batch): q ~ U(between) and the value is the q-quantile of the column (or of the query's single
output column).  Strings become quoted SQL literals, dates ``DATE 'YYYY-MM-DD'``.  Any schema error
raises BadInput naming the file, line and key.

Users' own tables and queries.  A dataset entry may import a table instead of generating one
(``advisor.warehouse.imports``; paths are relative to the workload file's directory)::

    datasets:
      - {import: weather, path: data/seattle-weather.csv, format: csv, key: [date],
         schema: "date DATE, precipitation DOUBLE, temp_max DOUBLE, temp_min DOUBLE, wind DOUBLE, weather STRING"}
      - {import: trips, path: /data/trips, format: delta, key: [trip_id], as_of: 3}  # read in place
      - {import: orders, table: sales.orders}          # a Spark catalog table (Delta: read in place)
      - {import: flights3m, vega: flights-3m.parquet}  # a vega-datasets file (workloads.data.external)

``format`` is one of delta, parquet, csv, orc, json (with ``vega`` it defaults to the file's
suffix); ``key`` names unique columns (a list, or "a,b"); ``schema`` is a DDL schema for csv/json;
``as_of`` is the Delta version to start from.  Update rules may replay users' changes::

    updates:
      - {table: weather, every: 3, changes: changes/}      # change files (Parquet, or CSV with an `op`
                                                           # column, as `advisor data apply` takes),
                                                           # one per update step in file-name order
      - {table: trips, every: 2, delta_history: true}     # the Delta table's own commits, one per step

With ``delta_history`` the table is imported at its first version (``as_of``, default 0) and each
update step moves the replay to the next recorded commit; nothing is written to the table.  A rule
stops when its files or commits run out.  Instead of ``queries`` + ``templates``, ``query_log: FILE``
replays users' statements as written, in order: one SQL statement per line (blank lines and ``--``
comment lines skipped; a file whose statements end with ``;`` may spread them over several lines),
or JSON lines ``{"sql": "...", "at": "2024-05-01T08:00:00"}`` (``at``, an ISO timestamp or a number,
is optional and kept in the step; other fields are ignored).  Each statement's template is the
parser's (``advisor.plan.parse.templatize``); ``every`` in update rules counts statements.  A bad
line raises BadInput naming the log file and line.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import yaml

from advisor.errors import BadInput
from workloads.replay.workload_checks import SECTIONS, WorkloadChecker, check_top_keys
from workloads.replay.workload_model import Workload


def _lines(node, path=(), out=None) -> dict:
    """(key, key, ...) -> 1-based line of every mapping key / sequence item in the YAML node tree."""
    out = {} if out is None else out
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            p = path + (k.value,)
            out[p] = k.start_mark.line + 1
            _lines(v, p, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            out[path + (i,)] = v.start_mark.line + 1
            _lines(v, path + (i,), out)
    return out


def load_workload(path: str | Path) -> Workload:
    """Parse and validate a workload file; BadInput (file:line: key: problem) on any error.

    The sections are checked in the order of `SECTIONS`, so the first problem reported is always the
    same one; each section returns the `Workload` fields it validated."""
    p = Path(path)
    text = _read_text(p)
    node, data = _parse_yaml(p, text)
    c = WorkloadChecker(str(p), _lines(node) if node is not None else {})
    c.base = p.resolve().parent  # relative paths in the file are relative to its directory
    check_top_keys(c, data)
    fields: dict[str, Any] = {}
    for section in SECTIONS:
        fields.update(section(c, data, fields))
    return Workload(path=str(p.resolve()), sha256=hashlib.sha256(text.encode()).hexdigest(),
                    description=str(data.get("description") or ""), raw=data, **fields)


def _read_text(p: Path) -> str:
    """The file's text; BadInput when it cannot be read."""
    try:
        return p.read_text()
    except OSError as e:
        raise BadInput(f"cannot read workload file {p}: {e.strerror or e}") from None


MAX_YAML_BYTES = 1 << 20  # a workload file is a page of settings and templates
MAX_YAML_ALIASES = 32  # anchors are a convenience; many aliases expand to unbounded data ("alias bomb")


def _check_yaml_size(p: Path, text: str) -> None:
    """Refuse a file too large, or with more aliases than ``MAX_YAML_ALIASES``, before building it:
    a kilobyte of nested aliases expands to gigabytes."""
    if len(text.encode("utf-8", "replace")) > MAX_YAML_BYTES:
        raise BadInput(f"{p}: a workload file is at most {MAX_YAML_BYTES >> 20} MiB")
    aliases = 0
    for ev in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(ev, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_YAML_ALIASES:
                raise BadInput(f"{p}:{ev.start_mark.line + 1}: more than {MAX_YAML_ALIASES} YAML aliases "
                               "(*name); write the values out")


def _parse_yaml(p: Path, text: str) -> tuple[Any, Any]:
    """The YAML node tree (for line numbers) and the plain data; BadInput naming the line of a syntax error."""
    try:
        _check_yaml_size(p, text)
        return yaml.compose(text, Loader=yaml.SafeLoader), yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark else str(p)
        raise BadInput(f"{where}: not valid YAML: {getattr(e, 'problem', None) or e}") from None
