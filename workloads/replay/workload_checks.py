"""The checks of a workload file's sections, in ``SECTIONS`` order, each returning the ``Workload``
fields it validated; ``WorkloadChecker`` raises BadInput naming the file, line and key.  Apart from
the YAML reading (``workload_file``) so that the rules of each key read on their own.
"""

from __future__ import annotations

import glob
import hashlib
import re
from pathlib import Path

from advisor.errors import BadInput
from advisor.maintain.policy.policies import make_policy
from advisor.selection.strategies import strategy_draw, unknown_strategy
from workloads.replay.query_log import parse_query_log
from workloads.replay.workload_model import Param, Template, UpdateRule

DATASETS = {"tpch": {"sf"}, "flights": set(), "crimes": {"rows", "seed"}, "topology": {"nodes", "density", "seed"},
            "airports": {"radius_km"}}
TOP_KEYS = {"name", "description", "seed", "datasets", "layouts", "strategies", "policy", "sample_rate",
            "fragments", "measure_recapture", "measured_costs", "queries", "templates", "updates", "sequence", "method",
            "layout_rows_per_file", "warmup", "query_log", "rounds"}
IMPORT_KEYS = ("import", "path", "table", "vega", "format", "key", "schema", "as_of")
IMPORT_FORMATS = ("delta", "parquet", "csv", "orc", "json")  # advisor.warehouse.imports.FORMATS
CHANGE_SUFFIXES = (".parquet", ".csv")  # change files `Catalog.apply_batch` reads
PARAM_KINDS = {"uniform", "choice", "quantile"}


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


def check_top_keys(c: WorkloadChecker, data) -> None:
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
