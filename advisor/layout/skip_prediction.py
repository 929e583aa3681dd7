"""How much of a table a sketch lets Spark skip, predicted from the physical layout.

A sketch only saves what the scan can prune: the pages of a clustered layout's own attribute
(Parquet column index; ``_page_units``), row groups of its other columns (footer statistics) or,
without a layout, Parquet row groups of the base files.  A sketch covering 5% of lineitem's rows on
an attribute every row group spans end to end saves nothing.  The cost model therefore charges the *read fraction*, not the sketch's selectivity:

    E[rows read] = sum over read units u of rows_u * (1 - prod_{r in frags(u)} (1 - P_r))

where ``frags(u)`` are the fragments overlapping the unit's [min, max] (plus the NULL fragment when
the unit holds NULLs) and ``P_r`` the probability that fragment r is in the sketch (the size
estimator's per-fragment probabilities; 0/1 for a captured sketch).  Rows of update batches on top
of the layout or base are always read.  ``skip_ceiling`` is the same quantity for a sketch holding a
single random value, computed from widths alone: it prunes candidates no sketch could help before
any sampling.  Pure functions except ``read_units`` (store, pyarrow footers; no Spark).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import struct
from bisect import bisect_right
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from advisor.caches import IdentityMemo, memoize
from advisor.layout.registry import find_layout
from advisor.warehouse import filesystem
from advisor.warehouse.table_files import parquet_files
from advisor.warehouse.value_kinds import decode_value, kind_of

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog


@dataclass(frozen=True)
class ReadUnit:
    """The smallest piece a scan reads or skips as a whole: ``lo``/``hi`` bound its non-NULL
    values (both None: unknown or all NULL); ``always`` units are read whatever the filter."""

    rows: int
    lo: Any = None
    hi: Any = None
    nulls: int = 0
    always: bool = False


@dataclass(frozen=True)
class Units:
    """The read units of one table version for one attribute and where they come from."""
    units: tuple
    source: str  # "layout <id> (<n> files)" | "row groups (<n>)"

    @property
    def rows(self) -> int:
        return sum(u.rows for u in self.units)


def _num(v: Any) -> Optional[float]:
    """Order-preserving number for ints/decimals/floats/dates/timestamps (None for strings etc.)."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, float, decimal.Decimal)):
        x = float(v)
        return None if math.isnan(x) else x
    if isinstance(v, dt.datetime):
        return v.replace(tzinfo=v.tzinfo or dt.timezone.utc).timestamp()
    if isinstance(v, dt.date):
        return float(v.toordinal())
    return None


def _key(v: Any) -> Any:
    """Comparable key: numbers for numeric-like values, the value itself otherwise (strings)."""
    n = _num(v)
    return v if n is None else n


def fragment_spans(units: Sequence[ReadUnit], boundaries: Sequence[Any]) -> list[Optional[tuple[int, int]]]:
    """Per unit, the first and last range fragment its [lo, hi] overlaps (fragment i covers
    [b[i-1], b[i])); None when the unit has no known non-NULL range."""
    keys = [_key(b) for b in boundaries]
    out: list[Optional[tuple[int, int]]] = []
    for u in units:
        if u.always or u.lo is None or u.hi is None:
            out.append(None)
            continue
        try:
            out.append((bisect_right(keys, _key(u.lo)), bisect_right(keys, _key(u.hi))))
        except TypeError:  # incomparable statistics (e.g. a type the writer changed): assume all
            out.append((0, len(keys)))
    return out


# ---------------- numeric fast path ----------------
# The finder prices every stored sketch of a template on every query (``finder.read_fraction``):
# thousands of pages against a 10,000-fragment partition, three times per sketch.  Per-value Python
# took 0.07 s per sketch at SF1; numbers in numpy arrays, converted once per unit tuple
# and boundary list, do the same search with ``searchsorted``.  Anything not numeric-like (strings,
# bools, NaN) keeps the per-value path above.
_MEMO_MAX = 64
_MEMO = IdentityMemo("unit arrays", _MEMO_MAX)
_memo, _remember = _MEMO.of, _MEMO.remember


def _numbers(values) -> Optional[np.ndarray]:
    """Order-preserving floats of the values, or None when one is not numeric-like (``_num``)."""
    out = np.empty(len(values))
    for k, v in enumerate(values):
        x = _num(v)
        if x is None:
            return None
        out[k] = x
    return out


@dataclass(frozen=True)
class _UnitArrays:
    rows: np.ndarray
    lo: np.ndarray      # valid where ranged
    hi: np.ndarray
    ranged: np.ndarray  # not always-read and both bounds known
    nulls: np.ndarray   # holds NULLs
    always: np.ndarray


def _unit_arrays(units: Sequence[ReadUnit]) -> Optional[_UnitArrays]:
    """The units as arrays; None when a ranged unit's bounds are not numeric-like."""
    always = np.fromiter((u.always for u in units), bool, len(units))
    ranged = np.fromiter((not u.always and u.lo is not None and u.hi is not None for u in units), bool, len(units))
    picked = [u for u, r in zip(units, ranged.tolist()) if r]
    lo, hi = _numbers([u.lo for u in picked]), _numbers([u.hi for u in picked])
    if lo is None or hi is None:
        return None
    full_lo, full_hi = np.zeros(len(units)), np.zeros(len(units))
    full_lo[ranged], full_hi[ranged] = lo, hi
    return _UnitArrays(np.fromiter((u.rows for u in units), float, len(units)), full_lo, full_hi, ranged,
                       np.fromiter((bool(u.nulls) for u in units), bool, len(units)), always)


def _fast_inputs(units, boundaries):
    """(unit arrays, boundary keys) when both are numeric-like, else None."""
    ua = _memo(units, _unit_arrays) if isinstance(units, tuple) else _unit_arrays(units)
    if ua is None:
        return None
    keys = _memo(boundaries, _numbers) if isinstance(boundaries, tuple) else _numbers(boundaries)
    return None if keys is None else (ua, keys)


def _keep_fast(ua: _UnitArrays, keys: np.ndarray, certain: np.ndarray, logmiss: np.ndarray,
               null_prob: float) -> np.ndarray:
    """``unit_keep_probability`` on arrays (the same rules, unit by unit, as the loop below)."""
    i = np.searchsorted(keys, ua.lo, side="right")
    j = np.searchsorted(keys, ua.hi, side="right")
    miss = np.where(ua.ranged, np.exp(logmiss[j + 1] - logmiss[i]), 1.0)
    sure = ua.ranged & (certain[j + 1] - certain[i] > 0)
    miss = np.where(ua.nulls, miss * (1.0 - min(max(null_prob, 0.0), 1.0)), miss)
    skippable = ~ua.always & (ua.ranged | ua.nulls) & ~sure
    return np.where(skippable, 1.0 - miss, 1.0)


def unit_keep_probability(units: Sequence[ReadUnit], boundaries: Sequence[Any], probs: Sequence[float],
                          null_prob: float = 0.0) -> np.ndarray:
    """Per unit, the probability that a sketch whose range fragment r is present with probability
    ``probs[r]`` (len = len(boundaries) + 1) and the NULL fragment with ``null_prob`` keeps it."""
    p = np.clip(np.asarray(probs, dtype=float), 0.0, 1.0)
    certain = np.concatenate([[0], np.cumsum(p >= 1.0)])
    logmiss = np.concatenate([[0.0], np.cumsum(np.where(p >= 1.0, 0.0, np.log1p(-np.minimum(p, 0.999999))))])
    fast = _fast_inputs(units, boundaries)
    if fast is not None:
        return _keep_fast(*fast, certain, logmiss, null_prob)
    return _keep_scalar(units, boundaries, certain, logmiss, null_prob)


def _keep_scalar(units: Sequence[ReadUnit], boundaries: Sequence[Any], certain: np.ndarray, logmiss: np.ndarray,
                 null_prob: float) -> np.ndarray:
    """``unit_keep_probability`` unit by unit, for any comparable values (strings too)."""
    spans = fragment_spans(units, boundaries)
    keep = np.ones(len(units))
    for k, (u, s) in enumerate(zip(units, spans)):
        if u.always or (s is None and not u.nulls):  # read whatever the filter (or no statistics)
            continue
        miss = 1.0
        if s is not None:
            i, j = s
            if certain[j + 1] - certain[i] > 0:
                continue
            miss = math.exp(logmiss[j + 1] - logmiss[i])
        if u.nulls:
            miss *= 1.0 - min(max(null_prob, 0.0), 1.0)
        keep[k] = 1.0 - miss
    return keep


def expected_read_fraction(units: Sequence[ReadUnit], boundaries: Sequence[Any], probs: Sequence[float],
                           null_prob: float = 0.0) -> float:
    """E[rows read] / rows for a sketch whose range fragment r is present with probability
    ``probs[r]`` (len = len(boundaries) + 1) and the NULL fragment with ``null_prob``."""
    rows = _memo(units, _rows) if isinstance(units, tuple) else _rows(units)
    total = rows.sum()
    if total <= 0:
        return 0.0
    return float(np.dot(rows, unit_keep_probability(units, boundaries, probs, null_prob))) / total


def _rows(units: Sequence[ReadUnit]) -> np.ndarray:
    return np.fromiter((u.rows for u in units), float, len(units))


def boundary_values(part) -> tuple:
    """A partition's interior boundaries as typed values, comparable with unit statistics (one
    tuple per distinct boundary list and type, so the numeric keys above are converted once)."""
    return _boundary_values(tuple(part.boundaries), part.dtype)


@memoize("decoded boundaries", maxsize=64)
def _boundary_values(boundaries: tuple, dtype: str) -> tuple:
    return tuple(decode_value(b, dtype) for b in boundaries)


def sketch_read_fraction(units: Sequence[ReadUnit], part, probability, certain=()) -> float:
    """Expected read fraction for an estimated sketch: ``probability`` maps fragment id -> P
    (a pandas Series from the size estimator; missing ids count as absent); fragments in
    ``certain`` (a filter's bridged gaps) are read with P = 1."""
    total = sum(u.rows for u in units)
    if total <= 0:
        return 0.0
    return float(np.dot([u.rows for u in units], sketch_keep_probability(units, part, probability, certain))) / total


def sketch_keep_probability(units: Sequence[ReadUnit], part, probability, certain=()) -> np.ndarray:
    """``unit_keep_probability`` of an estimated sketch (arguments as ``sketch_read_fraction``)."""
    probs = np.zeros(len(part.boundaries) + 1)
    null_p = 0.0
    for f, pr in (probability.items() if probability is not None else ()):
        f = int(f)
        if f == part.null_id:
            null_p = float(pr)
        elif 0 <= f < len(probs):
            probs[f] = float(pr)
    for f in certain:
        if 0 <= f < len(probs):
            probs[f] = 1.0
    return unit_keep_probability(units, boundary_values(part), probs, null_p)


def read_fraction_of(units: Sequence[ReadUnit], boundaries: Sequence[Any], fragments, null_id: int) -> float:
    """Rows read / rows for a captured sketch (a set of fragment ids)."""
    probs = np.zeros(len(boundaries) + 1)
    for f in fragments:
        if 0 <= f < len(probs):
            probs[f] = 1.0
    return expected_read_fraction(units, boundaries, probs, 1.0 if null_id in fragments else 0.0)


def _string_ceiling(units: Sequence[ReadUnit], lo: Any, hi: Any, total: int) -> Optional[float]:
    """``skip_ceiling`` for strings: rows of units always read or spanning [lo, hi], over all rows."""
    if not (isinstance(lo, str) and isinstance(hi, str)):
        return None
    read = 0
    for u in units:
        if u.always:
            read += u.rows
        elif u.lo is not None and u.hi is not None:
            if not (isinstance(u.lo, str) and isinstance(u.hi, str)):
                return None
            read += u.rows if (u.lo <= lo and u.hi >= hi) else 0
        elif not u.nulls:
            read += u.rows  # no statistics: never skipped
    return read / total


def skip_ceiling(units: Sequence[ReadUnit], lo: Any, hi: Any) -> Optional[float]:
    """Expected read fraction of a sketch holding one value drawn uniformly from [lo, hi]: the best
    any sketch on this attribute can do, from unit widths alone.  Strings have no width: a unit
    spanning the whole [lo, hi] is read for certain and any other counts as skippable, a lower bound
    that still drops attributes every unit spans (l_shipmode in the base files).  None when bounds
    are missing or not comparable."""
    a, b = _num(lo), _num(hi)
    total = sum(u.rows for u in units)
    if total <= 0 or lo is None or hi is None:
        return None
    if a is None or b is None:
        return _string_ceiling(units, lo, hi, total)
    width = b - a
    read = 0.0
    for u in units:
        x, y = _num(u.lo), _num(u.hi)
        if u.always or x is None or y is None:
            read += 0.0 if (not u.always and u.lo is None and u.nulls) else u.rows  # all-NULL units skip
            continue
        read += u.rows * (1.0 if width <= 0 else min(1.0, (y - x) / width))
    return read / total


# ---------------- where the units come from (store manifest, Parquet footers) ----------------
def _footer_units(files: list[str], attr: str) -> tuple:
    """One unit per Parquet row group, from the footers' statistics of ``attr``.  Cached per file
    list and modification times: the finder asks on every query, and layout/base files only change
    by being replaced."""
    stamp = tuple(filesystem.for_path(f).stamp(f) for f in files)
    return _footer_units_cached(tuple(files), stamp, attr)


@memoize("footer units", maxsize=256)
def _footer_units_cached(files: tuple, stamp: tuple, attr: str) -> tuple:
    out = []
    for f in files:
        md = filesystem.parquet_file(f).metadata  # local, or on a Hadoop file system
        idx = next((k for k in range(md.num_columns) if md.row_group(0).column(k).path_in_schema == attr), None) \
            if md.num_row_groups else None
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            st = rg.column(idx).statistics if idx is not None else None
            if st is None or not st.has_min_max:
                nulls = st.null_count if st is not None and st.has_null_count else 0
                all_null = st is not None and nulls == rg.num_rows
                out.append(ReadUnit(rg.num_rows, None, None, nulls, always=not all_null))
                continue
            try:
                lo, hi = stat_values(st)
            except Exception:  # noqa: BLE001 - statistics pyarrow cannot decode: the unit is never skipped
                out.append(ReadUnit(rg.num_rows, always=True))
                continue
            out.append(ReadUnit(rg.num_rows, lo, hi, st.null_count if st.has_null_count else 0))
    return tuple(out)


# Attribute kinds whose pages are modelled: parquet-mr writes column-index min/max for all of them in
# Spark's sort order (timestamps as INT64 micros, ``engine.session``: INT96 would get none).  A float
# column holding NaN fails ``_page_units``' sortedness check (NaN compares false) and is modelled by its
# row groups.  Leaving decimals and floats out predicted their layouts read every row, while Spark
# skipped their pages like any other type's (``tests/layout/test_layout_types.py``).
PAGE_KINDS = ("int", "dec", "float", "date", "str", "ts")


# parquet-mr first checks a new row group's page sizes after this many rows
# (``parquet.page.size.row.check.min``), so a page row limit below it gives a longer first page.
PAGE_CHECK_MIN = 100


def _page_units(files: list[str], attr: str, page_rows: int) -> Optional[tuple]:
    """One unit per Parquet page of ``attr`` in a layout sorted on it.  parquet-mr cuts each row
    group's pages every ``page_rows`` rows (P) from the group's start, the first one after
    max(P, ``PAGE_CHECK_MIN``) rows; sorted (NULLs first), a page's bounds are its first and last
    non-NULL values.  Probed with equality filters, these are the pages Spark skips by the column
    index.  None when the column is not sorted after all (the caller falls back to row groups)."""
    stamp = tuple(filesystem.for_path(f).stamp(f) for f in files)
    return _page_units_cached(tuple(files), stamp, attr, int(page_rows))


@memoize("page units", maxsize=64)
def _page_units_cached(files: tuple, stamp: tuple, attr: str, page_rows: int) -> Optional[tuple]:
    out = []
    for f in files:
        pf = filesystem.parquet_file(f)
        for g in range(pf.num_row_groups):
            col = pf.read_row_group(g, columns=[attr]).column(0).combine_chunks()
            n, nulls = len(col), int(col.null_count)
            if nulls and col.slice(0, nulls).null_count != nulls:
                return None  # NULLs not first: not the layout's order
            vals = col.slice(nulls)
            if len(vals) > 1 and not pc.all(pc.less_equal(vals.slice(0, len(vals) - 1), vals.slice(1))).as_py():
                return None
            first = max(page_rows, PAGE_CHECK_MIN)
            starts = np.concatenate([[0], np.arange(first, n, page_rows, dtype=np.int64)]) if n else np.zeros(0, np.int64)
            ends = np.append(starts[1:], n)
            k = np.clip(np.minimum(ends, nulls) - starts, 0, None)  # the page's NULLs: they lead the group
            has = k < ends - starts
            lo = iter(vals.take(pa.array(np.maximum(starts, nulls)[has] - nulls)).to_pylist())
            hi = iter(vals.take(pa.array(ends[has] - 1 - nulls)).to_pylist())
            for r, kn, h in zip((ends - starts).tolist(), k.tolist(), has.tolist()):
                out.append(ReadUnit(r, next(lo), next(hi), kn) if h else ReadUnit(r, None, None, kn))
    return tuple(out)


def _stored_units(files: list[str], attr: str) -> tuple[tuple, int]:
    """Units of the files as stored and how many files gave pages: one unit per page of ``attr``
    where a file carries a page index for it (Spark's reader skips those pages by the column index,
    ``advisor.warehouse.page_index``), else one per row group (footer statistics).  Cached per file
    list and modification times."""
    stamp = tuple(filesystem.for_path(f).stamp(f) for f in files)
    return _stored_units_cached(tuple(files), stamp, attr)


@memoize("stored page units", maxsize=256)
def _stored_units_cached(files: tuple, stamp: tuple, attr: str) -> tuple[tuple, int]:
    out: list = []
    paged = 0
    for f in files:
        try:
            chunks = filesystem.column_pages(f, attr)
        except (OSError, ValueError, IndexError, KeyError, TypeError, struct.error):  # undecodable index
            chunks = None
        if chunks is None:
            out.extend(_footer_units([f], attr))
            continue
        paged += 1
        for c in chunks:
            out.extend(ReadUnit(r, lo, hi, n) for r, n, lo, hi in zip(c.rows, c.nulls, c.lo, c.hi))
    return tuple(out), paged


def _stored_source(what: str, units: tuple, paged: int, files: int) -> str:
    """How the stored files' units read: pages from the page index, or row groups."""
    if paged == files and files:
        return f"{what} pages ({len(units)})"
    if paged:
        return f"{what} pages and row groups ({len(units)})"
    return f"{what} row groups ({len(units)})"


def stat_values(st) -> tuple:
    """(min, max) of a column chunk; decimals stored as INT32/INT64 (Spark's choice up to 18 digits)
    come back from pyarrow only as raw integers, scaled here."""
    lt = st.logical_type
    if lt is not None and getattr(lt, "type", "") == "DECIMAL" and st.physical_type in ("INT32", "INT64"):
        scale = int(json.loads(lt.to_json()).get("scale", 0))
        return (decimal.Decimal(st.min_raw).scaleb(-scale), decimal.Decimal(st.max_raw).scaleb(-scale))
    return st.min, st.max


def read_units(catalog: Catalog, table: str, attr: str, version: int, layout: bool = True,
               layout_attr: Optional[str] = None, columns=None) -> Units:
    """Units a sketched scan of ``table`` at ``version`` reads: the newest clustered layout on
    ``attr`` (or on ``layout_attr``, with ``attr``'s statistics) at or below the version holding
    ``columns`` (None: every column; a narrow copy serves only readers of its columns), else (or
    with ``layout=False``) the stored files' pages or row groups; batch inserts since are always read."""

    dtype = catalog.column_type(table, attr)
    lay = find_layout(catalog.store, table, layout_attr or attr, version, columns) if layout else None
    vs = [x for x in catalog.versions(table) if x.version <= version]
    if lay is not None:
        # row groups of the layout files (1 MiB each): Spark prunes those inside the files it opens
        files = parquet_files([lay["path"]])
        page_rows = lay["manifest"][0].get("page_rows") if lay["manifest"] else None
        indexed = bool(lay["manifest"]) and lay["manifest"][0].get("pages") == "index"
        pages = (_page_units(files, attr, page_rows) if files and page_rows and lay["attr"] == attr
                 and kind_of(dtype) in PAGE_KINDS else _stored_units(files, attr)[0] if files and indexed else None)
        units = pages if pages is not None else _footer_units(files, attr) if files else tuple(
            ReadUnit(int(m["rows"]), decode_value(m["min"], dtype), decode_value(m["max"], dtype),
                     int(m.get("nulls", 0))) if lay["attr"] == attr else ReadUnit(int(m["rows"]), always=True)
            for m in lay["manifest"])
        since = lay["table_version"]
        source = f"layout {lay['id']} ({len(files)} files, {len(units)} {'pages' if pages is not None else 'row groups'})"
    elif catalog.version(table, version).kind == "delta":
        # the snapshot's data files (Delta skips files by their statistics, Parquet row groups inside)
        files = catalog.data_files(table, version)
        units, paged = _stored_units(files, attr)
        since, source = version, _stored_source("Delta files'", units, paged, len(files))
    else:
        base = max((x for x in vs if x.kind == "base"), key=lambda x: x.version)
        files = parquet_files([base.base_path])
        units, paged = _stored_units(files, attr)
        since, source = base.version, _stored_source("stored files'", units, paged, len(files))
    added = sum(x.n_ins for x in vs if x.version > since)
    return _with_inserts(units, int(added), source)


def _with_inserts(units: tuple, added: int, source: str) -> Units:
    """``Units`` of the files' units plus one always-read unit for the rows inserted since; the same
    object while the files' (cached) units are, so the numeric fast path converts them once."""
    return _memo(units, lambda u: _units_plus(u, added, source), name=f"_with_inserts|{added}|{source}")


def _units_plus(units: tuple, added: int, source: str) -> Units:
    got = Units(units + ((ReadUnit(added, always=True),) if added else ()), source)
    if added:  # the files' arrays plus one always-read unit: no per-unit pass for each new version
        base = _memo(units, _unit_arrays)
        if base is not None:
            one = lambda a, v: np.append(a, v)  # noqa: E731
            _remember("_unit_arrays", got.units, _UnitArrays(
                one(base.rows, float(added)), one(base.lo, 0.0), one(base.hi, 0.0), one(base.ranged, False),
                one(base.nulls, False), one(base.always, True)))
    return got
