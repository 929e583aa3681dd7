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


def run_demo(ctx, console, out: Path | None = None) -> Path:
    """Fresh replay of the demo workload; returns the run directory (report.html inside)."""
    from workloads.replay import replay

    run_dir = Path(out or ctx.warehouse / "runs" / "demo").resolve()
    console.print(f"demo run directory: {run_dir} (fresh)")
    if run_dir.exists():
        shutil.rmtree(run_dir)
    return replay(ctx, str(demo_workload()), out=str(run_dir), console=console)
