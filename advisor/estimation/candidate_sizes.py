"""Candidate attributes and their estimated (or exact) sketch sizes: what estimation produces and selection weighs."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional


@dataclass(frozen=True)
class SizeSummary:
    """Estimated (or real) sketch size at one granularity, as fractions of the table."""
    n_target: int
    n_fragments: int
    sel: float
    sel_lo: float
    sel_hi: float
    sel_point: float
    fragments: float
    read: Optional[float] = None  # expected fraction of rows the scan still reads (layout-aware)
    read_source: str = ""
    ci_exact: bool = False        # a point interval because the size is exact by construction (not a sampling accident)
    unseen_groups: float = 0.0    # passing groups the sample is expected to miss (counted in size and CI)

    @classmethod
    def of(cls, est, part) -> "SizeSummary":
        """From an ``estimators.sketch_size.SizeEstimate``.  The expectation assumes groups pass independently;
        when the replicate interval (which keeps their dependence, e.g. inner groups sharing an outer
        HAVING) excludes it, it is clamped into the interval."""
        lo, hi = est.selectivity_ci
        sel = min(max(est.selectivity_expected, lo), hi) if est.method == "replicates" else est.selectivity_expected
        return cls(part.n_target, part.n_fragments, sel, lo, hi, est.selectivity_point, est.fragments_expected,
                   ci_exact=bool(getattr(est, "exact", False)), unseen_groups=float(getattr(est, "unseen_groups", 0.0)))

    @classmethod
    def exact(cls, n_target: int, n_fragments: int, sel: float, fragments: int) -> "SizeSummary":
        return cls(n_target, n_fragments, sel, sel, sel, sel, float(fragments), ci_exact=True)

    def with_read(self, read: float, source: str) -> "SizeSummary":
        return replace(self, read=max(read, self.sel), read_source=source)


@dataclass
class Candidate:
    """One attribute of the sampled table (or a joined table's group-by column, ``dim``): safety, NDV,
    roles, estimated and (oracle) real sizes."""

    table: str
    attr: str
    safe: bool
    reason: str
    ndv: int
    roles: frozenset = frozenset()
    sizes: dict = field(default_factory=dict)   # n_target -> SizeSummary (estimate)
    real: dict = field(default_factory=dict)    # n_target -> SizeSummary (captured)
    skip_note: Optional[str] = None             # why the layout rules it out before sampling
    dim: bool = False                           # a group-by column of a joined (dimension) table
    rows: float = 0.0                           # the candidate table's row count (0: the caller's)
    attrs: tuple = ()                           # a two-attribute candidate's (a, b); attr is "a&b"
    layout: Optional[dict] = None               # the layout sketching it would build, with its price

    @property
    def key(self) -> str:
        """Plan / partition key: the bare attribute on the sampled table, ``table.attr`` on a dimension."""
        return f"{self.table}.{self.attr}" if self.dim else self.attr
