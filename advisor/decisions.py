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
  template is estimated again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


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


def recall(store, template: str, strategy: str) -> Memo | None:
    r = store.one("SELECT * FROM decisions WHERE template=? AND strategy=?", (template, strategy))
    if r is None:
        return None
    return Memo(r["template"], r["strategy"], r["table_name"], r["attr"], r["partition_id"], bool(r["go"]),
                bool(r["structural"]), r["reason"], float(r["horizon"]), int(r["skips"]), r["step"])


def remember(store, template: str, strategy: str, *, go: bool, reason: str, table: str | None = None,
             attr: str | None = None, partition_id: int | None = None, structural: bool = False,
             horizon: float = 3.0, step: str | None = None) -> None:
    with store.tx() as c:
        c.execute("INSERT OR REPLACE INTO decisions(template, strategy, table_name, attr, partition_id, go, "
                  "structural, reason, horizon, skips, step, created) VALUES (?,?,?,?,?,?,?,?,?,0,?,?)",
                  (template, strategy, table, attr, partition_id, int(go), int(structural), reason,
                   float(horizon), step, time.time()))


def skip(store, memo: Memo) -> bool:
    """Count one more instance decided by the memo; False once a cost-based no-go is due for re-estimation."""
    if memo.go or memo.structural:
        return True
    if memo.skips + 1 > memo.horizon:
        return False
    with store.tx() as c:
        c.execute("UPDATE decisions SET skips=skips+1 WHERE template=? AND strategy=?", (memo.template, memo.strategy))
    return True


def forget(store, template: str, strategy: str) -> None:
    with store.tx() as c:
        c.execute("DELETE FROM decisions WHERE template=? AND strategy=?", (template, strategy))
