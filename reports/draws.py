"""A random strategy replayed as several draws (``RAND-GB``, ``RAND-GB@1``, ...) summed up as one
expectation, the way the seed paper judges its random strategies: one draw is a coin flip per
template, so an ordering against it is only meaningful over several (pure; no Spark)."""

from __future__ import annotations

import statistics
from typing import Mapping


def draw_of(name: str) -> tuple[str, int]:
    """``RAND-GB@3`` -> ("RAND-GB", 3); any other name is its own draw 0."""
    base, at, k = str(name).partition("@")
    return (base, int(k)) if at and k.isdigit() else (str(name), 0)


def draw_means(per: Mapping[str, Mapping]) -> dict[str, dict]:
    """For each strategy that ``per`` (name -> its summary numbers) holds as two or more draws: the
    draws in draw order, the mean, lowest and highest ratio to NO-PS (draws without a ratio left
    out; None if none has one), and the mean cumulative seconds and rows read."""
    groups: dict[str, list[str]] = {}
    for name in per:
        groups.setdefault(draw_of(name)[0], []).append(name)
    out = {}
    for base, names in groups.items():
        if len(names) < 2:
            continue
        names.sort(key=lambda n: draw_of(n)[1])
        ratios = [float(per[n]["vs_no_ps"]) for n in names if per[n].get("vs_no_ps") is not None]
        out[base] = {
            "draws": names,
            "mean_vs_no_ps": round(statistics.mean(ratios), 4) if ratios else None,
            "min_vs_no_ps": round(min(ratios), 4) if ratios else None,
            "max_vs_no_ps": round(max(ratios), 4) if ratios else None,
            "mean_cumulative_seconds": round(statistics.mean(float(per[n]["cumulative_seconds"])
                                                             for n in names), 4),
            "mean_rows_read": round(statistics.mean(float(per[n]["rows_read"]) for n in names)),
        }
    return out
