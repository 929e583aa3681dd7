"""Per shape family metrics of the advice accuracy harness (``accuracy_shapes`` queries).

The bar a size estimate must meet is judged per family, not only overall, because one family's
misses (an extreme aggregate over small groups, a product sum) hide in a pooled median:

* relative error ``|est - real| / real`` over (query, candidate) pairs with a non-empty real sketch
  (median and 90th percentile), and the same for the CB-OPT pick alone;
* interval coverage: the share of pairs whose interval holds the real size;
* zero-width intervals on sizes not labelled exact (every point interval must be exact);
* picks within 1.05x of the best safe attribute (CB-OPT against OPT, (rows+1) ratio as the
  harness's ``summarize``);
* bad gos: CB-OPT decided go although the pick's real size exceeds 3x its interval's upper end.
"""

from __future__ import annotations

import numpy as np
from rich.table import Table

BAD_GO_FACTOR = 3.0


def _pct(xs, q):
    return float(np.percentile(xs, q)) if len(xs) else None


def family_metrics(recs: list, theta: str, strategy: str = "CB-OPT") -> dict:
    """family -> metrics (module docstring) over the evaluated records, plus ``all``."""
    ok = [r for r in recs if "skipped" not in r and theta in r.get("theta", {})]
    fams: dict = {}
    for r in ok:
        for key in (r["template"], "all"):
            fams.setdefault(key, []).append(r)
    return {f: _metrics(rs, theta, strategy) for f, rs in sorted(fams.items())}


def _metrics(recs: list, theta: str, strategy: str) -> dict:
    err, pick_err, cover, zero_bad, within, bad_go, go = [], [], [], 0, [], [], 0
    est_s = 0.0
    for r in recs:
        t, real, T = r["theta"][theta], r["real"], r["rows"]
        est_s += t["est_s"]
        exact = t.get("exact", {})
        for a, s in real.items():
            lo, hi = t["ci"][a]
            cover.append(lo - 1e-9 <= s <= hi + 1e-9)
            if hi - lo <= 0 and not exact.get(a, False):
                zero_bad += 1
            if s > 0:
                err.append(abs(t["est"][a] - s) / s)
        best = min(real.values())
        pk = t["picks"][strategy]
        attr = pk["attr"]
        chosen = real[attr] if attr else 1.0
        within.append((chosen * T + 1) / (best * T + 1) <= 1.05)
        if attr and real[attr] > 0:
            pick_err.append(abs(t["est"][attr] - real[attr]) / real[attr])
        if pk["go"] and attr:
            go += 1
            if real[attr] > BAD_GO_FACTOR * t["ci"][attr][1]:
                bad_go.append(r["sql"])
    return {"queries": len(recs), "pairs": len(cover),
            "median_err": _pct(err, 50), "p90_err": _pct(err, 90),
            "pick_median_err": _pct(pick_err, 50), "pick_p90_err": _pct(pick_err, 90),
            "coverage": float(np.mean(cover)) if cover else None, "zero_width_not_exact": zero_bad,
            "within_1_05": float(np.mean(within)) if within else None, "gos": go,
            "bad_gos": len(bad_go), "bad_go_queries": bad_go, "estimation_s": est_s}


def render_families(console, res: dict) -> None:
    """One table per dataset and sample rate: the family metrics."""
    f = lambda x, fmt="{:.1%}": "-" if x is None else fmt.format(x)  # noqa: E731
    for theta in res["thetas"]:
        for ds, d in res["datasets"].items():
            fm = d.get("families", {}).get(str(theta))
            if not fm:
                continue
            tab = Table("family", "queries", "median err", "p90 err", "pick median", "coverage",
                        "zero-width not exact", "picks <=1.05x", "gos", "bad gos", "estimation s",
                        title=f"{ds}: size estimates per shape family at theta={theta}")
            for fam, m in fm.items():
                tab.add_row(fam, str(m["queries"]), f(m["median_err"]), f(m["p90_err"]), f(m["pick_median_err"]),
                            f(m["coverage"]), str(m["zero_width_not_exact"]), f(m["within_1_05"]), str(m["gos"]),
                            str(m["bad_gos"]), f(m["estimation_s"], "{:.2f}"))
            console.print(tab)
