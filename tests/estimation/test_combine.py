"""``estimate._combine``: the sample's rows joined with the aggregation's input, with a shortcut
for the common case that every sampled row reaches the aggregation once, in order."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import advisor.estimation.sample_frame as estimate_mod


def _merged(base, out):
    pdf = base.merge(out, on=estimate_mod.SID, how="left", indicator=True)
    pdf[estimate_mod.U] = (pdf.pop("_merge") == "both").to_numpy()
    return pdf


@pytest.mark.parametrize("case", ["all", "filtered", "reordered", "fanout"])
def test_combine_equals_the_left_merge_it_shortcuts(case):
    """``estimate._combine`` skips the merge when every sampled row reaches the aggregation once,
    in order; the frame must be the merge's, dtypes included, in every case."""
    rng = np.random.default_rng(3)
    sid = rng.permutation(1000)[:200].astype(np.int64)
    base = pd.DataFrame({estimate_mod.SID: sid, "_n_g": rng.integers(5, 9, 200),
                         "_stratum": rng.integers(0, 4, 200)})
    rows = {"all": sid, "filtered": sid[::3], "reordered": sid[::-1],
            "fanout": np.repeat(sid, 2)}[case]
    out = pd.DataFrame({"g": pd.array(rng.integers(0, 4, len(rows)), dtype="Int64"),
                        "__a0": rng.normal(size=len(rows)), estimate_mod.SID: rows})
    pd.testing.assert_frame_equal(estimate_mod._combine(base, out), _merged(base, out))
