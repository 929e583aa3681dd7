"""``advisor replay``: workload files, their step lists, one strategy's execution of a step, the
warm-up, lockstep child processes with heap release under ``--isolate``, and the run summary.
Imports ``workloads.data`` and the ``advisor`` packages up to ``selection``.
"""
