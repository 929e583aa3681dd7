"""Candidate attributes, selection strategies and the go/no-go + granularity cost model (seed 002 §3).

Candidates are the columns of the sampled table that the Z3 rules prove safe (``check_safety``) and
that are not constant, plus the group-by columns of the tables it joins (``advisor.selection.candidates``).
NDV vs fragments: the paper keeps only attributes with NDV > n; here an
attribute with NDV <= n is kept with one fragment per value (coarser granularities above its NDV
collapse into one), because a low-NDV group-by attribute can still make a good sketch (the year of
the digest's running example); ``granularities_for(..., strict=True)`` restores the paper's filter.
Partitions: one stored fine partition per attribute (``fine_partition``), coarser granularities
derived from it (``derive_partition``) and stored only when captured (``store_partition``).

Strategies (digest §3.3): NO-PS; RAND-ALL/REL/GB/PK/AGG (seeded uniform choice in the pool);
CB-OPT/-GB/-REL (smallest *estimated* read fraction in the pool -- the selectivity when the
layout is perfectly clustered, as the paper assumes; ties by selectivity); OPT (smallest *real* size, from
``oracle``: evaluation only).  Pools: ALL = safe candidates, GB = group-by attributes, REL = used
by group-by, WHERE, joins or aggregate arguments, AGG = aggregate arguments, PK = primary key.

Cost model (beyond the paper; unit = rows of the sketched table, T = its row count; seconds
become rows through the per-row cost fitted by ``advisor.calibration.measured_costs``, and ``fixed`` is one job's
fixed cost in rows, 0 until the run log identifies it):
  capture      = measured capture of the template, else (1 + instr_overhead) * T + fixed
  per use      = saving (1 - read) * T  minus  filter overhead runs * (term_cost * sel * T + plan_rows)
                 + extra (what a sketched run costs beyond a plain run reading as many rows: the
                 filter's planning, the lookup, the deleted-row filter; measured, 0 until measured)
                 (a sketch on a joined dimension's group-by column also saves join_share * (1 - read)
                 * T_fact: the fact rows that no longer find a partner; capture and maintenance priors
                 use T_fact, the sampled table's rows)
               minus maintenance  steps_per_use * min(capture, (init + U * step) / U)
                 (steps per use follow the policy, ``Policy.steps_per_use``: lazy catches up once
                 before a use however many batches wait; ski rental over the U predicted steps:
                 recapture each time, or initialise
                 operator state once and step incrementally; step = measured for the template, else
                 the median step measured for the store's other templates, else
                 maint_fixed * T + maint_per_delta * delta_rows: an incremental step reads the batch
                 files with pyarrow and runs no Spark job, so no job's fixed cost is charged;
                 4.8-9.1 ms per 1,000-row step at SF1, BENCHMARKS.md)
  net          = reuses * per_use - capture;   go iff net > 0 and the upper CI bound of sel <= max_sel,
                 and the net is still > 0 at the upper CI bound (read and filter priced at sel_hi):
                 a sketch that pays only if it is as small as estimated is no go; the decision line
                 says which bound decided.  The granularity is the one that goes with the best net
                 (else the best net): a coarser one may still go where a finer one's interval is wide
Before sampling, ``cannot_pay`` stops the advice when even read = 0 could not repay capture,
maintenance at its floor (incremental steps, unless the state is too big to buy) and the measured
estimation cost: sampling + estimation for the bootstrap (in a
replay, two scans until one is measured: ``UseForecast.sampled_advice_rows``), and for a
sizing without sampling (method exact, OPT) the partitions still to build plus the measured rest
(``Calibration.sizing_rows``), its job being the capture.
``read`` is the share of rows scans still read with the sketch (``advisor.layout.skip_prediction``: files of a
clustered layout or Parquet row groups whose min/max overlap the sketch's fragments); it equals
``sel`` only for a perfectly clustered table, and is ~1 for an attribute no layout clusters: such a
candidate is priced as read through the layout it would need (``advisor.layout.hypothetical``) and
its net is charged this template's share of building that layout (``layout_rows``,
``advisor.selection.layout_cost``); with ``build_layouts`` off it is dropped before sampling.  A sketch whose read share, known from the table's
files, exceeds ``max_read`` saves nothing per use (``sketch.lookup.MAX_USE_READ``: such a scan is
refused at use, measured slower than a plain one), so its net is negative and the line says why;
without a read share (the paper's model) ``sel <= max_sel`` stands alone.
``runs`` (range terms of the sketch filter) ~ E[fragments] * (1 - E[fragments]/n) + 1, fragments
scattered at random (an upper-ish guess).  The number of fragments is the granularity with the best
net.  The partition build is a sunk cost by decision time (estimation needed its fragment sizes), so
it is not charged.  Reuses are predicted from the store's ``runs`` log: a template seen m times is
expected m more times, plus a prior (default 3).  Updates per use = update batches of the table /
logged runs of this template (0 without batches).  Two-attribute candidates are not modelled (the core
stores one attribute per table and sketch).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from advisor.calibration.measured_costs import PRIOR_ROWS_PER_S, partition_prior_rows
from advisor.estimation.candidate_sizes import Candidate, SizeSummary
from advisor.sketch.lookup import MAX_USE_READ

GRANULARITIES = (100, 1000, 10000)
PRIOR_REUSES = 3.0  # uses of a sketch expected before a template's own history says otherwise
ADVICE_PRIOR_SCANS = 2.0  # a sample draw's passes over the table, charged until advice is measured


@dataclass
class CostParams:
    """Knobs of the cost model (module docstring); defaults are rough Spark-on-Parquet ratios."""
    instr_overhead: float = 0.3
    term_cost: float = 0.002
    plan_rows: float = 200.0
    prior_reuses: float = PRIOR_REUSES
    max_sel: float = 0.8
    max_read: float = MAX_USE_READ   # sketches reading more are not used (``advisor.sketch.lookup``)
    maint_fixed: float = 0.01
    maint_per_delta: float = 3.0
    scan_rate: float = PRIOR_ROWS_PER_S
    # share of a joined fact row's cost spent after the scan (join, shuffle, aggregation): a sketch on
    # a dimension drops the fact rows that no longer find a partner [INFERRED from one measurement:
    # TPC-H SF1 lineitem JOIN orders by o_orderdate, a 0.5 % sketch on orders 1.5 -> 0.5-0.8 s]
    join_share: float = 0.5
    measured: bool = True   # use costs measured in the store (advisor.calibration.measured_costs); False: priors only
    # scans charged for sampling + estimation before one is measured (``UseForecast.sampled_advice_rows``):
    # 0 for an explicit ``advisor recommend`` (the user asked for the estimate), ADVICE_PRIOR_SCANS
    # when a replay decides on its own whether advice is worth its cost
    advice_prior_scans: float = 0.0
    # weigh the sampling and estimation themselves (False for an explicit ``advisor recommend``:
    # the user asked for the estimate, so its cost is spent whatever the verdict)
    charge_advice: bool = True
    # a candidate no layout lets skip may be priced with the clustered layout it needs
    # (``advisor.selection.layout_cost``); False drops such candidates before sampling
    build_layouts: bool = True
    # disk the advisor's copies may take (``advisor.selection.copy_budget``); None: no limit
    copy_budget_bytes: Optional[float] = None


@dataclass
class UseForecast:
    """Predicted future use of the query template and update activity of the table."""
    reuses: float
    updates_per_use: float = 0.0
    delta_rows: float = 0.0
    scan_rate: float = PRIOR_ROWS_PER_S
    reason: str = "prior only"
    fixed_rows: float = 0.0             # a job's fixed cost in rows (``advisor.calibration.measured_costs``)
    capture_rows: float | None = None   # measured capture/recapture of this template, in rows
    inc_rows: float | None = None       # measured incremental maintenance step, in rows
    init_rows: float | None = None      # predicted operator-state initialisation, in rows
    advice_rows: float | None = None    # measured sampling + estimation of one recommendation, in rows
    capture_sunk: bool = False          # the sizing already captured every candidate (method exact)
    calibration: object = None          # the ``advisor.calibration.measured_costs.Calibration`` behind the figures
    steps_per_use: float | None = None  # maintenance steps per use under the policy; None: one per batch
    state_buyable: bool = True          # operator state may be bought (``maintain.rent.too_big``: not too many groups)
    reads: int = 1                      # accesses of the sampled table per run (Q18 reads lineitem twice): the
                                        # sketch filters each, so a use saves and a capture reads that many scans
    extra_rows: float = 0.0             # a sketched run's cost beyond a plain run of its rows, in rows
                                        # (``Calibration.sketched_extra_s``): paid by every use

    @property
    def steps(self) -> float:
        """Maintenance steps a used sketch pays per use (``Policy.steps_per_use``)."""
        return self.updates_per_use if self.steps_per_use is None else self.steps_per_use

    def sampled_advice_rows(self, table_rows: float, prior_scans: float = ADVICE_PRIOR_SCANS,
                            cached: bool = False, missing: int = 0, columns: int = 1) -> float:
        """Sampling + estimation of one recommendation in the cache state it will have: with
        ``cached`` its sample is stored already (no draw), ``missing`` partitions are still to build
        (``Calibration.sampled_rows``, from the measured parts of earlier advice); else the whole
        advice as measured, else a prior of ``prior_scans`` scans of the table plus as many jobs'
        fixed cost (a stratified draw counts the strata, then filters the table by key; both read
        it), only a job's fixed cost when the sample is cached.  Charging 0 before the first
        measurement let the demo's first template sample (1.4 s) and estimate for a sketch saving
        0.2 s a use."""
        cal = self.calibration
        split = cal.sampled_rows(cached, missing, table_rows, columns) if hasattr(cal, "sampled_rows") else None
        if split is not None:
            return split
        if self.advice_rows is not None:
            return self.advice_rows
        return self.fixed_rows if cached else prior_scans * (float(table_rows) + self.fixed_rows)

    def sizing_rows(self, missing: int, table_rows: float, columns: int = 1, warm: bool = False) -> float:
        """Predicted advice of a sizing without sampling (method exact, OPT) besides its capture job
        (``Calibration.sizing_rows``; ``columns``: how many of the table's columns a plain run reads)."""
        cal = self.calibration
        if cal is not None:
            return cal.sizing_rows(missing, table_rows, columns, warm)

        return missing * partition_prior_rows(table_rows, columns)


@dataclass
class Costing:
    """The cost figures of sketching one attribute at one granularity (rows of the table)."""
    attr: str
    n_target: int
    n_fragments: int
    sel: float
    sel_hi: float
    read: float              # expected fraction of the table still read with the sketch
    table_rows: float
    runs: float
    capture_rows: float
    saving_rows: float       # per use, before overheads
    overhead_rows: float     # per use: filter terms
    maintenance_rows: float  # per use
    reuses: float
    layout_rows: float       # this template's share of building the layout the sketch needs
    net_rows: float
    go: bool
    reason: str
    net_hi_rows: float = 0.0  # net at the interval's upper end of the size (``decided_by``)
    decided_by: str = "estimate"  # which size decided: "upper bound", "estimate" or a limit


    def seconds(self, rate: float) -> dict:
        r = max(rate, 1.0)
        return {"capture": self.capture_rows / r, "saving": self.reuses * self.saving_rows / r,
                "overhead": self.reuses * (self.overhead_rows + self.maintenance_rows) / r,
                "net": self.net_rows / r}


@dataclass
class Decision:
    """What a strategy picked and whether to capture it; ``reason`` says why with the numbers."""
    strategy: str
    attr: Optional[str]          # the candidate's key (``Candidate.key``: ``table.attr`` on a dimension)
    n_target: Optional[int]
    go: bool
    reason: str
    costing: Optional[Costing] = None
    pool: list = field(default_factory=list)
    ranking: list = field(default_factory=list)  # [(attr, sel)] best first (CB/OPT)


def cost(s: SizeSummary, attr: str, table_rows: float, w: UseForecast, p: CostParams,
         job_rows: float | None = None, joined_rows: float = 0.0, sketches: int = 1,
         layout_rows: float = 0.0, reads: int = 1) -> Costing:
    """Net benefit of capturing a sketch of size ``s`` and using it ``w.reuses`` times.  ``job_rows``
    (default: the table's rows) prices the capture and maintenance priors: a sketch of a joined
    dimension saves rows of that table but is captured and maintained with the whole query.
    ``joined_rows``: the fact rows such a sketch keeps out of the join (``join_share`` of their cost).
    ``sketches``: stored sketches behind the candidate (2 for a pair), each captured and maintained.
    ``layout_rows``: this template's share of building the layout the sketch needs to skip.
    ``reads``: the query's accesses of the sketched table, each filtered by the sketch."""
    T = float(table_rows)
    J = float(job_rows) if job_rows else T
    f = max(0.0, s.fragments)
    runs = min(f, f * (1.0 - f / max(s.n_fragments, 1)) + 1.0) if f else 0.0
    capture = capture_rows(J, w, p)
    charged = 0.0 if w.capture_sunk else sketches * capture  # exact sizing captured it already: sunk
    read = s.sel if s.read is None else s.read
    # a sketch leaving more than ``max_read`` to read is refused at use (measured slower than a plain
    # scan, ``sketch.lookup.MAX_USE_READ``): it saves nothing, and the net says so
    unused = s.read is not None and read > p.max_read
    saving = 0.0 if unused else (1.0 - read) * (reads * T + p.join_share * joined_rows)
    overhead = runs * (p.term_cost * s.sel * T + p.plan_rows) + w.extra_rows
    maint = sketches * w.steps * maintenance_per_update(J, capture, w, p)
    net = w.reuses * (saving - overhead - maint) - charged - layout_rows
    # the same at the interval's upper end: the sketch may be that large, and a go must pay there too
    read_hi = min(1.0, read + max(0.0, s.sel_hi - s.sel))
    saving_hi = 0.0 if unused or (s.read is not None and read_hi > p.max_read) else (
        (1.0 - read_hi) * (reads * T + p.join_share * joined_rows))
    net_hi = (w.reuses * (saving_hi - runs * (p.term_cost * s.sel_hi * T + p.plan_rows) - w.extra_rows - maint)
              - charged - layout_rows)
    scans = lambda x: x / T if T else 0.0  # noqa: E731
    reads = "" if s.read is None else f", scans still read ~{read:.1%} ({s.read_source})"
    figures = (f"{attr} at {s.n_fragments} fragments covers ~{s.sel:.1%} (upper {s.sel_hi:.1%}) of the table{reads}; "
               f"{w.reuses:g} predicted use(s) save {scans(w.reuses * saving):.2f} scans, cost "
               f"{scans(w.reuses * (overhead + maint)):.2f} (filter + maintenance) + capture {scans(charged):.2f}"
               f"{' (done while sizing)' if w.capture_sunk else ''}"
               f"{f' + its share of a layout build {scans(layout_rows):.2f}' if layout_rows else ''}"
               f" -> net {scans(net):+.2f} scans")
    go, why, by = _verdict(s, read, net, net_hi, p, scans)
    return Costing(attr, s.n_target, s.n_fragments, s.sel, s.sel_hi, read, T, runs, charged, saving, overhead,
                   maint, w.reuses, layout_rows, net, go, why + figures, net_hi, by)


def _verdict(s: SizeSummary, read: float, net: float, net_hi: float, p: CostParams, scans) -> tuple:
    """(go, the decision line's head, which bound decided).  A go must pay at the upper end of the
    size's interval as well as at its estimate (an exact size's interval is a point: the two agree)."""
    upper = "exact size" if s.ci_exact or s.sel_hi <= s.sel else f"upper bound {s.sel_hi:.1%}"
    if s.sel_hi > p.max_sel:
        return False, f"no-go: upper bound {s.sel_hi:.1%} > {p.max_sel:.0%} of the data (decided by the upper bound); ", \
            "upper bound"
    if s.read is not None and read > p.max_read and net <= 0:
        return False, (f"no-go: the sketch does not pay off: the files leave {read:.1%} of the data to read "
                       f"(> {p.max_read:.0%}), where a sketch's scan is not used (decided by the read share); "), \
            "read share"
    if net <= 0:
        return False, "no-go: the sketch does not pay off (decided by the estimate); ", "estimate"
    if net_hi <= 0:
        return False, (f"no-go: at its {upper} the sketch would not pay (net {scans(net_hi):+.2f} scans; "
                       "decided by the upper bound); "), "upper bound"
    if upper == "exact size":
        return True, f"go: pays at its exact size (net {scans(net_hi):+.2f} scans; decided by the exact size); ", \
            "exact size"
    return True, f"go: pays at its {upper} too (net {scans(net_hi):+.2f} scans; decided by the upper bound); ", \
        "upper bound"


def capture_rows(T: float, w: UseForecast, p: CostParams) -> float:
    """One capture: as measured for the template, else an instrumented run plus a job's fixed cost."""
    return w.capture_rows if w.capture_rows is not None else (1.0 + p.instr_overhead) * T * w.reads + w.fixed_rows


def incremental_step_rows(T: float, w: UseForecast, p: CostParams) -> float:
    """One incremental maintenance step in rows: as measured for the template, else the prior."""
    return w.inc_rows if w.inc_rows is not None else p.maint_fixed * T + p.maint_per_delta * w.delta_rows


def maintenance_per_update(T: float, capture: float, w: UseForecast, p: CostParams) -> float:
    """Rows one maintenance step costs a used sketch: an incremental step once operator state exists,
    or a recapture (ski rental, ``maintain.rent``) while initialising the state does not pay over
    the predicted steps -- whichever is cheaper over the horizon."""
    inc = incremental_step_rows(T, w, p)
    updates = w.reuses * w.steps
    if w.init_rows is None or updates <= 0:
        return inc
    return min(capture, (w.init_rows + updates * inc) / updates)


def maintenance_floor(T: float, capture: float, w: UseForecast, p: CostParams) -> float:
    """The cheapest a maintenance step can be predicted to cost: an incremental step, as if operator
    state were already held, unless the state is too big ever to be bought (then a recapture)."""
    inc = incremental_step_rows(T, w, p)
    return min(capture, inc) if w.state_buyable else capture


def cannot_pay(T: float, w: UseForecast, p: CostParams, advice_rows: float | None,
               advice_captures: bool = False) -> str | None:
    """Why no sketch of this template can pay off, decided before sampling, or None.

    Even a sketch that skips every row saves at most T per use; capture and the estimation itself
    are charged as measured (``advisor.calibration.measured_costs``).  With ``advice_captures`` (method exact: the
    sizing job is the capture) the larger of the two is charged, once.  Maintenance is charged at
    its floor (``maintenance_floor``): this verdict skips the estimation and is remembered for
    instances to come, so it must hold for the best case, and buying operator state is priced by
    the full model after sizing, over the predicted uses.  (Charging the amortised purchase here
    declined TPC-H SF1 topk_receipt for 10 of its first 14 instances: 3.02 scans of cost against
    at most 3.00 saved at its first, then a recapture per use once a batch had arrived.)"""
    capture = capture_rows(T, w, p)
    maint = w.steps * maintenance_floor(T, capture, w, p)
    if advice_captures:
        best = w.reuses * (w.reads * T - w.extra_rows - maint) - max(capture, advice_rows or 0.0)
    else:
        best = w.reuses * (w.reads * T - w.extra_rows - maint) - capture - (advice_rows or 0.0)
    if best > 0:
        return None
    scans = lambda x: x / T if T else 0.0  # noqa: E731
    return (f"no-go before sampling: even a sketch that skips every row would save at most "
            f"{scans(w.reuses * w.reads * T):.2f} scans over {w.reuses:g} predicted use(s), against capture "
            f"{scans(capture):.2f} + maintenance {scans(w.reuses * maint):.2f}"
            f"{f' + sketched runs own cost {scans(w.reuses * w.extra_rows):.2f}' if w.extra_rows else ''} + estimation "
            f"{scans(advice_rows or 0.0):.2f} (measured costs, else priors; one job's fixed cost = "
            f"{scans(w.fixed_rows):.2f} scans)")


def best_granularity(sizes: dict, attr: str, table_rows: float, w: UseForecast, p: CostParams,
                     fragments: Optional[int] = None, job_rows: float | None = None,
                     joined_rows: float = 0.0, sketches: int = 1, layout_rows: float = 0.0,
                     reads: int = 1) -> Optional[Costing]:
    """The granularity with the largest net benefit (or the one fixed by ``fragments``)."""
    opts = [cost(s, attr, table_rows, w, p, job_rows, joined_rows, sketches, layout_rows, reads)
            for n, s in sorted(sizes.items())
            if fragments in (None, n)]
    # a granularity that goes (pays at its upper bound too) before one that does not, then the net
    return max(opts, key=lambda c: (c.go, c.net_rows, -c.n_target)) if opts else None


def candidate_costing(c: Candidate, sizes: dict, table_rows: float, w: UseForecast, p: CostParams,
                      fragments: Optional[int] = None) -> Optional[Costing]:
    """``best_granularity`` for candidate ``c`` over ``sizes``: its own table's rows, the sampled
    table's rows (``table_rows``) for capture and maintenance, for a joined table's column the
    fact rows it keeps out of the join, and for the sampled table's column every access of it."""
    return best_granularity(sizes, c.attr, c.rows or table_rows, w, p, fragments, job_rows=table_rows,
                            joined_rows=table_rows if c.dim else 0.0, sketches=2 if c.attrs else 1,
                            layout_rows=c.layout["share_rows"] if c.layout else 0.0,
                            reads=1 if c.dim else w.reads)


def granularities_for(ndv: int, grans: tuple, strict: bool = False) -> tuple:
    """Granularities at which an attribute is a candidate (module docstring: NDV vs fragments).

    An attribute with 500 distinct values is sized at 100 fragments and at 1,000 (where its
    fragments hold one value each); with 50 only at the coarsest:

    >>> granularities_for(500, (100, 1000, 10000)), granularities_for(50, (100, 1000, 10000))
    ((100, 1000), (100,))"""
    if strict:
        return tuple(n for n in grans if ndv > n)
    if ndv <= 1:
        return ()
    out = [n for n in sorted(grans) if ndv > n]
    coarser = [n for n in sorted(grans) if ndv <= n]
    return tuple(out + coarser[:1])


