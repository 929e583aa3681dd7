"""Group and fragment bookkeeping of ``estimators.sketch_size``: fragment tables, key lookups, range
positions, and the (group, fragment) cells that a block of groups touches."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd

from estimators.unseen_rows import window_cells


def fragment_table(fragment_sizes) -> tuple[pd.Index, np.ndarray]:
    """Fragment ids and their sizes ``|R_r|`` from a Series, a mapping or an array indexed by id;
    ids must be unique and sizes non-negative."""
    if isinstance(fragment_sizes, pd.Series):
        ids, sizes = pd.Index(fragment_sizes.index), fragment_sizes.to_numpy(dtype=float)
    elif isinstance(fragment_sizes, Mapping):
        ids, sizes = pd.Index(list(fragment_sizes.keys())), np.asarray(list(fragment_sizes.values()), dtype=float)
    else:
        sizes = np.asarray(fragment_sizes, dtype=float)
        ids = pd.RangeIndex(sizes.shape[0])
    if not ids.is_unique:
        raise ValueError("fragment ids must be unique")
    if (sizes < 0).any():
        raise ValueError("fragment sizes must be >= 0")
    return ids, sizes


def key_index(frame: pd.DataFrame, cols: list) -> pd.Index:
    """The group keys of ``frame`` as an index (a MultiIndex for several columns)."""
    if len(cols) == 1:
        return pd.Index(frame[cols[0]])
    return pd.MultiIndex.from_frame(frame[cols])


def lookup_groups(groups: pd.DataFrame, other: pd.DataFrame, cols: list) -> np.ndarray:
    """Row of ``groups`` holding each row of ``other``'s group (-1 if none); no columns: one group."""
    if not cols:
        return np.zeros(len(other), dtype=np.int64)
    idx = key_index(groups, cols)
    if not idx.is_unique:
        raise ValueError("groups table has duplicate group keys")
    return np.asarray(idx.get_indexer(key_index(other, cols)), dtype=np.int64)


def lookup_fragments(ids: pd.Index, values: pd.Series, what: str) -> np.ndarray:
    """Position of each fragment id of ``values`` in ``ids``; an unknown id is an error naming
    ``what`` held it."""
    pos = np.asarray(ids.get_indexer(values), dtype=np.int64)
    if (pos < 0).any():
        bad = pd.Series(values).iloc[np.flatnonzero(pos < 0)[0]]
        raise ValueError(f"{what} has fragment id {bad!r} that is not in fragment_sizes")
    return pos


def range_positions(ids: pd.Index) -> np.ndarray:
    """Rank of every fragment id in sorted order (range order); input order if ids do not sort."""
    try:
        order = np.argsort(np.asarray(ids), kind="stable")
    except TypeError:
        return np.arange(len(ids))
    pos = np.empty(len(ids), dtype=np.int64)
    pos[order] = np.arange(len(ids))
    return pos


@dataclass
class CellModel:
    """What maps a block of groups to its (group, fragment) cells: the certain cells sorted by group
    and, under the unseen-row model (``use_model``), each group's window and the prior mean ``pi``."""

    F: int
    cg_sorted: np.ndarray
    cr_sorted: np.ndarray
    use_model: bool
    alpha: float
    n_g: np.ndarray
    K_g: np.ndarray
    pi: np.ndarray
    pos: np.ndarray | None
    i0: np.ndarray | None
    i1: np.ndarray | None
    mass: np.ndarray | None


def block_bounds(n: int, chunk_cells: int, F: int) -> list:
    """Block boundaries over ``n`` groups of about ``chunk_cells`` cells each, growing geometrically
    from a sixteenth of that so that checks between blocks come early."""
    step = max(1, int(chunk_cells) // max(F, 1))
    bounds, size = [0], max(1, step // 16)
    while bounds[-1] < n:
        bounds.append(min(n, bounds[-1] + size))
        size = min(step, 2 * size)
    return bounds


def block_cells(chunk: np.ndarray, cells: CellModel) -> tuple:
    """(rows, fragments) of the block ``chunk``'s certain cells -- the sample saw the group there, or
    the model is sure -- and (rows, fragments, touch probabilities) of its uncertain window cells;
    rows index ``chunk``."""
    F = cells.F
    a = np.searchsorted(cells.cg_sorted, chunk, side="left")
    b = np.searchsorted(cells.cg_sorted, chunk, side="right")
    cnt = b - a
    crow = np.repeat(np.arange(chunk.shape[0]), cnt)
    within = np.arange(crow.shape[0]) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    cfrag = cells.cr_sorted[np.repeat(a, cnt) + within]
    if not cells.use_model:
        return crow, cfrag, crow[:0], cfrag[:0], np.zeros(0)
    wrow, wfrag, wt = window_cells(cells.n_g[chunk], cells.K_g[chunk], cells.i0[chunk], cells.i1[chunk],
                                   cells.mass[chunk], cells.pos, cells.pi, cells.alpha)
    keep = ~np.isin(wrow * F + wfrag, crow * F + cfrag)
    sure = keep & (wt >= 1.0)
    crow, cfrag = np.concatenate([crow, wrow[sure]]), np.concatenate([cfrag, wfrag[sure]])
    keep &= ~sure & (wt > 0)
    return crow, cfrag, wrow[keep], wfrag[keep], wt[keep]
