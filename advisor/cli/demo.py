"""`advisor demo`: the main job.  Replays the shipped demo workload (``workloads/demo.yaml``: TPC-H
SF0.1 and NYC flights 2013, HAVING / top-k / join queries with an update batch after every five
queries) for CB-OPT-GB against NO-PS in a fresh run directory, maintaining sketches through the
updates, checks that every answer equals the plain one, and writes the HTML report."""

from __future__ import annotations

import shutil
from pathlib import Path


def demo_workload() -> Path:
    import workloads

    return Path(workloads.__file__).parent / "demo.yaml"


def run_demo(ctx, options: dict, console, out: Path | None = None) -> Path:
    """Fresh replay of the demo workload, each strategy in a JVM of its own released in lockstep (as
    ``advisor replay --isolate``); returns the run directory (report.html inside).

    Why isolated: in one shared JVM the strategy replayed second inherits the first one's compiled
    code, so NO-PS paid every warm-up.  With every CB-OPT-GB step a no-go, both strategies ran the
    same plain queries, and CB-OPT-GB still came out at 0.84x.  ``options`` are the
    CLI's global options, which the child processes are started with."""
    from workloads.replay.runner import replay, replay_isolated

    run_dir = Path(out or ctx.warehouse / "runs" / "demo").resolve()
    console.print(f"demo run directory: {run_dir} (fresh; one process per strategy, in lockstep)")
    if run_dir.exists():
        shutil.rmtree(run_dir)
    replay_isolated(options, str(demo_workload()), None, run_dir, fresh=False, console=console)
    return replay(ctx, str(demo_workload()), out=str(run_dir), console=console)
