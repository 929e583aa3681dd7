"""Which files of a clustered layout a sketch can touch, from the layout's per-file min/max manifest.

Spark opens every file of a Parquet scan and reads its footer and column index before it can skip
a row group: a sketch of one l_suppkey fragment at SF10 opened all 61 files of the layout for
8,249 rows.  A layout's files hold contiguous ranges of its attribute, so the files a sketch's
fragments can reach are known before the scan; a scan over only those files reads the same rows.

>>> from advisor.partition.range_partition import RangePartition
>>> part = RangePartition(0, "t", "a", "int", (10, 20, 30), (5, 5, 5, 5, 2))
>>> manifest = [{"path": "f0", "min": 0, "max": 9, "nulls": 2}, {"path": "f1", "min": 10, "max": 24, "nulls": 0},
...             {"path": "f2", "min": 25, "max": 40, "nulls": 0}]
>>> touched_files(manifest, part, frozenset({2}))  # [20, 30)
['f1', 'f2']
>>> touched_files(manifest, part, frozenset({0, 4}))  # below 10, and NULL
['f0']
"""

from __future__ import annotations

import bisect

from advisor.partition.fragment_runs import runs
from advisor.partition.range_partition import RangePartition
from advisor.warehouse.value_kinds import decode_value


def touched_files(manifest: list[dict], part: RangePartition, fragments) -> list[str]:
    """Names of the manifest's files holding a value of a sketched fragment (``[lo, hi)`` ranges of
    ``part``) or, when the NULL fragment is sketched, a NULL (NaN counts as NULL, as in the
    manifest)."""
    nb = len(part.boundaries)
    bounds = [decode_value(b, part.dtype) for b in part.boundaries]
    # runs [i, j] cover [bounds[i-1], bounds[j]); None stands for an open end
    spans = [(bounds[i - 1] if i > 0 else None, bounds[j] if j < nb else None) for i, j in runs(fragments, part)]
    his = [hi for _, hi in spans]
    want_nulls = part.null_id in fragments
    out = []
    for m in manifest:
        if want_nulls and int(m.get("nulls", 0)) > 0:
            out.append(m["path"])
            continue
        if m.get("min") is None or not spans:
            continue
        lo, hi = decode_value(m["min"], part.dtype), decode_value(m["max"], part.dtype)
        # the first run ending above the file's min (open-ended runs end above everything)
        k = _first_above(his, lo)
        if k < len(spans) and (spans[k][0] is None or spans[k][0] <= hi):
            out.append(m["path"])
    return out


def _first_above(his: list, value) -> int:
    """Index of the first run whose exclusive upper end is above ``value`` (runs sorted, disjoint;
    only the last can be open-ended)."""
    closed = his[:-1] if his and his[-1] is None else his
    k = bisect.bisect_right(closed, value)
    return k
