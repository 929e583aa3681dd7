"""Workload files (YAML): what `advisor replay` runs.  Parsing and validation need no Spark.

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

import datetime as dt
import glob
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlglot
import yaml
from sqlglot import exp
from sqlglot.tokens import Tokenizer, TokenType

from advisor.errors import BadInput
from advisor.maintain.policy.policies import make_policy
from advisor.plan.parse import templatize
from advisor.selection.strategies import strategy_draw, unknown_strategy

DATASETS = {"tpch": {"sf"}, "flights": set(), "crimes": {"rows", "seed"}, "topology": {"nodes", "density", "seed"},
            "airports": {"radius_km"}}
TOP_KEYS = {"name", "description", "seed", "datasets", "layouts", "strategies", "policy", "sample_rate",
            "fragments", "measure_recapture", "measured_costs", "queries", "templates", "updates", "sequence", "method",
            "layout_rows_per_file", "warmup", "query_log", "rounds"}
IMPORT_KEYS = ("import", "path", "table", "vega", "format", "key", "schema", "as_of")
IMPORT_FORMATS = ("delta", "parquet", "csv", "orc", "json")  # advisor.warehouse.imports.FORMATS
CHANGE_SUFFIXES = (".parquet", ".csv")  # change files `Catalog.apply_batch` reads
PARAM_KINDS = {"uniform", "choice", "quantile"}


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


class WorkloadChecker:
    def __init__(self, path: str, lines: dict):
        self.path, self.lines = path, lines
        self.base = Path(path).resolve().parent

    def resolve(self, path: str) -> str:
        """A path of the file as an absolute one: URIs as given, relative paths from the file's directory."""
        if "://" in path:
            return path
        q = Path(path).expanduser()
        return str(q if q.is_absolute() else (self.base / q).resolve())

    def fail(self, key: tuple, msg: str):
        line = None
        for n in range(len(key), 0, -1):
            if key[:n] in self.lines:
                line = self.lines[key[:n]]
                break
        dotted = ".".join(str(k) for k in key) or "(top level)"
        raise BadInput(f"{self.path}:{line or 1}: key '{dotted}': {msg}")

    def typed(self, d: dict, key: tuple, k: str, types, default=..., check=None):
        if k not in d:
            if default is ...:
                self.fail(key, f"missing required key '{k}'")
            return default
        v = d[k]
        if v is None and default is not ... and default is None:
            return None
        if isinstance(v, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
            self.fail(key + (k,), f"expected {_tn(types)}, got {v!r}")
        if not isinstance(v, types):
            self.fail(key + (k,), f"expected {_tn(types)}, got {v!r}")
        if check is not None:
            err = check(v)
            if err:
                self.fail(key + (k,), err)
        return v


def _tn(types) -> str:
    ts = types if isinstance(types, tuple) else (types,)
    return " or ".join({"int": "an integer", "float": "a number", "str": "a string", "list": "a list",
                        "dict": "a mapping", "bool": "true/false"}.get(t.__name__, t.__name__) for t in ts)


def load_workload(path: str | Path) -> Workload:
    """Parse and validate a workload file; BadInput (file:line: key: problem) on any error.

    The sections are checked in the order of `SECTIONS`, so the first problem reported is always the
    same one; each section returns the `Workload` fields it validated."""
    p = Path(path)
    text = _read_text(p)
    node, data = _parse_yaml(p, text)
    c = WorkloadChecker(str(p), _lines(node) if node is not None else {})
    c.base = p.resolve().parent  # relative paths in the file are relative to its directory
    _check_top_keys(c, data)
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


def _check_top_keys(c: WorkloadChecker, data) -> None:
    """The file must be a mapping of known top-level keys."""
    if not isinstance(data, dict):
        c.fail((), "a workload file must be a mapping of keys")
    for k in data:
        if k not in TOP_KEYS:
            c.fail((k,), f"unknown key (known: {', '.join(sorted(TOP_KEYS))})")


def _identity(c: WorkloadChecker, data: dict, fields: dict) -> dict:
    """The workload's name and seed."""
    name = c.typed(data, (), "name", str, check=lambda v: None if re.fullmatch(r"[A-Za-z0-9_.-]+", v)
                   else "use letters, digits, '_', '.', '-' only")
    return {"name": name, "seed": c.typed(data, (), "seed", int, 0)}


def _datasets(c: WorkloadChecker, data: dict, fields: dict) -> dict:
    """The datasets to load, each with only the keys its loader takes (a bare name is allowed)."""
    datasets = []
    for i, d in enumerate(c.typed(data, (), "datasets", list, check=lambda v: None if v else "list at least one")):
        key = ("datasets", i)
        if isinstance(d, str):
            d = {"name": d}
        if not isinstance(d, dict):
            c.fail(key, "expected a mapping like {name: tpch, sf: 0.1}")
        if "import" in d:
            datasets.append(_import_entry(c, key, d, datasets))
            continue
        if "name" not in d:
            c.fail(key, "expected {name: DATASET} (generated) or {import: TABLE, path: ..., format: ...}")
        ds = c.typed(d, key, "name", str, check=lambda v: None if v in DATASETS
                     else f"unknown dataset (choose one of: {', '.join(DATASETS)})")
        for k in d:
            if k != "name" and k not in DATASETS[ds]:
                c.fail(key + (k,), f"dataset {ds} takes no key '{k}'")
        if "sf" in d:
            c.typed(d, key, "sf", (int, float), check=lambda v: None if 0 < v <= 100 else "must be in (0, 100]")
        if "rows" in d:
            c.typed(d, key, "rows", int, check=lambda v: None if v > 0 else "must be positive")
        datasets.append(dict(d))
    return {"datasets": datasets}


def _import_entry(c: WorkloadChecker, key: tuple, d: dict, earlier: list[dict]) -> dict:
    """An imported table: exactly one source (path + format, a catalog table, a vega-datasets
    file), an optional key, schema (csv/json) and Delta start version; paths resolved."""
    for k in d:
        if k not in IMPORT_KEYS:
            c.fail(key + (k,), f"unknown key for an import (known: {', '.join(IMPORT_KEYS)})")
    name = c.typed(d, key, "import", str, check=lambda v: None if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v)
                   else "a table name: letters, digits and '_', not starting with a digit").lower()
    if any(e.get("import") == name for e in earlier):
        c.fail(key + ("import",), f"table {name} is imported twice")
    sources = [k for k in ("path", "table", "vega") if k in d]
    if len(sources) != 1:
        c.fail(key, "give exactly one of path (with format), table (a Spark catalog table) or vega (a file name)")
    src = sources[0]
    c.typed(d, key, src, str, check=lambda v: None if v.strip() else "must not be empty")
    fmt = c.typed(d, key, "format", str, None, check=lambda v: None if v.lower() in IMPORT_FORMATS
                  else f"unknown format (choose one of: {', '.join(IMPORT_FORMATS)})")
    fmt = fmt.lower() if fmt else None
    entry = {"import": name, "path": None, "table": None, "vega": None, "format": fmt, "line": c.lines.get(key, 1)}
    if src == "table":
        if fmt is not None:
            c.fail(key + ("format",), "a catalog table has its own format: leave format out")
        entry["table"] = d["table"]
    elif src == "vega":
        entry["vega"] = d["vega"]
        suffix = Path(d["vega"]).suffix.lower().lstrip(".")
        if fmt is None and suffix not in IMPORT_FORMATS[1:]:
            c.fail(key + ("vega",), "cannot tell the format from the file name: give format")
        entry["format"] = fmt or suffix
    else:
        if fmt is None:
            c.fail(key, "missing required key 'format' (delta, parquet, csv, orc or json)")
        entry["path"] = c.resolve(d["path"])
        if "://" not in entry["path"] and not glob.glob(entry["path"]):
            c.fail(key + ("path",), f"no files at {entry['path']}")
    keys = c.typed(d, key, "key", (list, str), None)
    if keys is not None:
        keys = keys.split(",") if isinstance(keys, str) else keys
        if not keys or not all(isinstance(k, str) and k.strip() for k in keys):
            c.fail(key + ("key",), "expected column names, e.g. [id] or \"a,b\"")
        keys = [k.strip().lower() for k in keys]
    entry["key"] = keys
    entry["schema"] = c.typed(d, key, "schema", str, None)
    if entry["schema"] is not None and entry["format"] not in ("csv", "json"):
        c.fail(key + ("schema",), "a schema applies to csv and json files only")
    entry["as_of"] = c.typed(d, key, "as_of", int, None, check=_non_negative)
    if entry["as_of"] is not None and entry["format"] != "delta" and src != "table":
        c.fail(key + ("as_of",), "as_of is a Delta version: it needs format delta or a catalog table")
    return entry


def _layouts(c: WorkloadChecker, data: dict, fields: dict) -> dict:
    """The clustered copies (TABLE.ATTR, lower-cased) and their rows per file."""
    layouts = []
    for i, s in enumerate(c.typed(data, (), "layouts", list, [])):
        if not isinstance(s, str) or s.count(".") != 1:
            c.fail(("layouts", i), f"expected TABLE.ATTR, got {s!r}")
        t, a = s.lower().split(".")
        layouts.append((t, a))
    rows_per_file = c.typed(data, (), "layout_rows_per_file", int, 1_000_000,
                            check=lambda v: None if 100 <= v <= 10_000_000 else "must be between 100 and 10000000")
    return {"layouts": layouts, "layout_rows_per_file": rows_per_file}


def _strategies(c: WorkloadChecker, data: dict, fields: dict) -> dict:
    """The strategies to compare, upper-cased, each known and listed once."""
    strategies = []
    for i, s in enumerate(c.typed(data, (), "strategies", list, ["NO-PS", "CB-OPT-GB"])):
        if not isinstance(s, str) or strategy_draw(s) is None:
            c.fail(("strategies", i), unknown_strategy(s))
        if s.strip().upper() in strategies:
            c.fail(("strategies", i), f"strategy {s} is listed twice")
        strategies.append(s.strip().upper())
    return {"strategies": strategies}


def _settings(c: WorkloadChecker, data: dict, fields: dict) -> dict:
    """The scalar settings of every strategy's run: policy, estimation, measuring and warm-up."""
    return {
        "policy": c.typed(data, (), "policy", str, "lazy", check=_check_policy),
        "sample_rate": float(c.typed(data, (), "sample_rate", (int, float), 0.05,
                                     check=lambda v: None if 0 < v <= 1 else "must be in (0, 1]")),
        "fragments": c.typed(data, (), "fragments", int, None,
                             check=lambda v: None if 1 <= v <= 100_000 else "must be between 1 and 100000"),
        "method": c.typed(data, (), "method", str, "bootstrap", check=_check_method),
        "measure_recapture": c.typed(data, (), "measure_recapture", bool, True),
        "measured_costs": c.typed(data, (), "measured_costs", bool, True),
        "warmup": c.typed(data, (), "warmup", int, 0, check=_non_negative),
    }


def _query_log(c: WorkloadChecker, data: dict, fields: dict) -> dict:
    """The query log's statements (``read_query_log``), when the file replays one."""
    if "query_log" not in data:
        return {"query_log": None, "statements": [], "inputs": {}}
    path = Path(c.resolve(c.typed(data, (), "query_log", str, check=lambda v: None if v.strip() else "is empty")))
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        c.fail(("query_log",), f"cannot read {path}: {getattr(e, 'strerror', None) or e}")
    return {"query_log": str(path), "statements": parse_query_log(text, str(path)),
            "inputs": {"query_log": hashlib.sha256(text.encode()).hexdigest()}}


def read_query_log(path: str | Path) -> list[dict]:
    """The statements of the query log at ``path`` (``parse_query_log``)."""
    p = Path(path)
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"cannot read query log {p}: {getattr(e, 'strerror', None) or e}") from None
    return parse_query_log(text, str(p))


def parse_query_log(text: str, where: str) -> list[dict]:
    """A query log's statements in the order written, as [{sql, at, line, template}]: JSON lines
    when the first entry starts with ``{``, else SQL.  BadInput ``where:LINE: problem`` on a bad
    entry or an empty log."""
    lines = text.splitlines()
    first = next((ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("--")), None)
    if first is None:
        raise BadInput(f"{where}:1: the query log holds no statement")
    got = _json_entries(lines, where) if first.startswith("{") else _sql_entries(text, lines, where)
    for e in got:
        e["template"] = _statement_template(e["sql"], where, e["line"])
    return got


def _json_entries(lines: list[str], where: str) -> list[dict]:
    """One JSON object per line with "sql" and optional "at" (blank and ``--`` lines skipped)."""
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.strip().startswith("--"):
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise BadInput(f"{where}:{n}: invalid JSON ({getattr(e, 'msg', e)} at column "
                           f"{getattr(e, 'colno', '?')})") from None
        if not isinstance(obj, dict):
            raise BadInput(f"{where}:{n}: expected a JSON object with \"sql\", got {type(obj).__name__}")
        if "sql" not in obj:
            raise BadInput(f"{where}:{n}: missing \"sql\" (keys: {', '.join(map(str, obj)) or 'none'})")
        if not isinstance(obj["sql"], str) or not obj["sql"].strip():
            raise BadInput(f"{where}:{n}: \"sql\" must be a non-empty string")
        at = obj.get("at")
        if at is not None and not _valid_at(at):
            raise BadInput(f"{where}:{n}: \"at\" must be an ISO timestamp or a number, got {at!r}")
        out.append({"sql": obj["sql"].strip().rstrip(";").strip(), "at": at, "line": n})
    return out


def _valid_at(at) -> bool:
    if isinstance(at, bool):
        return False
    if isinstance(at, (int, float)):
        return True
    if isinstance(at, str):
        try:
            dt.datetime.fromisoformat(at)
            return True
        except ValueError:
            return False
    return False


def _sql_entries(text: str, lines: list[str], where: str) -> list[dict]:
    """SQL statements: one per line, or ended by ``;`` (and then over any number of lines) when
    the file ends its statements so; whole-line ``--`` comments and blank lines are skipped."""
    try:
        tokens = Tokenizer().tokenize(text)
    except Exception:  # noqa: BLE001 - sqlglot's TokenError: an unterminated quote or comment
        for n, line in enumerate(lines, 1):
            try:
                Tokenizer().tokenize(line)
            except Exception:  # noqa: BLE001
                raise BadInput(f"{where}:{n}: cannot read the statement (an unterminated quote or comment)") from None
        raise BadInput(f"{where}:1: cannot split into statements (an unterminated quote or comment)") from None
    if not any(t.token_type == TokenType.SEMICOLON for t in tokens):
        return [{"sql": ln.strip(), "at": None, "line": n} for n, ln in enumerate(lines, 1)
                if ln.strip() and not ln.strip().startswith("--")]
    out, chunk = [], []
    for tok in tokens + [None]:
        if tok is None or tok.token_type == TokenType.SEMICOLON:
            if chunk:
                start, end = chunk[0].start, chunk[-1].end + 1
                body = [ln for ln in text[start:end].splitlines() if not ln.strip().startswith("--")]
                out.append({"sql": "\n".join(body).strip(), "at": None, "line": chunk[0].line})
            chunk = []
        else:
            chunk.append(tok)
    return out


def _statement_template(sql: str, where: str, line: int) -> str:
    """The statement's template as the parser derives it (literals of WHERE/HAVING/LIMIT as ``?``);
    BadInput ``where:line`` when it is not one SELECT statement (positions made the file's)."""
    hint = " (a missing ';'?)" if "\n" in sql else ""  # only ';'-ended statements span lines
    try:
        trees = [t for t in sqlglot.parse(sql, read="spark") if t is not None]
    except sqlglot.errors.SqlglotError as e:
        msg = str(e).splitlines()[0][:200]
        pos = re.search(r"\.? Line (\d+), Col: (\d+)\.?", msg)
        if pos:
            msg = msg[:pos.start()] + f" at line {line + int(pos.group(1)) - 1}, column {pos.group(2)}"
        raise BadInput(f"{where}:{line}: malformed SQL: {msg}{hint}") from None
    if len(trees) != 1:
        raise BadInput(f"{where}:{line}: expected one SQL statement, got {len(trees)} "
                       "(write one per line, or end each with ';')")
    if not isinstance(trees[0], exp.Query):
        raise BadInput(f"{where}:{line}: only SELECT queries are replayed, got {trees[0].key.upper()}")
    return templatize(trees[0])[0]


def _templates(c: WorkloadChecker, data: dict, fields: dict) -> dict:
    """The query templates by name (at least one); with a query log, its statements' templates."""
    if fields["query_log"] is not None:
        if "templates" in data:
            c.fail(("templates",), "give either 'query_log' or 'templates', not both")
        out: dict[str, Template] = {}
        for e in fields["statements"]:
            if e["template"] in out:
                out[e["template"]].weight += 1
            else:
                out[e["template"]] = Template(e["template"], e["sql"], 1.0, [], e["line"])
        return {"templates": out}
    tdata = c.typed(data, (), "templates", dict, check=lambda v: None if v else "define at least one template")
    return {"templates": {str(tname): _template(c, ("templates", tname), tname, t) for tname, t in tdata.items()}}


def _template(c: WorkloadChecker, key: tuple, tname, t) -> Template:
    """One template: its sql's placeholders and its params must name the same parameters."""
    if not isinstance(t, dict):
        c.fail(key, "expected a mapping with 'sql' (and 'params', 'weight')")
    for k in t:
        if k not in ("sql", "params", "weight"):
            c.fail(key + (k,), "unknown key (known: sql, params, weight)")
    sql = c.typed(t, key, "sql", str)
    weight = float(c.typed(t, key, "weight", (int, float), 1, check=lambda v: None if v > 0 else "must be > 0"))
    params = [_param(c, key + ("params", pn), pn, ps) for pn, ps in (c.typed(t, key, "params", dict, {}) or {}).items()]
    names = set(re.findall(r"\{(\w+)\}", sql))
    declared = {x.name for x in params}
    if names - declared:
        c.fail(key + ("sql",), f"placeholder(s) {', '.join(sorted(names - declared))} have no entry in params")
    if declared - names:
        c.fail(key + ("params",), f"param(s) {', '.join(sorted(declared - names))} do not appear in sql")
    return Template(str(tname), sql, weight, params, c.lines.get(key, 1))


UPDATE_KEYS = ("table", "every", "inserts", "deletes", "changes", "delta_history")


def _updates(c: WorkloadChecker, data: dict, fields: dict) -> dict:
    """The update rules: every N queries a batch of inserts and/or deletes, the next change file of
    a directory, or the next commit of an imported Delta table."""
    updates, inputs = [], dict(fields.get("inputs") or {})
    imports = {d["import"]: d for d in fields["datasets"] if "import" in d}
    for i, u in enumerate(c.typed(data, (), "updates", list, [])):
        key = ("updates", i)
        if not isinstance(u, dict):
            c.fail(key, "expected a mapping {table, every, inserts, deletes} (or changes: DIR, or delta_history: true)")
        for k in u:
            if k not in UPDATE_KEYS:
                c.fail(key + (k,), f"unknown key (known: {', '.join(UPDATE_KEYS)})")
        rule = UpdateRule(c.typed(u, key, "table", str).lower(), c.typed(u, key, "every", int, check=_positive),
                          c.typed(u, key, "inserts", int, 0, check=_non_negative),
                          c.typed(u, key, "deletes", int, 0, check=_non_negative), line=c.lines.get(key, 1))
        src = imports.get(rule.table)
        kinds = [k for k in ("changes", "delta_history") if k in u]
        if len(kinds) > 1 or (kinds and ("inserts" in u or "deletes" in u)):
            c.fail(key, "give one of inserts/deletes, changes or delta_history")
        if "changes" in u:
            rule.changes = _change_files(c, key + ("changes",), c.typed(u, key, "changes", str))
            inputs[f"updates.{i}"] = [[Path(f).name, _digest(Path(f))] for f in rule.changes]
        elif "delta_history" in u:
            if not c.typed(u, key, "delta_history", bool):
                c.fail(key + ("delta_history",), "set delta_history: true, or give inserts/deletes or changes")
            if src is None or (src["format"] != "delta" and src["table"] is None):
                c.fail(key + ("delta_history",), f"table {rule.table} is not imported from a Delta table "
                       "(datasets: - {import: T, path: ..., format: delta})")
            if any(r.delta_history and r.table == rule.table for r in updates):
                c.fail(key + ("delta_history",), f"the commits of {rule.table} are replayed by an earlier rule")
            rule.delta_history = True
        elif rule.inserts + rule.deletes == 0:
            c.fail(key, "a batch needs inserts or deletes")
        if not rule.delta_history and src is not None and src["format"] == "delta":
            c.fail(key, f"table {rule.table} is a Delta table: replay its commits with delta_history: true")
        updates.append(rule)
    return {"updates": updates, "inputs": inputs}


def _digest(p: Path) -> str:
    """A change file's fingerprint: its bytes (a Parquet directory: its files' names and sizes)."""
    h = hashlib.sha256()
    if p.is_dir():
        for f in sorted(p.rglob("*")):
            if f.is_file():
                h.update(f"{f.relative_to(p)}\0{f.stat().st_size}\n".encode())
    else:
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def _change_files(c: WorkloadChecker, key: tuple, path: str) -> list[str]:
    """The change files of a directory (``*.parquet`` files or directories, ``*.csv``) in name order."""
    d = Path(c.resolve(path))
    if not d.is_dir():
        c.fail(key, f"{d} is not a directory of change files")
    files = sorted(str(f) for f in d.iterdir()
                   if f.suffix.lower() in CHANGE_SUFFIXES and not f.name.startswith((".", "_")))
    if not files:
        c.fail(key, f"no change files ({', '.join('*' + s for s in CHANGE_SUFFIXES)}) in {d}")
    return files


def _sequence(c: WorkloadChecker, data: dict, fields: dict) -> dict:
    """The hand-written step order (None when absent), which excludes 'queries' and 'updates'."""
    if "sequence" not in data:
        if "rounds" in data:
            c.fail(("rounds",), "'rounds' repeats a 'sequence': give one")
        return {"sequence": None}
    if fields["query_log"] is not None:
        c.fail(("sequence",), "give either 'query_log' or 'sequence', not both")
    sequence = []
    for i, s in enumerate(c.typed(data, (), "sequence", list, check=lambda v: None if v else "is empty")):
        sequence.append(_sequence_item(c, ("sequence", i), s, fields["templates"]))
    if "queries" in data:
        c.fail(("sequence",), "give either 'sequence' or 'queries', not both")
    rounds = c.typed(data, (), "rounds", int, 1, check=lambda v: None if v >= 1 else "must be >= 1")
    return {"sequence": sequence * rounds}


def _sequence_item(c: WorkloadChecker, key: tuple, s, templates: dict) -> dict:
    """One sequence entry: a query of a defined template or an update batch."""
    if isinstance(s, dict) and set(s) == {"query"} and s["query"] in templates:
        return {"query": s["query"]}
    if isinstance(s, dict) and set(s) == {"update"} and isinstance(s["update"], dict):
        u = s["update"]
        tbl = c.typed(u, key + ("update",), "table", str).lower()
        ins = c.typed(u, key + ("update",), "inserts", int, 0, check=_non_negative)
        dl = c.typed(u, key + ("update",), "deletes", int, 0, check=_non_negative)
        return {"update": {"table": tbl, "inserts": ins, "deletes": dl}}
    c.fail(key, "expected {query: TEMPLATE} naming a defined template, or {update: {table, inserts, deletes}}")


def _queries(c: WorkloadChecker, data: dict, fields: dict) -> dict:
    """The number of query steps to draw (default 20, or 0 with a sequence; a query log's statements)."""
    if fields["query_log"] is not None:
        if "queries" in data:
            c.fail(("queries",), "a query log replays its own statements: leave 'queries' out")
        return {"queries": len(fields["statements"])}
    queries = c.typed(data, (), "queries", int, 20 if fields["sequence"] is None else 0,
                      check=lambda v: None if 1 <= v <= 100_000 else "must be between 1 and 100000")
    return {"queries": queries}


SECTIONS = (_identity, _datasets, _layouts, _strategies, _settings, _query_log, _templates, _updates, _sequence,
            _queries)


def _positive(v) -> str | None:
    return None if v >= 1 else "must be >= 1"


def _non_negative(v) -> str | None:
    return None if v >= 0 else "must be >= 0"


def _check_method(v: str) -> str | None:
    return None if v in ("bootstrap", "clt", "exact") else "must be bootstrap, clt or exact"


def _check_policy(v: str) -> str | None:
    try:
        make_policy(v)
    except (ValueError, KeyError) as e:
        return f"unknown policy ({e}); use eager, lazy, batched:N, batched:Ns or arrival"
    return None


def _param(c: WorkloadChecker, key: tuple, name: str, spec) -> Param:
    if not isinstance(spec, dict) or len(set(spec) & PARAM_KINDS) != 1:
        c.fail(key, f"expected exactly one of {', '.join(sorted(PARAM_KINDS))}")
    kind = next(k for k in spec if k in PARAM_KINDS)
    extra = set(spec) - {kind, "integer"}
    if extra:
        c.fail(key + (sorted(extra)[0],), "unknown key (known: uniform, choice, quantile, integer)")
    integer = c.typed(spec, key, "integer", bool, False)
    v = spec[kind]
    if kind == "uniform":
        if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                             for x in v) and v[0] <= v[1]):
            c.fail(key + (kind,), "expected [low, high] numbers with low <= high")
    elif kind == "choice":
        if not isinstance(v, list) or not v:
            c.fail(key + (kind,), "expected a non-empty list of values")
    else:
        if not isinstance(v, dict) or len(set(v) & {"column", "sql"}) != 1:
            c.fail(key + (kind,), "expected {column: TABLE.COL or sql: SELECT ..., between: [lo, hi]}")
        b = v.get("between", [0.0, 1.0])
        if not (isinstance(b, list) and len(b) == 2 and all(isinstance(x, (int, float)) for x in b)
                and 0 <= b[0] <= b[1] <= 1):
            c.fail(key + (kind, "between"), "expected [lo, hi] with 0 <= lo <= hi <= 1")
        if "column" in v and (not isinstance(v["column"], str) or v["column"].count(".") != 1):
            c.fail(key + (kind, "column"), f"expected TABLE.COL, got {v['column']!r}")
        extra = set(v) - {"column", "sql", "between"}
        if extra:
            c.fail(key + (kind, sorted(extra)[0]), "unknown key (known: column, sql, between)")
    return Param(str(name), kind, v, integer)
