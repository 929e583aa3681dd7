r"""Sketch-size estimators for one candidate attribute (digest §2.9, §2.11, C9).

Inputs: the sample (pandas) with a fragment-id column for the candidate (``frag``, from the
candidate's range partition) and the group columns; a ``groups`` table with one row per group and
its pass probability ``p`` (from ``having.pass_probability``, ``topk`` or ``estimate_nested``);
the fragment sizes ``|R_r|`` of the full table.  Outputs a ``SizeEstimate`` with three estimators:

(a) **Point, Algorithm 2** [PAPER]: groups judged to pass (``p_g >= 0.5`` by default, or the
    paper's point classification via ``point_pass``) are mapped to fragments and the full fragment
    sizes are summed: ``size~ = sum_{r in R_sat} |R_r|``.  The paper maps groups to fragments with a
    scan of the full relation; here the mapping is whatever is *certain*: an exact ``mapping``
    (group -> fragments, e.g. from one batched semi-join on Spark) if given, otherwise the fragments
    of the group's sampled rows.  The latter is exact when the candidate is a group-by attribute or
    functionally determined by the group key (``determined=True``: every row of a group has the same
    value, so its one sampled row reveals the group's only fragment) and a lower bound otherwise.

(b) **Expectation** (Definition 9 corrected, digest §2.11) [INFERRED]:
    ``E[rows] = sum_r |R_r| * (1 - prod_g (1 - p_g * t_gr))`` and
    ``E[fragments] = sum_r (1 - prod_g (1 - p_g * t_gr))`` where ``t_gr = P(group g has a row in
    fragment r)``.  Assumes groups pass independently and passing is independent of where a group's
    unseen rows lie.  ``t_gr = 1`` for certain cells; 0 or the model below otherwise.
    When ``p`` is the mean of ``pass_replicates`` (the bootstrap), the expectation is instead the
    replicates' mean coverage ``mean_b sum_r |R_r| (1 - prod_{g passes in b} (1 - t_gr))``
    (``JOINT_EXPECTATION``): the replicates carry the prior mean's error shared by neighbouring
    groups (``estimators.prior_noise``), so groups that pass together count once.  TPC-H SF1's
    selective median error went from 7.6 % to 5.2 % with both (BENCHMARKS.md).

(c) **Interval** on the rows: with ``pass_replicates`` (B x G booleans -- bootstrap replicates, or
    parametric ones for the CLT) each replicate fixes the set of passing groups; the fragment
    probabilities given that set, ``1 - prod_{g passes in b}(1 - t_gr)``, are drawn as independent
    Bernoullis (deterministic when all ``t`` are 0/1), and the covered rows' percentile interval is
    returned (``method='replicates'``).  This keeps the strong positive correlation between fragments
    touched by the same group.  Without replicates: a Poisson-binomial normal approximation
    ``mean +- z * sqrt(sum_r |R_r|^2 P_r (1 - P_r))`` treating fragments as independent -- too narrow
    when groups span many fragments (``method='normal'``).

    **Model replicates** (``model_replicates``): pass replicates of the same groups under a second
    model -- the paper's unshrunk bootstrap beside the shrinkage model (``estimators.shrinkage``).
    The bootstrap varies the sample, not the model fitted to it: with thousands of groups the
    pass-set noise averages out, and the interval is narrow around a centre the shrinkage prior has
    moved (flights' delays are heavy-tailed; the prior is normal).  The interval is the hull of the
    two models' replicate intervals; the expectation stays the first model's.  On flights' 50
    generated advice queries the coverage went from 70.5 % to 83.5 % of (query, candidate) pairs,
    and from 56 % to 86 % of those whose sketch holds under 90 % of the table (BENCHMARKS.md).

    **Model bounds** (``MODEL_BOUNDS``, a candidate mapped by the unseen-row model below): the
    replicates vary which groups pass, not the model that places their unseen rows, and that model's
    error (its concentration ``alpha``, its windows) is systematic: on the advice harness's selective
    shape families the intervals of such candidates held the real size for 20-50 % of them.  The
    interval is widened to the model's own bounds per replicate -- from the fragments the passing
    groups' sampled rows touch (no unseen row elsewhere) to those their windows reach (an unseen
    row in each) -- a Haas-style bound that holds whatever ``alpha`` is, as long as the windows do.
    The windows are expected spreads, so the upper end goes on to each passing group's *reach*,
    where all its rows may lie at the interval's level (``estimators.window_bounds``): with it the
    shape families' count-over-many-groups intervals held the real size for 100 % of (query,
    candidate) pairs on TPC-H and crimes, against 81.8 % and 71.1 % with the windows alone.

    **Confident lower end** (``CONFIDENT_LOWER``): the lower end goes down to the rows of the groups
    that pass with probability at least ``1 - (1 - confidence) / 2``
    (``estimators.interval_ends.confident_rows``); over an upper-tail threshold every replicate
    passed noise-lifted groups, and product sums' intervals lay above the truth.

Unseen rows of a group (candidate not determined by the group key) -- derivation
--------------------------------------------------------------------------------
A stratified sample shows only ``n_g`` of the ``N_g`` rows of group g, so only some of the fragments
the group touches.  Model the group's rows as exchangeable draws from a group-specific fragment
distribution ``q_g`` (a probability vector over fragments).

* Known ``q_g``, all ``N_g`` rows unseen (the brief's formula): fragment r is missed with
  probability ``(1 - q_gr)^{N_g}``, so ``E[#distinct fragments] = sum_r 1 - (1 - q_gr)^{N_g}``
  (``expected_distinct_fragments``, checked by brute-force enumeration in the tests).
* Given the sample: a fragment holding a sampled row (``m_gr > 0``) is touched for certain; only the
  ``K_g = N_g - n_g`` unsampled rows are unknown, so ``t_gr = 1 - (1 - q_gr)^{K_g}`` for unobserved
  fragments.  Using all ``N_g`` rows would double count the observed ones.
* ``q_gr`` is unknown.  Plugging in the empirical ``m_gr / n_g`` puts zero mass on every unobserved
  fragment and reproduces the sample-only lower bound (it underestimated the number of fragments by
  14-79 % on our synthetic tables).  Instead we put a Dirichlet prior ``q_g ~ Dir(alpha * pi_g)``
  on it.  For an unobserved fragment the posterior of ``q_gr`` is ``Beta(a, b)`` with
  ``a = alpha*pi_gr``, ``b = alpha*(1 - pi_gr) + n_g``, and
  ``P(no unseen row in r) = E[(1-q)^K] = B(a, b+K) / B(a, b)`` (the Polya-urn predictive; checked
  by enumeration), hence ``t_gr = 1 - exp(lnG(b+K) + lnG(a+b) - lnG(b) - lnG(a+b+K))``.
* Prior mean ``pi_g`` -- where unseen rows may go.  Fragments of a range partition are ordered, and
  a candidate that makes a good sketch is correlated with the group, so a group's rows sit in a run
  of neighbouring fragments.  ``pi_g`` is the table's row distribution ``|R_r| / |R|`` restricted to
  a *window* of fragment positions around the group's sampled fragments and renormalised
  (``estimators.windows.group_windows``: the observed span widened by the German-tank estimate of
  the unseen part, widths pooled across groups, and clipped to the union of the spans of other
  groups that contain the group's own when enough of them do).  With ``window=False``
  ``pi_g`` is the whole table's distribution; that variant behaves like a Chinese-restaurant
  process whose number of fragments keeps growing with ``K`` and overestimated 2x on concentrated
  groups in our synthetic tests.  An independent candidate is handled too: the sampled rows then
  span the table, and so does the window.
* Prior mean of the *passing* groups (``passing_prior``).  Which groups pass depends
  on where their rows lie (flights' busy hours carry other flight numbers and departure times than
  quiet ones), so the table's distribution is the wrong mean for them.  Their sampled rows'
  fragments, weighted by pass probability, replace it, mixed with the table's distribution at the
  share the other passing groups cannot predict (leave-one-group-out).  Flights' selective median
  error went from 5.5 % to 3.9 % with it (BENCHMARKS.md); a share of a few per cent still
  leaks when many unseen rows are drawn, so such sketches stay over- rather than under-estimated.
* ``alpha`` -- how concentrated a group is *within* its window: ``alpha -> 0`` means each group lives
  in the fragments it was seen in, ``alpha -> inf`` means ``q_g = pi_g``.  Estimated by the method of
  moments from the sample: under the model two distinct rows of one group share a fragment with
  probability ``(alpha * S_g + 1) / (alpha + 1)``, ``S_g = sum_r pi_gr^2``; matching the observed
  pooled pair count ``sum_{g,r} m_gr (m_gr - 1)`` against ``sum_g n_g (n_g - 1)`` gives a closed form
  (``estimate_alpha``).  No group with two sampled rows means no information: ``alpha = inf``, the
  conservative choice (over- rather than under-estimates sizes, so a useless sketch is not chosen on
  false hope).  ``SizeEstimate.alpha`` reports the value used.
* Assumptions [INFERRED]: one ``alpha`` for all groups; contiguous groups (a bimodal group's window
  covers the gap between its modes -- overestimate); a skewed group's long tail beyond the window
  is missed (underestimate); pair rates treat the finite group as infinite.  On synthetic tables
  (uniform, skewed, bimodal, independent; groups of 5-300 rows, theta = 0.1) the expected fragment
  count was within -26 %..+54 % of the truth (the +54 % on bimodal groups), versus -14 %..-79 % for
  the sample-only count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from estimators import unseen_groups
from estimators.having import decided, pass_matrix, pass_probability, point_pass
from estimators.fragment_coverage import (
    coverage, miss_to_probability, model_bounds, normal_interval, replicate_interval)
from estimators.fragment_cells import (
    CellModel, fragment_table, lookup_fragments, lookup_groups, range_positions)
from estimators.unseen_rows import (
    estimate_alpha, expected_distinct_fragments, group_term, passing_prior, touch_cells, touch_probability,
    unseen_touch_probability, window_sums)
from estimators.windows import group_windows  # noqa: F401 - re-exported
from estimators.window_bounds import reach, reach_windows, upper_end
from estimators.interval_ends import confident_rows, point_margin, undecided_margin


@dataclass
class SizeEstimate:
    """Estimated sketch size for one candidate attribute.

    Rows are tuples of the full table covered by the sketch's fragments (the paper's ``size``);
    selectivity is rows / total rows (lower is better).  ``ci_lo``/``ci_hi`` are in rows.
    ``method`` is how the interval was computed (``'replicates'`` or ``'normal'``); ``touch`` how
    groups were mapped to fragments (``'mapping'``, ``'determined'``, ``'model'``), ``alpha`` the
    concentration used by the model (``nan`` when unused).
    """

    fragments_point: int
    fragments_expected: float
    rows_expected: float
    selectivity_expected: float
    ci_lo: float
    ci_hi: float
    method: str
    rows_point: float = 0.0
    selectivity_point: float = 0.0
    total_rows: float = 0.0
    n_fragments: int = 0
    touch: str = "determined"
    alpha: float = float("nan")
    confidence: float = 0.95
    point_fragments: tuple = ()
    fragment_probability: pd.Series = field(default=None, repr=False)
    settled: bool = False  # stopped once covering >= 1 - SETTLE_EPS: the sizes are lower bounds within it
    # passing groups expected among those the sample missed (``estimators.unseen_groups``; 0 when all are sampled)
    unseen_groups: float = 0.0
    # the interval is a point because the estimate is exact by construction: no group missing from
    # the sample, every group's fragments known, and every replicate agreeing on which groups pass
    exact: bool = False
    # (B, F) per replicate: P(fragment covered | that replicate's passing groups); None without replicates.
    # Two candidates sized from the same replicates can be combined per replicate (``estimators.pair_size``).
    replicate_probability: np.ndarray | None = field(default=None, repr=False)
    # the same for the second model's replicates (``model_replicates``); None without them
    model_probability: np.ndarray | None = field(default=None, repr=False)

    @property
    def selectivity_ci(self) -> tuple[float, float]:
        """The row interval as fractions of the table."""
        t = self.total_rows or 1.0
        return self.ci_lo / t, self.ci_hi / t


def group_rows(groups: pd.DataFrame, sample: pd.DataFrame, group_cols) -> np.ndarray:
    """Row of ``groups`` holding each sample row's group (-1 if none): ``estimate_size``'s
    ``sample_groups``."""
    return lookup_groups(groups, sample, list(group_cols))


def sizing_rows(passes: np.ndarray, pdf: pd.DataFrame, est, gcols: list) -> np.ndarray:
    """Which sample rows the sizes map to fragments: those passing the WHERE, and the failing rows
    of a group that may pass although the sample shows none of its passing rows (a filtered
    COUNT's latent stratum, ``estimators.aggregates``): they stand where its unseen passing rows
    are."""
    latent = est.exists.any(axis=0) & ~est.point_exists
    if not latent.any():
        return passes
    gi = group_rows(est.frame, pdf, gcols)
    return passes | ((gi >= 0) & latent[np.maximum(gi, 0)])


NONE_MISSING = 1e-9  # passing groups expected missing from the sample below which none are
MODEL_BOUNDS = True  # intervals of model-mapped candidates span the unseen-row model's bounds (model_bounds)
CONFIDENT_LOWER = True  # the lower end reaches down to the confidently passing groups' rows (confident_rows)
REACH_CONFIDENCE = 0.95  # two-sided level of a group's reach (estimators.window_bounds) in the upper end
PASS_PRIOR = True  # unseen rows of passing groups follow the passing groups' sampled fragments (passing_prior)
JOINT_EXPECTATION = True  # expected size as the replicates' mean coverage (keeps their correlation)


def estimate_size(sample: pd.DataFrame, groups: pd.DataFrame, fragment_sizes, *,
                  group_cols: Sequence[str], frag_col: str = "frag", p_col: str = "p",
                  total_rows: float | None = None, pass_replicates: np.ndarray | None = None,
                  point_pass: np.ndarray | None = None, mapping: pd.DataFrame | None = None,
                  determined: bool = False, alpha: float | None = None, n_col: str = "_n_g",
                  N_col: str = "N", window: bool = True, confidence: float = 0.95, seed: int = 0,
                  chunk_cells: int = 2_000_000, sample_groups: np.ndarray | None = None,
                  reuse: dict | None = None, group_rate: float | None = None,
                  model_replicates: np.ndarray | None = None,
                  decided_groups: np.ndarray | None = None, passing_total: float | None = None) -> SizeEstimate:
    """Point, expected and interval sketch size for one candidate (see the module docstring).

    ``sample``: sample rows with ``group_cols`` and ``frag_col``; ``groups``: one row per group with
    ``group_cols``, ``p_col`` and optionally ``N_col`` (population rows; else the sample's ``n_col``);
    groups missing from ``groups`` count as never passing.  ``fragment_sizes``: dict/Series
    ``frag id -> |R_r|`` or an array indexed by fragment id.  ``pass_replicates``: optional ``(B, G)``
    booleans aligned with ``groups`` (enables the replicate interval).  ``point_pass``: optional
    ``(G,)`` booleans for the point estimate (default ``p >= 0.5``).  ``mapping``: optional exact
    group -> fragment table (``group_cols`` + ``frag_col``).  ``determined``: the candidate is a
    group-by attribute or functionally determined by the group key.  Otherwise unseen rows are
    modelled (``touch='model'``): ``alpha`` fixes the concentration instead of estimating it
    (``alpha=0`` is the sample-only lower bound), ``window=False`` drops the locality window.
    Group -> fragment probabilities are built in dense blocks of about ``chunk_cells`` cells.
    ``sample_groups``: optional ``group_rows(groups, sample, group_cols)``, precomputed once when
    several candidates are sized over the same sample and groups (the lookup is a multi-column join).
    ``reuse``: a dict the threshold-free part (observed cells, unseen-row model, windows) is kept in
    on the first call and read from on later calls with the same sample, groups (in the same order),
    fragments and options but other pass probabilities -- the next HAVING constant or LIMIT.
    ``group_rate``: the rate at which the sample drew a group's rows when groups are not its strata
    (a uniform sample, or group keys that span strata), so whole groups can be missing from it: the
    expectation and interval then count the passing ones among them (``estimators.unseen_groups``).  None:
    every group of the population is in the sample.  ``model_replicates``: optional ``(B2, G)``
    booleans, which groups pass under a second model; the interval then spans both models' (module
    docstring), the expectation and point stay this model's.  ``decided_groups``: optional ``(G,)``
    booleans, whose pass is known without sampling error (``having.decided``); an interval of
    width zero is labelled exact only when all are.  ``passing_total``: how many groups pass in all
    (a top-k's k), which caps the passing groups counted as missing from the sample.
    """
    group_cols = list(group_cols)
    ids, sizes = fragment_table(fragment_sizes)
    F = sizes.shape[0]
    total = float(sizes.sum()) if total_rows is None else float(total_rows)
    if total <= 0:
        raise ValueError("total_rows must be > 0")
    G = len(groups)
    p = np.clip(groups[p_col].to_numpy(dtype=float), 0.0, 1.0) if G else np.zeros(0)
    if pass_replicates is not None:
        pass_replicates = np.asarray(pass_replicates, dtype=bool)
        if pass_replicates.ndim != 2 or pass_replicates.shape[1] != G:
            raise ValueError(f"pass_replicates must have shape (B, {G})")
    pt = (p >= 0.5) if point_pass is None else np.asarray(point_pass, dtype=bool)
    if reuse:
        prep = reuse
    else:
        prep = _prepare(sample, groups, ids, sizes, group_cols, frag_col, mapping, determined, alpha, n_col,
                        N_col, window, sample_groups)
        if reuse is not None:
            reuse.update(prep)
    est = _size(p, pt, pass_replicates, sizes, ids, total, F, prep, chunk_cells, confidence, seed,
                model_replicates)
    est = _account_unseen(est, p, prep, sizes, total, group_rate, confidence, passing_total)
    B = pass_replicates.shape[0] if pass_replicates is not None else 0
    dec = np.zeros(G, dtype=bool) if decided_groups is None else np.asarray(decided_groups, dtype=bool)
    if decided_groups is not None and not dec.all():
        est.exact = False
        undecided_margin(est, p, dec, prep, sizes, total, B)
    if not est.exact:
        point_margin(est, p, dec, prep, sizes, total, B)
    return est


def _account_unseen(est: SizeEstimate, p: np.ndarray, prep: dict, sizes: np.ndarray, total: float,
                    group_rate: float | None, confidence: float, passing_total: float | None) -> SizeEstimate:
    """Add the passing groups missing from the sample (``estimators.unseen_groups``), and label an
    interval that is a point by construction: every group sampled, or none that passes likely
    missing (``NONE_MISSING``: groups of a thousand rows each at 5 %), and every group's fragments
    known."""
    est.unseen_groups = 0.0
    if group_rate is not None and 0.0 < group_rate < 1.0 and p.size:
        cap = None if passing_total is None else max(float(passing_total) - float(p.sum()), 0.0)
        unseen_groups.account(est, p, prep, sizes, total, group_rate, confidence, cap)
    complete = group_rate is None or group_rate >= 1.0 or est.unseen_groups <= NONE_MISSING
    known = prep["touch"] != "model" or not np.any(prep["K_g"] > 0)  # every group's fragments known
    est.exact = bool(complete and known and est.ci_hi - est.ci_lo <= 0.0)
    return est


def _prepare(sample, groups, ids, sizes, group_cols, frag_col, mapping, determined, alpha, n_col, N_col, window,
             sample_groups) -> dict:
    """The part of ``estimate_size`` that does not depend on the pass probabilities."""
    G, F = len(groups), sizes.shape[0]
    # observed cells (group, fragment) with sample counts
    if sample_groups is None:
        sg = lookup_groups(groups, sample, group_cols)
    else:
        sg = np.asarray(sample_groups, dtype=np.int64)
        if sg.shape != (len(sample),):
            raise ValueError(f"sample_groups must have shape ({len(sample)},)")
    keep = sg >= 0
    sf = lookup_fragments(ids, sample[frag_col][keep], "sample")
    sg = sg[keep]
    n_g = np.bincount(sg, minlength=G).astype(float)
    codes, m_cell = np.unique(sg * F + sf, return_counts=True)
    obs_g, obs_r = codes // F, codes % F

    if N_col in groups.columns:
        N_g = groups[N_col].to_numpy(dtype=float)
    elif n_col in sample.columns and G:
        N_g = np.zeros(G)
        np.maximum.at(N_g, sg, sample[n_col].to_numpy(dtype=float)[keep])
    else:
        N_g = n_g.copy()
    K_g = np.maximum(N_g - n_g, 0.0)
    pi = sizes / sizes.sum() if sizes.sum() > 0 else np.full(F, 1.0 / max(F, 1))

    if mapping is not None:
        touch = "mapping"
        mg = lookup_groups(groups, mapping, group_cols)
        mk = mg >= 0
        mr = lookup_fragments(ids, mapping[frag_col][mk], "mapping")
        cert = np.unique(np.concatenate([codes, mg[mk] * F + mr]))
        alpha_used = float("nan")
    elif determined:
        touch, cert, alpha_used = "determined", codes, float("nan")
    else:
        touch, cert = "model", codes
        pos = range_positions(ids)
        if window:
            wlo, whi = group_windows(obs_g, pos[obs_r], n_g, G)
        else:
            wlo, whi = np.full(G, -np.inf), np.full(G, np.inf)
        i0 = np.clip(np.ceil(wlo), 0, F).astype(np.int64)
        i1 = np.clip(np.floor(whi) + 1, 0, F).astype(np.int64)
        mass = np.maximum(window_sums(pi, pos, i0, i1), 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            pi_sq = np.where(mass > 0, window_sums(pi ** 2, pos, i0, i1) / mass ** 2, 1.0)
        alpha_used = float(alpha) if alpha is not None else estimate_alpha(m_cell, n_g, pi_sq)
    out = dict(n_g=n_g, K_g=K_g, pi=pi, touch=touch, alpha=alpha_used, cert_g=cert // F, cert_r=cert % F,
               cell_m=m_cell.astype(float) if touch == "model" else None)
    if touch == "model":
        out.update(pos=pos, i0=i0, i1=i1, mass=mass)
        if window and MODEL_BOUNDS:
            rlo, rhi = reach(obs_g, pos[obs_r], m_cell, n_g, N_g, G, (1.0 - REACH_CONFIDENCE) / 2.0)
            out["reach"] = reach_windows(i0, i1, rlo, rhi, F)
    order = np.argsort(out["cert_g"], kind="stable")
    out.update(cg_sorted=out["cert_g"][order], cr_sorted=out["cert_r"][order])
    return out


def _size(p, pt, pass_replicates, sizes, ids, total, F, prep: dict, chunk_cells, confidence, seed,
          model_replicates=None) -> SizeEstimate:
    """The pass-probability part of ``estimate_size``: point, expectation and interval."""
    pf = _point_fragments(pt, prep["cert_g"], prep["cert_r"])
    rows_point = float(sizes[pf].sum())
    cells = _cell_model(p, prep, F)
    B = 0 if pass_replicates is None else pass_replicates.shape[0]
    reps = pass_replicates  # both models' replicates in one pass over the groups
    if reps is not None and model_replicates is not None:
        model_replicates = np.asarray(model_replicates, dtype=bool)
        if model_replicates.ndim != 2 or model_replicates.shape[1] != p.shape[0]:
            raise ValueError(f"model_replicates must have shape (B, {p.shape[0]})")
        reps = np.concatenate([reps, model_replicates])
    gl = _relevant_groups(p, pt, reps)
    cov = coverage(p, reps, gl, cells, _reachable(prep["cert_r"], cells), sizes, total, chunk_cells)
    P = miss_to_probability(cov.log_miss)
    Pb = Pm = None
    if reps is not None:
        Pb = np.clip(np.where(cov.C > 0, 1.0, -np.expm1(cov.L)), 0.0, 1.0)
        Pb, Pm = Pb[:B], (Pb[B:] if Pb.shape[0] > B else None)
        if JOINT_EXPECTATION and not cov.settled and np.allclose(p, pass_replicates.mean(axis=0), atol=1e-9):
            P = Pb.mean(axis=0)
    frags_exp, rows_exp = float(P.sum()), float(P @ sizes)
    if Pb is not None:
        (ci_lo, ci_hi), method = replicate_interval(Pb, sizes, confidence, seed), "replicates"
        if Pm is not None:
            lo2, hi2 = replicate_interval(Pm, sizes, confidence, seed)
            ci_lo, ci_hi = min(ci_lo, lo2), max(ci_hi, hi2)
        if MODEL_BOUNDS and cells.use_model and not cov.settled:  # settled: the groups read cover the table
            lo3, hi3 = model_bounds(cov.C, cov.L, sizes, confidence)
            if "reach" in prep:  # where all of a passing group's rows may lie, not their expected spread
                hi3 = max(hi3, upper_end(reps, gl, prep["K_g"], *prep["reach"], prep["pos"], cov.C > 0, sizes,
                                         confidence))
            ci_lo, ci_hi = min(ci_lo, lo3), max(ci_hi, hi3)
        if CONFIDENT_LOWER:
            ci_lo = min(ci_lo, confident_rows(p, prep, sizes, confidence))
    else:
        (ci_lo, ci_hi), method = normal_interval(P, rows_exp, sizes, total, confidence), "normal"
    return SizeEstimate(
        fragments_point=int(pf.shape[0]), fragments_expected=frags_exp, rows_expected=rows_exp,
        selectivity_expected=rows_exp / total, ci_lo=ci_lo, ci_hi=ci_hi, method=method,
        rows_point=rows_point, selectivity_point=rows_point / total, total_rows=total,
        n_fragments=F, touch=prep["touch"], alpha=prep["alpha"], confidence=confidence,
        point_fragments=tuple(ids[pf].tolist()), fragment_probability=pd.Series(P, index=ids, name="p"),
        settled=cov.settled, replicate_probability=Pb, model_probability=Pm)


def _point_fragments(pt: np.ndarray, cert_g: np.ndarray, cert_r: np.ndarray) -> np.ndarray:
    """Algorithm 2: the fragments certainly touched by the groups judged to pass (``pt``)."""
    return np.unique(cert_r[pt[cert_g]]) if cert_g.size else np.zeros(0, dtype=np.int64)


def _cell_model(p: np.ndarray, prep: dict, F: int) -> CellModel:
    """The cell mapping for these pass probabilities: the unseen-row model is off for ``alpha = 0``,
    and its prior mean follows the passing groups' sampled fragments (``PASS_PRIOR``) when they say
    enough."""
    pi, alpha_used = prep["pi"], prep["alpha"]
    pos, i0, i1, mass = (prep.get(k) for k in ("pos", "i0", "i1", "mass"))
    use_model = prep["touch"] == "model" and alpha_used != 0
    if use_model and PASS_PRIOR:
        pi_p = passing_prior(p, prep["cert_g"], prep["cert_r"], prep["cell_m"], pi, F)
        if pi_p is not None:
            pi, mass = pi_p, np.maximum(window_sums(pi_p, pos, i0, i1), 0.0)
    return CellModel(F=F, cg_sorted=prep["cg_sorted"], cr_sorted=prep["cr_sorted"], use_model=use_model,
                     alpha=alpha_used, n_g=prep["n_g"], K_g=prep["K_g"], pi=pi, pos=pos, i0=i0, i1=i1, mass=mass)


def _relevant_groups(p: np.ndarray, pt: np.ndarray, pass_replicates: np.ndarray | None) -> np.ndarray:
    """The groups that can pass: in expectation, by the point rule or in some replicate."""
    relevant = (p > 0) | pt
    if pass_replicates is not None:
        relevant |= pass_replicates.any(axis=0)
    return np.flatnonzero(relevant)


def _reachable(cert_r: np.ndarray, cells: CellModel) -> np.ndarray:
    """Fragments some group can reach (a sampled row, or prior mass under the model); the others
    stay uncovered and are left out of the saturation check."""
    reach = np.zeros(cells.F, dtype=bool)
    reach[cert_r] = True
    if cells.use_model:
        reach |= cells.pi > 0
    return reach


def size_for_having(sample: pd.DataFrame, est, predicate, fragment_sizes, *, frag_col: str = "frag",
                    point_rule: str = "p>=0.5", **kwargs) -> SizeEstimate:
    """Convenience: ``estimate_size`` for a HAVING query from ``aggregates.GroupEstimates``.

    ``point_rule``: ``'p>=0.5'`` (default) or ``'estimate'`` (the paper's Algorithm 1 classification
    by point estimate).  Other keyword arguments go to ``estimate_size``.
    """

    groups = est.frame[est.group_cols + ["N"]].copy()
    groups["p"] = pass_probability(est, predicate).to_numpy()
    if point_rule not in ("p>=0.5", "estimate"):
        raise ValueError("point_rule must be 'p>=0.5' or 'estimate'")
    pp = point_pass(est, predicate) if point_rule == "estimate" else None
    return estimate_size(sample, groups, fragment_sizes, group_cols=est.group_cols, frag_col=frag_col,
                         pass_replicates=pass_matrix(est, predicate), point_pass=pp,
                         decided_groups=decided(est, predicate), **kwargs)
