"""Remembered sketch decisions per (query template, strategy), so a dashboard's tenth instance of
a template does not pay for sampling and estimation again.

* **go** on ``table.attr`` with partition P: a later instance with no usable sketch (its bindings
  defeat the reuse test, or the data changed under a sketch that was dropped) is captured directly
  on the same attribute and partition; the choice of attribute is a property of the template (the
  bindings move the selectivity, not which attribute is safe and clustered with the provenance).
* **no-go, structural** (no safe candidate in the strategy's pool, nothing estimable): final for
  the template.
* **no-go by cost**: the decision weighed capture against ``horizon`` predicted uses; after that
  many further instances the evidence (the template's observed frequency) has changed, so the
  template is estimated again -- but not before the plain runs since would have cost
  ``1 / DECIDE_SHARE`` times that estimation (``reestimate_after``): a join template at TPC-H SF1
  whose estimation took 55 s against 14.7 s plain was estimated again after 4 instances, and its
  two no-gos cost 1.51x of its plain runs over 15 instances.  A no-go *before sampling* (``select.cannot_pay``) cost nothing to
  decide, and the count of predicted uses is all that moves it with the same measured costs, so it
  is remembered exactly until that count could make it pay (``pays_after``): at TPC-H SF1 a top-k
  template declined at a tie (3.00 scans of saving against 3.00) was remembered for 3 instances
  where the next one would already have gone.
* **go contradicted by measurement** (``revisit``): the cost model predicts time from rows read, but
  a filter of up to 32 ranges over a scattered sketch can read most rows and still pay for the
  filter and for compiling each fresh filter text, and a template whose new bindings each need a
  capture pays it per use (TPC-H SF1 big_orders: 1.49x of plain over a replay).  From the
  template's latest ``MIN_SKETCHED`` sketched uses measured in this store (each run and the capture
  it needed, if any: the run record's ``capture_seconds``; ``Calibration.use_s``) the *next* use is
  predicted as the median run plus the share of uses that needed a capture times the median such
  capture.  If that exceeds ``MARGIN`` times the plain runs, the go becomes a no-go by cost with a
  longer horizon and the template's live sketches are retired (no further reuse or maintenance).
  A template whose latest ``MIN_CAPTURED`` uses each needed a capture or a derivation of their own
  (its bindings move so that no sketch is ever reused: a date that advances per instance) is judged
  at once, against plain runs without margin: without reuse a sketch has nothing to repay it.  Its
  first capture is not one of those uses: it is the investment the go priced, and counted per use
  it declined TPC-H SF1 big_orders' last 16 instances (a mean of 5.57 s against 5.15 s plain over
  the first capture's 8.4 s, a derivation that bought the operator state, 7.4 s, and two of
  3.0-3.4 s).
  Medians make it less sensitive to single outliers than a mean of the ten uses
  (a replay's first captures in a fresh JVM took 5-10 s against 1-2 s later), though
  on that replay's actual uses both rules judged alike.  The judgement waits for ten uses: with
  three uses it turned every template of a replay into a no-go.  Maintenance is left
  to ``maintain.worth``.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from advisor.calibration.measured_costs import calibrate, plain_proxy
from advisor.selection.cost_model import PRIOR_REUSES, cannot_pay
from advisor.warehouse.sketch_records import latest_versions, retire

if TYPE_CHECKING:
    from advisor.warehouse.store import Store


@dataclass
class Memo:
    template: str
    strategy: str
    table: str | None
    attr: str | None
    partition_id: int | None
    go: bool
    structural: bool
    reason: str
    horizon: float
    skips: int
    step: str | None
    created: float = 0.0


def recall(store: Store, template: str, strategy: str) -> Memo | None:
    r = store.one("SELECT * FROM decisions WHERE template=? AND strategy=?", (template, strategy))
    if r is None:
        return None
    return Memo(r["template"], r["strategy"], r["table_name"], r["attr"], r["partition_id"], bool(r["go"]),
                bool(r["structural"]), r["reason"], float(r["horizon"]), int(r["skips"]), r["step"],
                float(r["created"] or 0.0))


def remember(store: Store, template: str, strategy: str, *, go: bool, reason: str, table: str | None = None,
             attr: str | None = None, partition_id: int | None = None, structural: bool = False,
             horizon: float = PRIOR_REUSES, step: str | None = None) -> None:
    with store.tx() as c:
        c.execute("INSERT OR REPLACE INTO decisions(template, strategy, table_name, attr, partition_id, go, "
                  "structural, reason, horizon, skips, step, created) VALUES (?,?,?,?,?,?,?,?,?,0,?,?)",
                  (template, strategy, table, attr, partition_id, int(go), int(structural), reason,
                   float(horizon), step, time.time()))


BEFORE_SAMPLING = "no-go before sampling"  # ``cost_model.cannot_pay``'s verdicts start so


def advice_measured_since(store: Store, since: float) -> bool:
    """Whether a sampled advice (sampling + estimation) was logged after ``since``: the measured
    estimation costs a no-go before sampling was priced with have changed (``Calibration.sampled_rows``)."""
    for r in store.query("SELECT record_json FROM runs WHERE kind='recommend' AND created > ? ORDER BY id DESC "
                         "LIMIT 50", (since,)):
        if '"sampling"' in r["record_json"]:
            return True
    return False


def skip(store: Store, memo: Memo) -> bool:
    """Count one more instance decided by the memo; False once a cost-based no-go is due for
    re-estimation, and for a no-go before sampling as soon as advice measured since may have lowered
    the estimation's price: that verdict is checked again before any sampling, so revisiting it costs
    no sample, where keeping it declined every later template of a table on the first, cold
    estimation's price."""
    if memo.go or memo.structural:
        return True
    if memo.skips + 1 > memo.horizon:
        return False
    if memo.reason.startswith(BEFORE_SAMPLING) and advice_measured_since(store, memo.created):
        return False
    with store.tx() as c:
        c.execute("UPDATE decisions SET skips=skips+1 WHERE template=? AND strategy=?", (memo.template, memo.strategy))
    return True


def pays_after(T: float, w, p, advice_rows: float | None, limit: int = 64) -> int | None:
    """The fewest further predicted uses with which ``select.cannot_pay`` would pass, the measured
    costs being the same (None if none up to ``limit``): a template seen once more predicts one use
    more, so a no-go before sampling need be remembered for one instance fewer than this."""


    for k in range(1, limit + 1):
        if cannot_pay(T, replace(w, reuses=w.reuses + k), p, advice_rows) is None:
            return k
    return None


def all_memos(store: Store) -> list[dict]:
    """Every stored decision as its raw row (``restore_memos`` puts them back)."""
    return [dict(r) for r in store.query("SELECT * FROM decisions")]


def restore_memos(store: Store, rows: list[dict]) -> None:
    """Make the stored decisions exactly ``rows`` again: a query that failed leaves no decision."""
    with store.tx() as c:
        c.execute("DELETE FROM decisions")
        for r in rows:
            c.execute(f"INSERT INTO decisions({', '.join(r)}) VALUES ({', '.join('?' * len(r))})", tuple(r.values()))


def forget(store: Store, template: str, strategy: str) -> None:
    with store.tx() as c:
        c.execute("DELETE FROM decisions WHERE template=? AND strategy=?", (template, strategy))


MIN_SKETCHED = 10     # sketched uses of a template before its go is judged by them
MIN_CAPTURED = 4      # ... unless this many latest uses each needed a capture or derivation of their own
MARGIN = 1.25         # ... and how much dearer than plain they must be on average
REVISIT_FACTOR = 4.0  # a contradicted go is re-estimated after this many times its horizon
DECIDE_SHARE = 0.25   # a declined template's re-estimations cost at most this share of its plain runs
MAX_HORIZON = 64.0


def reestimate_after(horizon: float, decide_s: float, plain_s: float | None) -> float:
    """Instances a cost-based no-go is kept before the template is estimated again: its
    ``horizon``, or more when the estimation (``decide_s``) was dear next to a plain run
    (``plain_s``), so that estimating again costs at most ``DECIDE_SHARE`` of the plain runs since.

    >>> reestimate_after(4, 2.0, 2.0), reestimate_after(4, 55.0, 14.7), reestimate_after(4, 900.0, 1.0)
    (4, 15.0, 64.0)
    """
    if not plain_s or plain_s <= 0:
        return horizon
    return max(horizon, min(MAX_HORIZON, float(math.ceil(decide_s / (DECIDE_SHARE * plain_s)))))


def plain_seconds(store: Store, template: str, rows: float) -> float:
    """A plain run of ``template`` in this store: the median of its latest plain runs, else its
    captures' median or the fitted line (``plain_proxy``)."""
    cal = calibrate(store)
    plain = cal.query_s.get(template, ([], []))[0]
    return statistics.median(plain[:10]) if plain else plain_proxy(cal, template, rows)


def next_use(sketched: list) -> tuple[float, float, int, float]:
    """(predicted seconds of the next sketched use, median run, uses that needed a capture, median
    such capture) from (run, capture) pairs; a bare number is a run without capture.  A pair with
    run 0 is a use its capture job answered (no separate run): the prediction is the share of uses
    with a run times the median run plus the share with a capture times the median capture."""

    pairs = [(u, 0.0) if isinstance(u, (int, float)) else (float(u[0]), float(u[1])) for u in sketched]
    runs = [r for r, _ in pairs if r > 0]
    run = statistics.median(runs) if runs else 0.0
    caps = [c for _, c in pairs if c > 0]
    cap = statistics.median(caps) if caps else 0.0
    return (len(runs) * run + len(caps) * cap) / len(pairs), run, len(caps), cap


def measured_loss(plain: list, sketched: list, plain_pred: float | None) -> str | None:
    """Why the measured uses contradict sketching (newest first; the latest ``MIN_SKETCHED`` sketched
    uses as (run, capture) pairs, up to 10 plain runs), or None.  Without plain runs of the template,
    ``plain_pred`` (its captures' median, else the fitted cost line) stands in."""

    ps = statistics.median(plain[:10]) if plain else plain_pred
    last = [(u, 0.0) if isinstance(u, (int, float)) else (float(u[0]), float(u[1])) for u in sketched[:MIN_CAPTURED]]
    # the template's first sketched use is its first capture, the investment the go priced: the
    # window of uses judged per use starts after it (so it holds one use more than the window)
    if ps is not None and len(sketched) > MIN_CAPTURED and all(c > 0 for _, c in last):
        each = statistics.mean(r + c for r, c in last)
        if each > ps:
            return (f"no-go (measured): none of the last {MIN_CAPTURED} uses reused a sketch (each needed a capture "
                    f"or derivation of its own: ~{each:.2f} s a use against {ps:.2f} s plain)")
    # so is the median rule's: with the first capture among ten uses, TPC-H SF1 top_clerks (captured
    # once at 3.6 s, then runs of 0.17 s against 0.40 s plain) was retired as "~0.51 s a use"
    if len(sketched) <= MIN_SKETCHED or ps is None:
        return None
    ss, run, k, cap = next_use(sketched[:MIN_SKETCHED])
    if ss <= MARGIN * ps:
        return None
    how = f"median of {min(len(plain), 10)}" if plain else "predicted: no plain run of the template"
    return (f"no-go (measured): a sketched use costs ~{ss:.2f} s (median run {run:.2f} s + {k} of the last "
            f"{MIN_SKETCHED} uses needed a capture of ~{cap:.2f} s) against {ps:.2f} s plain ({how})")


def revisit(store: Store, template: str, strategy: str, rows: float, step: str | None = None) -> str | None:
    """Turn a remembered go that this store's measurements contradict into a no-go (``measured_loss``)
    and retire the template's live sketches; returns the reason, or None when the go stands.
    ``rows``: rows a plain run reads (for the fitted line when the template never ran plain)."""

    memo = recall(store, template, strategy)
    if memo is None or not memo.go:
        return None
    cal = calibrate(store)
    plain = cal.query_s.get(template, ([], []))[0]
    why = measured_loss(plain, cal.use_s.get(template, []), plain_proxy(cal, template, rows))
    if why is None:
        return None
    remember(store, template, strategy, go=False, reason=f"{why}; was go on {memo.table}.{memo.attr}",
             horizon=REVISIT_FACTOR * memo.horizon, step=step)
    for sk in latest_versions(store):
        if sk.template == template:
            retire(store, sk.id, why)
    return why
