"""The CI performance gate: ``advisor gate RUN --baseline BASE [--max-regression 10%]``.

Compares a fresh run log (``run.json``, see `reports.schema`) with a committed baseline of the
same workload and fails (exit 1) when the advisor got worse.  Only deterministic quantities can
fail the gate, because they are identical on every machine for the same code and workload:

* per query (matched by strategy and step): ``scan.files``, ``scan.bytes``, ``scan.rows``, with a
  noise floor (changes of at most 1 file, 4 KiB or 100 rows never count, so 0 -> 1 file is not
  "infinite %");
* sketch selectivity ``selectivity.real`` (worse: grows by > the threshold AND by > 0.01) and the
  estimation error |estimated - real| (worse: grows by > the threshold AND by > 0.02);
* the decision: capture/reuse turning into plain/no-go/unsupported is a regression, any other
  action change is only noted;
* answers: a different ``result.digest`` for the same step and strategy, or
  ``summary.answers_identical`` false in the run;
* per-strategy totals ``rows_read``, ``bytes_read``, ``files_read`` from ``summary.per_strategy``;
* completeness: strategies or query records in the baseline but absent from the run ("missing").

Wall-clock time is advisory only (CI machines wobble): per strategy the ``cumulative_seconds``
ratio run/base and the ``vs_no_ps`` ratio run/base (``vs_no_ps`` is read as time relative to
NO-PS, so larger is slower) are flagged when worse by more than the threshold, never failing.

The two logs must describe the same workload (same ``workload.sha256``, same steps and SQL);
otherwise `GateInputError` is raised, which like `RunFormatError` is a ValueError (exit 2).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from rich.table import Table

from reports.schema import load_run

NOISE = {"files": 1, "bytes": 4096, "rows": 100}           # absolute changes at or below are noise
TOTALS = {"files_read": "files", "bytes_read": "bytes", "rows_read": "rows"}
SEL_SLACK, ERR_SLACK = 0.01, 0.02
SKETCHED, UNSKETCHED = {"capture", "reuse"}, {"plain", "no-go", "unsupported"}


class GateInputError(ValueError):
    """The run and the baseline cannot be compared (different workloads); one sentence."""


@dataclass
class Finding:
    kind: str                   # counter | total | selectivity | error | decision | answer | missing | extra | timing | note
    strategy: Optional[str]
    step: Optional[int]
    metric: str
    base: Any
    run: Any
    change: Optional[float]     # relative (run - base) / base; None when base is 0 or not numeric
    regression: bool
    advisory: bool = False
    note: str = ""


@dataclass
class GateResult:
    max_regression: float
    compared: int = 0
    findings: list = field(default_factory=list)

    @property
    def regressions(self) -> list:
        return [f for f in self.findings if f.regression]

    @property
    def advisories(self) -> list:
        return [f for f in self.findings if f.advisory]

    @property
    def notes(self) -> list:
        return [f for f in self.findings if not f.regression and not f.advisory]

    @property
    def passed(self) -> bool:
        return not self.regressions

    def to_dict(self) -> dict:
        return {"passed": self.passed, "max_regression": self.max_regression, "compared": self.compared,
                "regressions": len(self.regressions), "advisories": len(self.advisories),
                "findings": [asdict(f) for f in self.findings]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


def parse_threshold(s: str) -> float:
    """'10%', '10 %' or '0.1' -> 0.1; ValueError for junk, negatives or more than 1000%."""
    text = str(s).strip()
    m = re.fullmatch(r"([+-]?(?:\d+\.?\d*|\.\d+))\s*(%?)", text)
    if not m:
        raise ValueError(f"--max-regression must be a fraction like 0.1 or a percentage like 10%, got {s!r}")
    value = float(m.group(1)) / (100.0 if m.group(2) else 1.0)
    if value < 0:
        raise ValueError(f"--max-regression must not be negative, got {s!r}")
    if value > 10.0:
        raise ValueError(f"--max-regression must be at most 1000%, got {s!r}")
    return value


def _rel(base, run) -> Optional[float]:
    if not isinstance(base, (int, float)) or not isinstance(run, (int, float)) or base == 0:
        return None
    return (run - base) / abs(base)


def _worse(base, run, m: float, slack: float) -> bool:
    """run exceeds base by more than the relative threshold and by more than the absolute slack."""
    return run - base > slack and run > base * (1 + m)


def _check_workload(run: dict, base: dict) -> None:
    rs, bs = run["workload"].get("sha256"), base["workload"].get("sha256")
    if rs != bs:
        raise GateInputError(f"the run and the baseline replay different workloads "
                             f"(workload.sha256 {str(rs)[:12]} vs baseline {str(bs)[:12]})")
    rsteps = {s.get("step"): s for s in run["steps"]}
    bsteps = {s.get("step"): s for s in base["steps"]}
    if set(rsteps) != set(bsteps):
        only = sorted(set(rsteps) ^ set(bsteps), key=str)
        raise GateInputError(f"the run and the baseline have different workload steps (steps {only} are in only one)")
    for n, b in bsteps.items():
        r = rsteps[n]
        for key in ("kind", "sql", "table"):
            if r.get(key) != b.get(key):
                raise GateInputError(f"workload step {n} differs between the run and the baseline ({key!r})")


def compare(run: dict, base: dict, max_regression: float) -> GateResult:
    """Every finding of the run against the baseline, check by check (`CHECKS`, in order); raises
    GateInputError when the two logs do not replay the same workload."""
    _check_workload(run, base)
    res = GateResult(max_regression)
    for check in CHECKS:
        check(res, run, base)
    return res


def _count(res: GateResult, kind: str, strategy, step, metric: str, b, r, slack: float) -> None:
    """Compare one numeric counter (skipped unless both sides are numbers); a regression when worse."""
    if not isinstance(b, (int, float)) or not isinstance(r, (int, float)):
        return
    res.compared += 1
    if _worse(b, r, res.max_regression, slack):
        res.findings.append(Finding(kind, strategy, step, metric, b, r, _rel(b, r), True))


def _compare_strategies(res: GateResult, run: dict, base: dict) -> None:
    """A baseline strategy absent from the run is a regression; a strategy new in the run is noted."""
    rstrats, bstrats = list(run["strategies"]), list(base["strategies"])
    for s in bstrats:
        if s not in rstrats:
            res.findings.append(Finding("missing", s, None, "strategy", "present", "absent", None, True,
                                        note="strategy in the baseline was not replayed"))
    for s in rstrats:
        if s not in bstrats:
            res.findings.append(Finding("extra", s, None, "strategy", "absent", "present", None, False,
                                        note="strategy not in the baseline; not compared"))


def _note_status(res: GateResult, run: dict, base: dict) -> None:
    """A partial run log is noted (its missing queries are reported one by one)."""
    if run.get("status", "complete") != "complete":
        res.findings.append(Finding("note", None, None, "status", base.get("status"), run.get("status"), None, False,
                                    note="the run log is partial"))


def _compare_queries(res: GateResult, run: dict, base: dict) -> None:
    """Every baseline query record of a replayed strategy against the run's record of the same step."""
    rstrats = list(run["strategies"])
    rq = {(q["strategy"], q["step"]): q for q in run["queries"]}
    bq = {(q["strategy"], q["step"]): q for q in base["queries"]}
    for key, b in sorted(bq.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        s, step = key
        if s not in rstrats:
            continue                                   # reported once per strategy by _compare_strategies
        r = rq.get(key)
        if r is None:
            res.findings.append(Finding("missing", s, step, "query", "present", "absent", None, True,
                                        note="query record in the baseline is absent from the run"))
            continue
        _compare_query(res, s, step, b, r)


def _compare_query(res: GateResult, s: str, step: int, b: dict, r: dict) -> None:
    """One query of strategy ``s``: same SQL (else GateInputError), then scan counters, selectivity and
    its estimation error, the decision and the answer."""
    if r.get("sql") is not None and b.get("sql") is not None and r["sql"] != b["sql"]:
        raise GateInputError(f"the SQL of step {step} for {s} differs between the run and the baseline")
    for metric, slack in NOISE.items():
        _count(res, "counter", s, step, f"scan.{metric}", b["scan"].get(metric), r["scan"].get(metric), slack)
    _compare_selectivity(res, s, step, b.get("selectivity") or {}, r.get("selectivity") or {})
    ba, ra = (b.get("decision") or {}).get("action"), (r.get("decision") or {}).get("action")
    res.compared += 1
    if ba != ra:
        bad = ba in SKETCHED and ra in UNSKETCHED
        res.findings.append(Finding("decision", s, step, "decision.action", ba, ra, None, bad,
                                    note=(r.get("decision") or {}).get("reason", "")))
    bd, rd = (b.get("result") or {}).get("digest"), (r.get("result") or {}).get("digest")
    res.compared += 1
    if bd != rd:
        res.findings.append(Finding("answer", s, step, "result.digest", bd, rd, None, True, note="answer changed"))


def _compare_selectivity(res: GateResult, s: str, step: int, bsel: dict, rsel: dict) -> None:
    """The real selectivity, and the error |estimated - real| where both sides estimated, may not grow."""
    m = res.max_regression
    breal, rreal = bsel.get("real"), rsel.get("real")
    if breal is not None and rreal is not None:
        res.compared += 1
        if _worse(breal, rreal, m, SEL_SLACK):
            res.findings.append(Finding("selectivity", s, step, "selectivity.real", breal, rreal,
                                        _rel(breal, rreal), True))
    if None not in (breal, rreal, bsel.get("estimated"), rsel.get("estimated")):
        berr, rerr = abs(bsel["estimated"] - breal), abs(rsel["estimated"] - rreal)
        res.compared += 1
        if _worse(berr, rerr, m, ERR_SLACK):
            res.findings.append(Finding("error", s, step, "|estimated - real|", round(berr, 6), round(rerr, 6),
                                        _rel(berr, rerr), True))


def _note_extra_queries(res: GateResult, run: dict, base: dict) -> None:
    """Query records of a baseline strategy that only the run has are noted, not compared."""
    bstrats = list(base["strategies"])
    rq = {(q["strategy"], q["step"]) for q in run["queries"]}
    bq = {(q["strategy"], q["step"]) for q in base["queries"]}
    for (s, step) in sorted(rq - bq, key=lambda k: (str(k[0]), k[1])):
        if s in bstrats:
            res.findings.append(Finding("extra", s, step, "query", "absent", "present", None, False,
                                        note="query record not in the baseline; not compared"))


def _check_answers(res: GateResult, run: dict, base: dict) -> None:
    """The run's own verdict: any strategy disagreeing with NO-PS is a regression."""
    rsum, bsum = run.get("summary") or {}, base.get("summary") or {}
    res.compared += 1
    if rsum.get("answers_identical") is False:
        where = ", ".join(f"{x.get('strategy')}@{x.get('step')}" for x in rsum.get("mismatches") or [])
        res.findings.append(Finding("answer", None, None, "summary.answers_identical", bsum.get("answers_identical"),
                                    False, None, True,
                                    note=f"strategies disagree with NO-PS: {where}" if where else "answers differ"))


def _compare_totals(res: GateResult, run: dict, base: dict) -> None:
    """Per-strategy totals read may not grow; worse time is an advisory finding only."""
    m = res.max_regression
    rstrats, bstrats = list(run["strategies"]), list(base["strategies"])
    rper = (run.get("summary") or {}).get("per_strategy") or {}
    bper = (base.get("summary") or {}).get("per_strategy") or {}
    for s in bstrats:
        if s not in rstrats or s not in bper or s not in rper:
            continue
        b, r = bper[s], rper[s]
        for metric, unit in TOTALS.items():
            _count(res, "total", s, None, metric, b.get(metric), r.get(metric), NOISE[unit])
        for metric in ("cumulative_seconds", "vs_no_ps"):
            bt, rt = b.get(metric), r.get(metric)
            if isinstance(bt, (int, float)) and isinstance(rt, (int, float)) and bt > 0 and rt / bt > 1 + m:
                res.findings.append(Finding("timing", s, None, metric, bt, rt, _rel(bt, rt), False, advisory=True,
                                            note=f"{rt / bt:.2f}x the baseline (advisory: time never fails the gate)"))


CHECKS = (_compare_strategies, _note_status, _compare_queries, _note_extra_queries, _check_answers, _compare_totals)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, str) and len(v) > 14:
        return v[:12] + "…"
    return "-" if v is None else str(v)


def _change(f: Finding) -> str:
    if f.change is not None:
        return f"{f.change * 100:+.1f}%"
    return "new" if f.base == 0 else ""


def render(console, result: GateResult) -> None:
    regs, adv, notes = result.regressions, result.advisories, result.notes
    thr = f"{result.max_regression * 100:g}%"
    if regs:
        t = Table(title=f"gate failed: {len(regs)} regression(s) in {result.compared} counters "
                        f"compared (max regression {thr})", title_justify="left")
        for col in ("kind", "strategy", "step", "metric", "base → run", "change"):
            t.add_column(col, justify="right" if col in ("step", "change") else "left")
        for f in regs:
            t.add_row(f.kind, f.strategy or "-", "-" if f.step is None else str(f.step),
                      f.metric + (f" ({f.note})" if f.note and f.kind != "decision" else ""),
                      f"{_fmt(f.base)} → {_fmt(f.run)}", _change(f))
        console.print(t)
    else:
        console.print(f"gate passed: {result.compared} counters compared, 0 regressions")
    if adv:
        what = "; ".join(f"{f.strategy} {f.metric} {f.run / f.base:.2f}x" for f in adv)
        console.print(f"{len(adv)} advisory timing note(s), not failing the gate: {what}",
                      markup=False, highlight=False)
    if notes:
        console.print(f"{len(notes)} other change(s) noted (not regressions); see --json", markup=False)


def gate_command(run_path, baseline_path, max_regression: str = "10%", console=None,
                 json_output: bool = False) -> int:
    """Load, compare, print; 1 on any regression, else 0.  ValueError subclasses propagate."""
    m = parse_threshold(max_regression)
    run, base = load_run(run_path), load_run(baseline_path)
    result = compare(run, base, m)
    if console is not None:
        if json_output:
            console.print(result.to_json(), markup=False, highlight=False, soft_wrap=True)
        else:
            render(console, result)
    return 1 if result.regressions else 0
