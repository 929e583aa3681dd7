"""`advisor demo`: the main job.  Replays the shipped demo workload (``workloads/demo.yaml``: a
dashboard of selective HAVING / top-k panels over TPC-H SF1, refreshed with new parameters while
lineitem receives insert/delete batches) for CB-OPT-GB against NO-PS in a fresh run directory,
maintaining sketches through the updates, checks that every answer equals the plain one, writes the
HTML report and says in a few plain lines what the sketches saved."""

from __future__ import annotations

import shutil
from pathlib import Path

import workloads
from reports.html import write_report
from reports.schema import load_run
from workloads.replay.runner import replay, replay_isolated


def demo_workload() -> Path:
    return Path(workloads.__file__).parent / "demo.yaml"


def run_demo(ctx, options: dict, console, out: Path | None = None) -> Path:
    """Fresh replay of the demo workload, each strategy in a JVM of its own released in lockstep (as
    ``advisor replay --isolate``); returns the run directory (report.html inside).

    Why isolated: in one shared JVM the strategy replayed second inherits the first one's compiled
    code, so NO-PS paid every warm-up.  With every CB-OPT-GB step a no-go, both strategies ran the
    same plain queries, and CB-OPT-GB still came out at 0.84x.  ``options`` are the
    CLI's global options, which the child processes are started with."""
    run_dir = Path(out or ctx.warehouse / "runs" / "demo").resolve()
    console.print(f"demo run directory: {run_dir} (fresh; one process per strategy, in lockstep)")
    if run_dir.exists():
        shutil.rmtree(run_dir)
    replay_isolated(options, str(demo_workload()), None, run_dir, fresh=False, console=console)
    return replay(ctx, str(demo_workload()), out=str(run_dir), console=console, quiet=True)  # finds every step done


def closing(run_dir: Path) -> tuple[list[str], bool]:
    """The demo's last lines (what was saved, where the report is) and whether every check passed."""
    doc = load_run(run_dir)
    sm = doc["summary"]
    lines = saved_lines(doc) + [f"report: {write_report(run_dir)}"]
    return lines, bool(sm["answers_identical"] and sm["maintained_equal_to_recapture"])


def saved_lines(doc: dict) -> list[str]:
    """The demo's closing lines, in plain words, from a finished run's ``run.json``.

    >>> doc = {"summary": {"answers_identical": True, "maintained_equal_to_recapture": True,
    ...        "per_strategy": {"NO-PS": {"queries": 48, "cumulative_seconds": 100.0, "rows_read": 300_000_000},
    ...                         "CB-OPT-GB": {"queries": 48, "cumulative_seconds": 40.0, "vs_no_ps": 0.4,
    ...                                       "rows_read": 30_000_000, "captured": 8, "reused": 38,
    ...                                       "no_go": 2, "plain": 0,
    ...                                       "seconds": {"sampling": 1.0, "estimation": 2.0, "capture": 6.0,
    ...                                                   "maintenance": 3.0, "query": 26.0, "other": 2.0}}}},
    ...        "maintenance": [{"strategy": "CB-OPT-GB", "how": "incremental"}] * 5}
    >>> print("\\n".join(saved_lines(doc)))
    48 queries without sketches: 100.0 s, 300.0M rows read.
    48 queries with the advisor: 40.0 s (0.40x, 60.0 s saved), 30.0M rows read (10.0 % of the plain runs').
      That includes deciding (3.0 s sampling and estimating), capturing 8 sketches (6.0 s) and keeping them current through the updates (5 maintenance runs, 3.0 s).
      8 queries captured a sketch as they ran, 38 were answered from a stored one, 2 were not worth one and ran plain.
    Every answer equals the plain run's, and every maintained sketch equals a fresh capture.
    """
    sm = doc["summary"]
    per = sm["per_strategy"]
    plain, adv = per["NO-PS"], per["CB-OPT-GB"]
    ph = adv["seconds"]
    saved = plain["cumulative_seconds"] - adv["cumulative_seconds"]
    share = adv["rows_read"] / plain["rows_read"] if plain["rows_read"] else 0.0
    runs = sum(1 for m in doc.get("maintenance", []) if m.get("strategy") == "CB-OPT-GB" and m.get("how") != "current")
    verdict = f"{saved:.1f} s saved" if saved >= 0 else f"{-saved:.1f} s lost"
    lines = [
        f"{plain['queries']} queries without sketches: {plain['cumulative_seconds']:.1f} s, "
        f"{plain['rows_read'] / 1e6:.1f}M rows read.",
        f"{adv['queries']} queries with the advisor: {adv['cumulative_seconds']:.1f} s "
        f"({adv['vs_no_ps']:.2f}x, {verdict}), {adv['rows_read'] / 1e6:.1f}M rows read "
        f"({share * 100:.1f} % of the plain runs').",
        f"  That includes deciding ({ph['sampling'] + ph['estimation']:.1f} s sampling and estimating), "
        f"capturing {adv['captured']} sketches ({ph['capture']:.1f} s) and keeping them current through the "
        f"updates ({runs} maintenance runs, {ph['maintenance']:.1f} s).",
        f"  {adv['captured']} queries captured a sketch as they ran, {adv['reused']} were answered from a stored "
        f"one, {adv['no_go'] + adv['plain']} were not worth one and ran plain.",
    ]
    if sm["answers_identical"] and sm["maintained_equal_to_recapture"]:
        lines.append("Every answer equals the plain run's, and every maintained sketch equals a fresh capture.")
    else:
        lines.append("CHECK FAILED: an answer or a maintained sketch differs from the plain run (see the report).")
    return lines
