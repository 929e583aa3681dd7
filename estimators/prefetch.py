"""Work handed to the estimators' one helper thread: bootstrap replicates drawn ahead while the
driver evaluates the query over a sample it has just drawn.

The replicate weights depend only on the sample's strata layout, ``N_h``, ``B``, the block size,
``fpc`` and the seed (``bootstrap.blocks_key``), all known once a stratified sample is drawn and
written (``samples.get_sample(on_layout=...)``), whereas the estimate then spends tens of
milliseconds running the query's filters and joins over it (``advisor.estimation.sample_frame``).
Drawing the replicates meanwhile on the machine's other core (numpy releases the GIL in its array
loops) takes them off a cold estimate's critical path.  ``replicate_blocks`` claims a prefetched
result only under the key it would draw with itself, so the numbers are bit for bit those of
drawing inline; a layout that turns out different (a join that repeats sample rows, say) is
simply not claimed.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from estimators.bootstrap import block_size, blocks_cached, blocks_key, draw_blocks, stratum_sizes
from estimators.prefetch_jobs import CLAIMED, Job, claim, helper_pool, submit  # noqa: F401 - re-exported

ENABLED = True  # off: every replicate is drawn inline (tests compare the two)


def layout(labels: Sequence, k: np.ndarray, N: np.ndarray) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """The sorted stratum index and ``N_h`` that ``aggregates.estimate_groups`` resamples for a
    sample of ``k[h]`` rows from each stratum ``h`` of ``N[h]`` rows labelled ``labels[h]``: strata
    numbered in the labels' sorted order (its ``pd.factorize(sort=True)``), rows in stratum order.
    None for strata without sampled rows or labels that are not unique."""
    labels = np.asarray(labels, dtype=object)
    k = np.asarray(k, dtype=np.int64)
    if k.shape[0] == 0 or (k <= 0).any() or len(set(labels.tolist())) != labels.shape[0]:
        return None
    order = np.argsort(labels, kind="stable")
    si = np.repeat(np.arange(order.shape[0], dtype=np.int64), k[order])
    return si, stratum_sizes(si, np.asarray(N, dtype=float)[order])[1]


def start(make_layout: Callable[[], Optional[tuple]], B: int, block_cells: int, seed: int,
          fpc: bool = True) -> None:
    """Start drawing, on the helper thread, the replicate blocks of the layout ``make_layout()``
    returns (``layout``'s pair, or None to give up), as ``estimate_groups`` would draw them with
    ``B``, ``block_cells`` and ``seed``."""
    if not ENABLED:
        return
    job = Job()

    def run():
        try:
            got = make_layout()
            if got is None:
                return None
            s, N = np.ascontiguousarray(got[0], dtype=np.int64), np.ascontiguousarray(got[1], dtype=float)
            rng = np.random.default_rng(seed)
            block = block_size(s.shape[0], block_cells)
            key = blocks_key(s, N, B, block, fpc, rng)
            if blocks_cached(key):  # drawn before and still cached: nothing to do ahead
                return None
            job.key = key
        finally:
            job.ready.set()
        out = draw_blocks(s, N, B, block, rng, fpc)
        return out, rng.bit_generator.state

    submit(job, run)
