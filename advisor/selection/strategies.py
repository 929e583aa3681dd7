"""Selection strategies (seed 002 §3): the paper's random baselines (RAND-ALL/REL/GB/PK/AGG), the
cost-based CB-OPT variants and the oracle OPT, and the pick each makes from a pool of sized
candidates (``advisor.selection.cost_model`` prices them).

>>> strategy_draw("RAND-GB@2"), strategy_draw("cb-opt-gb"), strategy_draw("CB-OPT-GB@1")
(('RAND-GB', 2), ('CB-OPT-GB', 0), None)
>>> draw_seed(7, 0)
7
"""

from __future__ import annotations

import random
from typing import Optional

from advisor.selection.cost_model import CostParams, Decision, UseForecast, candidate_costing

STRATEGIES = ("NO-PS", "RAND-ALL", "RAND-REL", "RAND-GB", "RAND-PK", "RAND-AGG",
              "CB-OPT", "CB-OPT-GB", "CB-OPT-REL", "OPT")
POOLS = {"ALL": None, "REL": "rel", "GB": "gb", "PK": "pk", "AGG": "agg"}
_DRAW_SALT = 104_729  # a prime: draw k of a random strategy shifts its seeds by k times this


def strategy_draw(name: str) -> tuple[str, int] | None:
    """``RAND-GB@3`` -> ("RAND-GB", 3): the third independent draw of a random strategy (its picks
    seeded apart), so a replay can average a random strategy over several draws instead of
    judging it by one; a plain known name is draw 0.  None for an unknown name."""
    base, at, k = str(name).strip().upper().partition("@")
    if base not in STRATEGIES:
        return None
    if not at:
        return base, 0
    if not base.startswith("RAND") or not k.isdigit() or not 1 <= int(k) <= 99:
        return None
    return base, int(k)


def unknown_strategy(name) -> str:
    """The one sentence for a strategy name ``strategy_draw`` rejects."""
    return (f"unknown strategy {name!r} (choose from: {', '.join(STRATEGIES)}; "
            "a random one may name a draw, e.g. RAND-GB@2)")


def draw_seed(seed: int, draw: int) -> int:
    """The seed of draw ``draw`` of a random strategy (draw 0 keeps ``seed``)."""
    return (seed + draw * _DRAW_SALT) % (2 ** 31)


def pool_of(strategy: str, candidates: list) -> list:
    """Safe candidates in the strategy's pool (NO-PS: none)."""
    if strategy == "NO-PS":
        return []
    key = "ALL" if strategy in ("CB-OPT", "OPT") else strategy.split("-")[-1]
    role = POOLS[key]
    return [c for c in candidates if c.safe and (role is None or role in c.roles)]


def choose(strategy: str, candidates: list, table_rows: float, w: UseForecast, p: Optional[CostParams] = None,
           seed: int = 0, fragments: Optional[int] = None) -> Decision:
    """Apply a strategy to candidates with estimated (``sizes``) or, for OPT, real (``real``) sizes."""
    p = p or CostParams()
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}")
    if strategy == "NO-PS":
        return Decision(strategy, None, None, False, "no-go: strategy NO-PS never sketches")
    pool = pool_of(strategy, candidates)
    field_ = "real" if strategy == "OPT" else "sizes"
    costed = [(c, candidate_costing(c, getattr(c, field_), table_rows, w, p, fragments)) for c in pool]
    # a two-attribute candidate is an add-on of two sketches: it competes only when it pays, so a
    # pair that saves more rows but not its second capture never displaces a single that is a go
    costed = [(c, k) for c, k in costed if k is not None and (k.go or not c.attrs)]
    names = [c.key for c in pool]
    if not costed:
        what = "with captured sizes" if strategy == "OPT" else "with estimates"
        return Decision(strategy, None, None, False,
                        f"no-go: no safe candidate {what} in the {strategy} pool", pool=names)
    # most rows saved per use first: on one table that is the smallest read fraction (the paper's
    # smallest estimated size on a clustered layout); across a join's tables it weighs each by its
    # rows, a joined table's with the fact rows it keeps out of the join (``cost``)
    # (a candidate that would need a new layout and does not pay for it comes after the rest)
    ranking = sorted(costed, key=lambda ck: (ck[0].layout is not None and not ck[1].go, -ck[1].saving_rows,
                                             ck[1].sel, -ck[1].net_rows, ck[0].key))
    if strategy.startswith("RAND"):
        c, k = random.Random(seed).choice(sorted(costed, key=lambda ck: ck[0].key))
    else:
        c, k = ranking[0]
        best_single = next((ck for ck in ranking if not ck[0].attrs), None)
        if c.attrs and best_single is not None and best_single[1].net_rows >= k.net_rows:
            c, k = best_single  # a pair must also beat the best single on net benefit (2 captures)
    return Decision(strategy, c.key, k.n_target, k.go, k.reason, k, names,
                    [(ck[0].key, ck[1].sel) for ck in ranking])
