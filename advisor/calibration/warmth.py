"""Whether this process has advised before: its first sampling or sizing also pays the imports (z3,
the estimators), the first view registrations and the first compilations of its Spark jobs, once.

Records of such advice are marked ``cold`` (``advisor.selection.recommend``); a warm process predicting
its next advice from cold records only would charge those one-time costs again.

>>> rec = {"seconds": {"partitions": 1.0}}
>>> was = advised(); note(rec); rec["cold"] == (not was) and advised()
True
"""

from __future__ import annotations

_advised = False


def advised() -> bool:
    """True once this process has sampled or sized for advice."""
    return _advised


def note(rec: dict) -> None:
    """Mark ``rec`` cold when it is the process's first advice to sample or size."""
    global _advised
    rec["cold"] = not _advised
    _advised = _advised or any(k in rec["seconds"] for k in ("sampling", "partitions", "oracle"))
