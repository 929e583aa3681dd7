"""The run log written by `advisor replay` (``RUN_DIR/run.json``) and its validation.

`reports` reads this file only; it never starts Spark.  Shape (format ``advisor-run/1``)::

    {
      "format": "advisor-run/1",
      "status": "complete" | "partial",
      "workload": {"name": str, "path": str, "sha256": str, "description": str, "seed": int,
                   "policy": str, "sample_rate": float, "config": {... the parsed workload file ...}},
      "environment": {"advisor": str, "python": str, "pyspark": str, "java": str, "platform": str,
                      "cpus": int, "master": str, "started": iso8601, "finished": iso8601 | null},
      "datasets": [{"name": str, "sf": float | null, "tables": {table: rows}}],
      "prepare_seconds": {"load": s, "layouts": s, "bindings": s, "batches": s},
      "strategies": [str, ...],                       # in replay order; "NO-PS" is the reference
      "steps": [                                      # the workload, identical for every strategy
        {"step": int, "kind": "query", "template": str, "bindings": {name: value}, "sql": str},
        {"step": int, "kind": "update", "table": str, "inserts": int, "deletes": int, "version": int}
      ],
      "queries": [{                                   # one per (strategy, query step): the decision
                                                      # record of ``advisor.serve.decision_record``
        "version": 1, "strategy": str, "step": int, "template": str, "sql": str,
        "bindings": {name: value}, "table_rows": int,  # rows of the tables the query scans
        "decision": {"action": "plain" | "capture" | "reuse" | "no-go" | "unsupported",
                     "reason": str, "attr": "table.attr" | null, "fragments": int | null,
                     "layout": {"table", "attr", "built", ...} | null},  # a layout built or priced
        "sketch_id": int | null,                      # sketch used by the run (after maintenance), or
                                                      # captured by the job that answered the step
        "selectivity": {"estimated": float | null, "ci": [lo, hi] | null, "real": float | null},
        "scan": {"files": int, "bytes": int, "rows": int},      # what the query's scans read (a step
                                                      # answered by its capture job: that job's scan)
        "result": {"rows": int, "digest": str},       # sha1 of the sorted result rows
        "seconds": {"sampling": s, "estimation": s, "capture": s, "maintenance": s, "query": s,
                    "other": s,                       # the step's wall time no phase timed (parsing,
                                                      # recalling decisions, the run log); measuring-only
                                                      # work (scan metrics, real selectivity) is not in it
                    "oracle": s, "total": s},         # total excludes "oracle" (OPT's evaluation captures)
        "lookup_seconds": s}],                        # of "query": finding the stored sketch to use
                                                      # (the finder's reuse tests); 0 for NO-PS
      "maintenance": [{                               # every maintenance event, eager or lazy
        "strategy": str, "step": int, "trigger": "update" | "query", "sketch_id": int,
        "new_sketch_id": int, "how": "incremental" | "recapture" | "current", "seconds": s,
        "delta_rows": int, "recapture_seconds": s | null}],     # null: recapture not measured
      "warmup": {"steps": int, "seconds": {S: [s, ...]}},    # untimed, per process start (optional;
                                                      # ``workloads.replay.warmup``)
      "summary": {
        "answers_identical": bool, "mismatches": [{"step": int, "strategy": str}],
        "per_strategy": {S: {"queries": int, "cumulative_seconds": s, "vs_no_ps": float | null,
                             "rows_read": int, "bytes_read": int, "files_read": int,
                             "captured": int, "reused": int, "no_go": int, "plain": int,
                             "mean_real_selectivity": float | null,
                             "state_flush_seconds": s,  # the final write of the states still held
                             "heap_releases": int,  # queries timed after the JVM gave heap back
                                                    # under memory pressure (``workloads.replay.heap_release``)
                             "seconds": {"sampling": s, "estimation": s, "capture": s,
                                         "maintenance": s, "query": s, "other": s}}},
        "draws": {B: {"draws": [S, ...], "mean_vs_no_ps": float | null, "min_vs_no_ps": float | null,
                      "max_vs_no_ps": float | null, "mean_cumulative_seconds": s,
                      "mean_rows_read": int}}}      # a random strategy listed as 2+ draws (optional)
    }
"""

from __future__ import annotations

import json
from pathlib import Path

FORMAT = "advisor-run/1"
REQUIRED = ("format", "workload", "environment", "strategies", "steps", "queries", "maintenance", "summary")
QUERY_KEYS = ("strategy", "step", "template", "decision", "selectivity", "scan", "result", "seconds")


class RunFormatError(ValueError):
    """The run directory or its run.json is missing or malformed (one sentence, names the key)."""


def run_path(run: str | Path) -> Path:
    """``run`` may be the run directory or the run.json file itself."""
    p = Path(run)
    return p / "run.json" if p.is_dir() else p


def load_run(run: str | Path) -> dict:
    """Read and validate a run log; RunFormatError says what is wrong."""
    p = run_path(run)
    if not p.exists():
        raise RunFormatError(f"no run log at {p} (expected a directory written by `advisor replay`)")
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise RunFormatError(f"{p} is not valid JSON: {e}") from None
    validate_run(data, str(p))
    return data


def validate_run(data, where: str = "run.json") -> None:
    if not isinstance(data, dict):
        raise RunFormatError(f"{where}: the top level must be an object")
    if data.get("format") != FORMAT:
        raise RunFormatError(f"{where}: key 'format' must be {FORMAT!r}, got {data.get('format')!r}")
    for k in REQUIRED:
        if k not in data:
            raise RunFormatError(f"{where}: missing key {k!r}")
    if not isinstance(data["queries"], list):
        raise RunFormatError(f"{where}: key 'queries' must be a list")
    for i, q in enumerate(data["queries"]):
        if not isinstance(q, dict):
            raise RunFormatError(f"{where}: queries[{i}] must be an object")
        for k in QUERY_KEYS:
            if k not in q:
                raise RunFormatError(f"{where}: queries[{i}] is missing key {k!r}")
