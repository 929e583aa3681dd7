"""Access to the non-delta side of a join (and to a top-k's full input): the `BaseSide` interface.

IMP does not materialise join inputs. When a batch arrives, the join operator needs the output
of its *other* subtree on the database before the batch (digest §2.5, three-term rule
`dL x R_old + L_old x dR + dL x dR`), and a top-k whose buffer ran dry needs its input after the
batch. The engine asks a `BaseSide` for these rows:

    rows(node, version, keys=None) -> pandas.DataFrame

* `node`: an IR subtree of the (push-down rewritten) plan the engine runs; evaluate it as is.
* `version`: `OLD` (the database before the batch) or `NEW` (after it).
* `keys`: optional `KeyFilter(cols, values)`; rows whose values in `cols` are not in `values` may
  be left out (a semi-join hint: the engine only joins with these keys). Ignoring it is correct.
* Result columns: `node.names` (internal names), optionally `"__m"` (multiplicity, default 1),
  and, for every sketched scan `sid` below `node`, a column `"__f<sid>"` holding the fragment id
  (an int, for subtrees without aggregation) or a collection of fragment ids (the lineage of an
  aggregated row). NULL fragment -> the partition's null_id, exactly as capture assigns them.

`PandasBase` implements it with the reference evaluator over two dicts of pandas tables; a Spark
implementation evaluates the subtree on the two table versions (time travel) instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol

import numpy as np
import pandas as pd

from advisor.plan import ir

from advisor.maintain import reference
from advisor.maintain.frames import EMPTY, M, fcol, make_frame, normalize_series, row_values, singleton
from advisor.maintain.relops import Sketched, sketched_under

OLD = "old"
NEW = "new"


@dataclass(frozen=True)
class KeyFilter:
    """Only rows whose `cols` values (as a tuple) are in `values` are needed."""

    cols: tuple
    values: frozenset

    def mask(self, df: pd.DataFrame) -> np.ndarray:
        return np.array([k in self.values for k in row_values(df, list(self.cols))], dtype=bool)


class BaseSide(Protocol):
    def rows(self, node: ir.Node, version: str, keys: Optional[KeyFilter] = None) -> pd.DataFrame:
        """Annotated output of subtree `node` on the OLD or NEW database (see module docstring)."""
        ...


class PandasBase:
    """BaseSide over pandas tables: `old` and `new` map base table names to DataFrames."""

    def __init__(self, old: dict[str, pd.DataFrame], new: dict[str, pd.DataFrame], sketched: Sketched):
        self.tables = {OLD: old, NEW: new}
        self.sketched = sketched
        self._cache: dict[tuple[int, str], pd.DataFrame] = {}
        self.calls = 0

    def rows(self, node: ir.Node, version: str, keys: Optional[KeyFilter] = None) -> pd.DataFrame:
        self.calls += 1
        ck = (id(node), version)
        df = self._cache.get(ck)
        if df is None:
            df = self._cache[ck] = reference.annotated(node, self.tables[version], self.sketched)
        if keys is not None and len(df):
            df = df[keys.mask(df)].reset_index(drop=True)
        return df


def empty_like(tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Tables with the same columns and no rows (the 'before' of an initial load)."""
    return {k: v.iloc[:0] for k, v in tables.items()}


def to_annotated(df: pd.DataFrame, node: ir.Node, sketched: Sketched) -> pd.DataFrame:
    """Bring a BaseSide answer into the engine's annotated-frame form (dtypes, M, frozensets)."""
    sids = sketched_under(node, sketched)
    names = node.names
    missing = [c for c in names if c not in df.columns]
    if missing:
        raise ValueError(f"base side returned no column(s) {missing} for {type(node).__name__}")
    data = {c: normalize_series(df[c]) for c in names}
    data[M] = df[M].to_numpy(dtype=np.int64) if M in df.columns else np.ones(len(df), dtype=np.int64)
    for s in sids:
        c = fcol(s)
        if c not in df.columns:
            raise ValueError(f"base side returned no fragment column {c}")
        col = np.empty(len(df), dtype=object)
        col[:] = [_as_set(v) for v in df[c].tolist()]
        data[c] = col
    return make_frame(data)


def _as_set(v) -> frozenset:
    if isinstance(v, frozenset):
        return v
    if v is None or v is pd.NA:
        return EMPTY
    if isinstance(v, (int, np.integer)):
        return singleton(int(v))
    return frozenset(int(x) for x in v)
