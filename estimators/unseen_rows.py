"""The unseen-row model of ``estimators.sketch_size``: the Dirichlet-posterior probability that a group's
unsampled rows reach a fragment its sampled rows did not (derivation in ``estimators.sketch_size``'s module
docstring), its concentration ``alpha``, the window cells, and the passing groups' prior mean.
Pure numpy; the sketch-size arithmetic that uses them stays in ``estimators.sketch_size``."""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln


def expected_distinct_fragments(q: np.ndarray, N: float) -> float:
    """``sum_r 1 - (1 - q_r)^N``: expected number of distinct fragments hit by N iid rows from q."""
    q = np.asarray(q, dtype=float)
    return float(np.sum(1.0 - (1.0 - q) ** N))


def unseen_touch_probability(n_g: np.ndarray, K_g: np.ndarray, pi: np.ndarray, alpha: float) -> np.ndarray:
    """``P(some of the K_g unsampled rows of g fall in r | none of its n_g sampled rows did)``.

    Shape ``(len(n_g), F)``.  ``pi`` is the prior mean of the group's fragment distribution, either
    one vector ``(F,)`` for all groups or one row per group ``(G, F)``.  Dirichlet(alpha*pi) prior,
    see the module docstring; ``alpha = 0`` gives 0 (no unseen fragments), ``inf`` gives
    ``1 - (1 - pi_r)^K``.
    """
    n_g = np.asarray(n_g, dtype=float)[:, None]
    K = np.asarray(K_g, dtype=float)[:, None]
    pi = np.asarray(pi, dtype=float)
    pi = pi[None, :] if pi.ndim == 1 else pi
    if alpha == 0:
        return np.zeros((n_g.shape[0], pi.shape[1]))
    return touch_cells(n_g, K, pi, alpha, group_term(n_g, K, alpha))


def group_term(n, K, alpha: float):
    """The part of the unseen-touch log-probability that depends on the group only:
    ``lgamma(alpha + n) - lgamma(alpha + n + K)`` (``a + b = alpha + n`` in every fragment)."""
    if alpha == 0 or np.isinf(alpha):
        return None
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return gammaln(alpha + n) - gammaln(alpha + n + K)


def touch_cells(n_g, K, pi, alpha: float, term) -> np.ndarray:
    """Elementwise ``unseen_touch_probability`` with the group term precomputed (two ``gammaln`` per
    cell instead of four)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if np.isinf(alpha):
            none = np.exp(K * np.log1p(-np.minimum(pi, 1.0)))
            none = np.where(pi >= 1.0, np.where(K > 0, 0.0, 1.0), none)
        else:
            a = alpha * pi
            b = alpha * (1.0 - pi) + n_g
            none = np.where(a > 0, np.exp(gammaln(b + K) - gammaln(b) + term), 1.0)
    t = 1.0 - none
    return np.clip(np.where(K > 0, t, 0.0), 0.0, 1.0)


def touch_probability(m_g: np.ndarray, n_g: int, N_g: float, pi: np.ndarray, alpha: float) -> np.ndarray:
    """Per-fragment probability that group g has at least one row in the fragment, given its sample.

    ``m_g``: sampled rows of g per fragment (length F), ``n_g = sum(m_g)``, ``N_g`` the group's
    population size, ``pi`` its prior mean fragment distribution.  1 where ``m_g > 0``; the
    Dirichlet-posterior predictive elsewhere.
    """
    m_g = np.asarray(m_g)
    t = unseen_touch_probability(np.array([n_g]), np.array([max(N_g - n_g, 0.0)]), pi, alpha)[0]
    return np.where(m_g > 0, 1.0, t)


def estimate_alpha(cell_count: np.ndarray, n_g: np.ndarray, pi_sq: np.ndarray | float) -> float:
    """Method-of-moments Dirichlet concentration from the within-group pair rate (module docstring).

    ``cell_count``: sampled rows of every observed (group, fragment) cell; ``n_g``: sampled rows per
    group; ``pi_sq``: ``sum_r pi_gr^2`` of each group's prior mean (a scalar if all groups share
    it).  Solves ``sum_g w_g (alpha * pi_sq_g + 1) / (alpha + 1) = sum m (m - 1)`` with
    ``w_g = n_g (n_g - 1)``.  Returns ``inf`` when no group has two sampled rows.
    """
    n_g = np.asarray(n_g, dtype=float)
    w = n_g * (n_g - 1.0)
    A = float(np.sum(w))
    if A <= 0:
        return float("inf")
    Pm = float(np.sum(w * np.broadcast_to(np.asarray(pi_sq, dtype=float), n_g.shape)))
    m = np.asarray(cell_count, dtype=float)
    S = float(np.sum(m * (m - 1.0)))
    if S >= A:
        return 0.0
    if S <= Pm:
        return float("inf")
    return (A - S) / (S - Pm)


def window_sums(values: np.ndarray, pos: np.ndarray, i0: np.ndarray, i1: np.ndarray) -> np.ndarray:
    """Per group, the sum of the fragments' ``values`` over the fragment positions ``[i0, i1)``:
    prefix sums in position order (``pos[r]`` is fragment r's position), one pass for all windows."""
    by_pos = np.zeros(values.shape[0])
    by_pos[pos] = values
    c = np.concatenate([[0.0], np.cumsum(by_pos)])
    return c[i1] - c[i0]


def window_cells(n_g, K_g, i0, i1, mass, pos, pi, alpha) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unseen-touch probabilities of groups whose prior is ``pi`` restricted to the fragment
    positions ``[i0, i1)`` and renormalised by ``mass``, as cells ``(group row, fragment, t)``; zero
    outside the window, so only the window's cells are listed.

    Groups with the same ``(n_g, K_g, window)`` share one evaluation (four ``gammaln`` per cell were
    ~1 s per estimation at SF1 when done densely); the values are the same elementwise formula as
    ``unseen_touch_probability``."""
    G, F = len(n_g), pi.shape[0]
    keys = np.stack([np.asarray(n_g, float), np.asarray(K_g, float), i0.astype(float), i1.astype(float)], axis=1)
    uk, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    first = np.zeros(uk.shape[0], dtype=np.int64)
    first[inv[::-1]] = np.arange(G)[::-1]
    um = mass[first]
    lo, hi = uk[:, 2].astype(np.int64), uk[:, 3].astype(np.int64)
    width = np.where(um > 0, np.maximum(hi - lo, 0), 0)
    empty = np.zeros(0, dtype=np.int64)
    if not width.sum():
        return empty, empty, np.zeros(0)
    frag = np.empty(F, dtype=np.int64)
    frag[pos] = np.arange(F)
    row = np.repeat(np.arange(uk.shape[0]), width)
    start = np.cumsum(width) - width
    r = frag[np.arange(row.shape[0]) - np.repeat(start, width) + lo[row]]
    with np.errstate(divide="ignore", invalid="ignore"):
        pi_c = np.nan_to_num(pi[r] / um[row])
    term = group_term(uk[:, 0], uk[:, 1], alpha)
    t_u = touch_cells(uk[row, 0], uk[row, 1], pi_c, alpha, None if term is None else term[row])
    # every group takes its key's cells
    gw = width[inv]
    g_row = np.repeat(np.arange(G), gw)
    at = np.arange(g_row.shape[0]) - np.repeat(np.cumsum(gw) - gw, gw) + np.repeat(start[inv], gw)
    return g_row, r[at], t_u[at]


LEAK_ROWS = np.logspace(0, 6, 25)  # pseudo-rows of the table's distribution searched by passing_prior (at least 1)
LEAK_CELLS = 20_000  # most sampled cells passing_prior's likelihood visits


def passing_prior(p, cert_g, cert_r, cell_m, pi, F) -> np.ndarray | None:
    """Prior mean of the passing groups' fragment distribution: their sampled rows' fragments
    (weighted by pass probability, ``h``) with ``beta`` pseudo-rows of the table's distribution ``pi``,
    ``(h + beta * pi) / (H + beta)``; ``beta`` is the value in ``LEAK_ROWS`` whose leave-one-group-out
    likelihood of the passing groups' sampled rows is highest.  None when fewer than two groups can
    pass.  ``beta >= 1`` keeps every fragment the table reaches reachable: two passing groups seen in
    one fragment are no proof that the others are empty.

    Why: the table's distribution is the mean over all groups, but the sketch is made of the
    passing ones, and which groups pass depends on where their rows lie: flights' busy hours carry
    other flight numbers and departure times than quiet ones.  Unseen rows of passing groups drawn
    from the table's distribution reached every fragment and sized dep_time for busy hours at
    0.98 against 0.68."""
    w = np.minimum(p[cert_g], 1.0)
    live = w > 0  # only cells of groups that can pass (a few per cent of them for a selective HAVING)
    cert_g, cert_r, w = cert_g[live], cert_r[live], w[live]
    if np.unique(cert_g).shape[0] < 2:
        return None
    wm = w * cell_m[live]
    h = np.bincount(cert_r, weights=wm, minlength=F)
    H = float(h.sum())
    n_w = np.bincount(cert_g, weights=wm)
    # leave the group out: its own rows count neither in h nor in H
    rest_h, rest_H, a = h[cert_r] - wm, H - n_w[cert_g], pi[cert_r]
    if wm.shape[0] > LEAK_CELLS:  # one scalar: an even stride of the cells estimates it as well
        pick = np.linspace(0, wm.shape[0] - 1, LEAK_CELLS).astype(np.int64)
        wm, rest_h, rest_H, a = wm[pick], rest_h[pick], rest_H[pick], a[pick]
    b = LEAK_ROWS[:, None]
    pred = (np.maximum(rest_h, 0.0)[None, :] + b * a[None, :]) / (np.maximum(rest_H, 0.0)[None, :] + b)
    beta = float(LEAK_ROWS[int(np.argmax(np.log(np.maximum(pred, 1e-300)) @ wm))])
    return (h + beta * pi) / (H + beta)
