"""Workload files (YAML): what `advisor replay` runs.  Parsing and validation need no Spark.

A workload names the datasets to load, query templates with parameter distributions, how queries
and update batches interleave, the seed, the strategies to compare and the maintenance policy::

    name: demo                        # required, [A-Za-z0-9_.-]+
    description: free text
    seed: 7                           # every draw (bindings, batches, RAND-* picks) derives from it
    datasets:                         # loaded into the run's own warehouse
      - {name: tpch, sf: 0.1}         # tpch (sf), flights, crimes (rows)
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
``queries`` + ``updates`` to fix the order by hand.  Quantiles are taken on the data as loaded (before
any batch): q ~ U(between) and the value is the q-quantile of the column (or of the query's single
output column).  Strings become quoted SQL literals, dates ``DATE 'YYYY-MM-DD'``.  Any schema error
raises BadInput naming the file, line and key.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from advisor.errors import BadInput
from advisor.maintain.policy.policies import make_policy
from advisor.selection.strategies import strategy_draw, unknown_strategy

DATASETS = {"tpch": {"sf"}, "flights": set(), "crimes": {"rows", "seed"}}
TOP_KEYS = {"name", "description", "seed", "datasets", "layouts", "strategies", "policy", "sample_rate",
            "fragments", "measure_recapture", "measured_costs", "queries", "templates", "updates", "sequence", "method",
            "layout_rows_per_file", "warmup"}
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
    table: str
    every: int
    inserts: int
    deletes: int


PLAN_KEYS = ("seed", "datasets", "layouts", "layout_rows_per_file", "queries", "templates", "updates", "sequence")


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

    @property
    def plan_sha256(self) -> str:
        """Fingerprint of what ``replay.prepare`` builds from the file (data, layouts, statistics,
        the job-cost probe, the drawn steps and batches): a prepared run directory serves every file
        that agrees on these keys, whatever its strategies, policy, estimation or warm-up."""

        keys = {k: self.raw.get(k) for k in PLAN_KEYS}
        keys["measured_costs"] = self.measured_costs  # decides whether the probe is recorded
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


def _parse_yaml(p: Path, text: str) -> tuple[Any, Any]:
    """The YAML node tree (for line numbers) and the plain data; BadInput naming the line of a syntax error."""
    try:
        return yaml.compose(text), yaml.safe_load(text)
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


def _templates(c: WorkloadChecker, data: dict, fields: dict) -> dict:
    """The query templates by name (at least one)."""
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


def _updates(c: WorkloadChecker, data: dict, fields: dict) -> dict:
    """The update rules: a batch of inserts and/or deletes every N queries."""
    updates = []
    for i, u in enumerate(c.typed(data, (), "updates", list, [])):
        key = ("updates", i)
        if not isinstance(u, dict):
            c.fail(key, "expected a mapping {table, every, inserts, deletes}")
        for k in u:
            if k not in ("table", "every", "inserts", "deletes"):
                c.fail(key + (k,), "unknown key (known: table, every, inserts, deletes)")
        updates.append(UpdateRule(c.typed(u, key, "table", str).lower(),
                                  c.typed(u, key, "every", int, check=_positive),
                                  c.typed(u, key, "inserts", int, 0, check=_non_negative),
                                  c.typed(u, key, "deletes", int, 0, check=_non_negative)))
        if updates[-1].inserts + updates[-1].deletes == 0:
            c.fail(key, "a batch needs inserts or deletes")
    return {"updates": updates}


def _sequence(c: WorkloadChecker, data: dict, fields: dict) -> dict:
    """The hand-written step order (None when absent), which excludes 'queries' and 'updates'."""
    if "sequence" not in data:
        return {"sequence": None}
    sequence = []
    for i, s in enumerate(c.typed(data, (), "sequence", list, check=lambda v: None if v else "is empty")):
        sequence.append(_sequence_item(c, ("sequence", i), s, fields["templates"]))
    if "queries" in data or "updates" in data:
        c.fail(("sequence",), "give either 'sequence' or 'queries'/'updates', not both")
    return {"sequence": sequence}


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
    """The number of query steps to draw (default 20, or 0 with a sequence)."""
    queries = c.typed(data, (), "queries", int, 20 if fields["sequence"] is None else 0,
                      check=lambda v: None if 1 <= v <= 100_000 else "must be between 1 and 100000")
    return {"queries": queries}


SECTIONS = (_identity, _datasets, _layouts, _strategies, _settings, _templates, _updates, _sequence, _queries)


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
