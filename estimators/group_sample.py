"""A stratified sample laid out for per-group estimation (``aggregates.estimate_groups``): group and
stratum codes, the WHERE mask and the aggregated values in a canonical row order, and exact groups."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np
import pandas as pd

from estimators.bootstrap import GroupIndex, point_weights, stratum_sizes


@dataclass
class GroupedSample:
    """The sample rows in canonical order, with what every estimation step reads from them.

    ``si``/``gi``: stratum and group code per row; ``u``: the WHERE mask; ``vals``: value column ->
    float values (NaN = NULL); ``keys``: one row of group-column values per group; ``N_h``: validated
    population size per stratum; ``w0``: the point estimate's row weights; ``exact``: the group is
    fully sampled; ``pexists``: the group has a sampled row passing WHERE.
    """

    keys: pd.DataFrame
    G: int
    si: np.ndarray
    gi: np.ndarray
    u: np.ndarray
    vals: dict
    gidx: GroupIndex
    N_h: np.ndarray
    w0: np.ndarray
    exact: np.ndarray
    pexists: np.ndarray


def where_mask(df: pd.DataFrame, where: Union[str, np.ndarray, None]) -> np.ndarray:
    """The WHERE indicator per row from a column name (NULL fails), a boolean array or None (all
    rows pass)."""
    if isinstance(where, str):
        return df[where].fillna(False).to_numpy(dtype=bool)
    if where is None:
        return np.ones(len(df), dtype=bool)
    u = np.asarray(where, dtype=bool)
    if u.shape[0] != len(df):
        raise ValueError("where mask length differs from the sample")
    return u


def stratum_codes(df: pd.DataFrame, gi: np.ndarray, n_col: str, strata_col: str) -> tuple[np.ndarray, np.ndarray]:
    """Stratum code per row (each group its own stratum without ``strata_col``) and the population
    size of each stratum, which ``n_col`` must hold constant within the stratum."""
    if strata_col and strata_col in df.columns:
        si, _ = pd.factorize(df[strata_col], sort=True, use_na_sentinel=False)
        si = si.astype(np.int64)
    else:
        si = gi.copy()
    H = int(si.max()) + 1
    Ncol = df[n_col].to_numpy(dtype=float)
    N_h = np.full(H, -np.inf)
    N_h[si] = Ncol  # one of each stratum's values; all of them agree with it iff it is constant
    if not np.array_equal(N_h[si], Ncol):
        raise ValueError(f"{n_col} must be constant within a stratum")
    return si, N_h


def canonical_order(df: pd.DataFrame, value_cols: list, u: np.ndarray, gi: np.ndarray,
                    si: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """``si``, ``gi``, ``u`` and the value columns sorted by stratum, group, WHERE and then the values.

    Identical rows are interchangeable, so resampling in this order makes the replicates independent
    of the input row order.
    """
    vals = {c: df[c].to_numpy(dtype=float, na_value=np.nan) for c in value_cols}
    sort_keys = [vals[c] for c in reversed(value_cols)] + [u.astype(np.int8), gi, si]
    perm = np.lexsort(sort_keys)
    si, gi, u = si[perm], gi[perm], u[perm]
    vals = {c: v[perm] for c, v in vals.items()}
    return si, gi, u, vals


def exact_groups(si: np.ndarray, gi: np.ndarray, G: int, gidx: GroupIndex, n_h: np.ndarray,
                 N_h: np.ndarray) -> np.ndarray:
    """Whether each group is fully sampled.

    When every stratum belongs to one group (strata equal to or nested in groups) a group's rows can
    only be in its own strata, so the group is exact when those are; otherwise (e.g. a uniform
    sample) an unsampled row of any incomplete stratum may belong to the group.
    """
    H = int(si.max()) + 1
    exact_h = n_h >= N_h
    groups_per_stratum = np.bincount(np.unique(si * G + gi) // G, minlength=H)
    aligned = bool((groups_per_stratum <= 1).all())
    exact = gidx.reduce(np.minimum, exact_h[si].astype(np.int64)) > 0
    if not aligned:
        exact &= bool(exact_h.all())
    return exact


def group_sample(df: pd.DataFrame, u: np.ndarray, gi: np.ndarray, keys: pd.DataFrame, value_cols: list,
                 n_col: str, strata_col: str) -> GroupedSample:
    """Lay out a sample (rows ``df`` with WHERE mask ``u`` and group codes ``gi`` from ``keys``) for
    estimation: stratum codes, canonical order, weights and exact groups."""
    G = len(keys)
    si, N_h = stratum_codes(df, gi, n_col, strata_col)
    si, gi, u, vals = canonical_order(df, value_cols, u, gi, si)
    gidx = GroupIndex(gi, G)
    n_h, N_h = stratum_sizes(si, N_h)
    w0 = point_weights(si, N_h)
    exact = exact_groups(si, gi, G, gidx, n_h, N_h)
    pexists = gidx.reduce(np.add, u.astype(np.int64)) > 0
    return GroupedSample(keys=keys, G=G, si=si, gi=gi, u=u, vals=vals, gidx=gidx, N_h=N_h, w0=w0,
                         exact=exact, pexists=pexists)
