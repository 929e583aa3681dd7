"""Synthetic Chicago-like crimes table with real-data structure: nested geography, skewed types, trends.

The geography (77 community areas -> 25 districts -> beats -> blocks, wards per block) is a fixed
layout, identical for every seed, so the functional dependencies block -> beat -> district and
community_area -> district always hold. Only the events (which block, when, what, arrested?) depend
on the seed. Everything is vectorised: a million rows take a couple of seconds.
"""

from __future__ import annotations

import numbers

import numpy as np
import pyarrow as pa

from advisor.errors import BadInput
from advisor.caches import memoize

N_AREAS, N_DISTRICTS, N_WARDS = 77, 25, 50
LAT_RANGE, LON_RANGE = (41.65, 42.02), (-87.90, -87.55)  # area centres; jitter stays inside 41.6..42.05
GRID_ROWS, GRID_COLS = 11, 7  # 11 x 7 = 77 community areas, numbered in a north-to-south snake
LAYOUT_SEED = 1871  # the geography never changes with the caller's seed

# (primary_type, relative frequency, arrest probability), most frequent first (roughly Chicago's mix).
CRIME_TYPES = (
    ("THEFT", 21.0, 0.11), ("BATTERY", 18.0, 0.22), ("CRIMINAL DAMAGE", 11.0, 0.07),
    ("NARCOTICS", 9.0, 0.99), ("ASSAULT", 6.5, 0.20), ("OTHER OFFENSE", 6.2, 0.17),
    ("BURGLARY", 5.3, 0.06), ("MOTOR VEHICLE THEFT", 4.7, 0.08), ("DECEPTIVE PRACTICE", 4.3, 0.15),
    ("ROBBERY", 3.7, 0.10), ("CRIMINAL TRESPASS", 2.8, 0.70), ("WEAPONS VIOLATION", 1.3, 0.80),
    ("PROSTITUTION", 0.9, 0.99), ("OFFENSE INVOLVING CHILDREN", 0.7, 0.20),
    ("PUBLIC PEACE VIOLATION", 0.7, 0.60), ("SEX OFFENSE", 0.4, 0.30),
    ("CRIM SEXUAL ASSAULT", 0.4, 0.15), ("INTERFERENCE WITH PUBLIC OFFICER", 0.25, 0.93),
    ("GAMBLING", 0.2, 0.99), ("LIQUOR LAW VIOLATION", 0.2, 0.99), ("ARSON", 0.16, 0.12),
    ("HOMICIDE", 0.15, 0.50), ("KIDNAPPING", 0.09, 0.10), ("STALKING", 0.06, 0.12),
    ("INTIMIDATION", 0.06, 0.15), ("CONCEALED CARRY LICENSE VIOLATION", 0.02, 0.95),
    ("OBSCENITY", 0.01, 0.60), ("NON-CRIMINAL", 0.003, 0.05), ("PUBLIC INDECENCY", 0.003, 0.98),
    ("HUMAN TRAFFICKING", 0.001, 0.30),
)

# Relative yearly volume 2001..2023 (long decline, 2020-21 dip, partial rebound), in thousands.
YEAR_WEIGHTS = (485, 486, 475, 469, 453, 448, 437, 427, 392, 370, 352, 336, 307, 275, 264, 269,
                269, 268, 261, 212, 209, 239, 262)
FIRST_YEAR = 2001
# Seasonality: winter low, summer peak.
MONTH_WEIGHTS = (0.85, 0.78, 0.92, 0.95, 1.05, 1.08, 1.13, 1.12, 1.05, 1.04, 0.97, 0.92)
# Hour of day: quiet before dawn, busy afternoon/evening, a spike at midnight (default report time).
HOUR_WEIGHTS = (1.6, 0.9, 0.8, 0.6, 0.5, 0.45, 0.5, 0.6, 0.8, 1.0, 1.0, 1.0,
                1.3, 1.1, 1.1, 1.2, 1.2, 1.2, 1.3, 1.3, 1.3, 1.3, 1.2, 1.0)

STREETS = (
    "MADISON", "STATE", "HALSTED", "ASHLAND", "WESTERN", "CICERO", "PULASKI", "KEDZIE", "DAMEN",
    "CALIFORNIA", "CENTRAL", "AUSTIN", "HARLEM", "NARRAGANSETT", "LARAMIE", "KOSTNER", "CRAWFORD",
    "RACINE", "MORGAN", "CLARK", "WELLS", "DEARBORN", "LASALLE", "WABASH", "MICHIGAN", "COTTAGE GROVE",
    "KING", "STONY ISLAND", "JEFFERY", "YATES", "COMMERCIAL", "EWING", "VINCENNES", "WENTWORTH",
    "PRINCETON", "NORMAL", "LOOMIS", "LOWE", "UNION", "EMERALD", "CHICAGO", "DIVISION", "NORTH",
    "ARMITAGE", "FULLERTON", "BELMONT", "ADDISON", "IRVING PARK", "MONTROSE", "LAWRENCE", "FOSTER",
    "BRYN MAWR", "DEVON", "TOUHY", "HOWARD", "ROOSEVELT", "CERMAK", "PERSHING", "GARFIELD", "79TH",
    "87TH", "95TH", "103RD", "111TH", "63RD", "71ST", "55TH", "47TH", "35TH", "OGDEN", "GRAND",
    "MILWAUKEE", "ELSTON", "LINCOLN", "BROADWAY", "SHERIDAN", "ARCHER", "PULLMAN",
)
SUFFIXES = ("ST", "AVE", "BLVD", "RD", "DR", "PL")


@memoize("crimes geography", maxsize=1)
def layout() -> dict[str, np.ndarray]:
    """Fixed geography: one row per block with its beat, district, ward, area, coordinates and weight.

    Community areas sit on an 11 x 7 grid in snake order so consecutive numbers are neighbours;
    a district is a run of 3-4 consecutive areas, each area owns 2-4 of its district's beats
    (beat = district*100 + sector*10 + n, Chicago's 4-digit code without the leading zero),
    and each beat owns up to 15-50 blocks (names unique city-wide), each in one of its area's 1-3 wards.
    """
    rng = np.random.default_rng(LAYOUT_SEED)
    area = np.arange(1, N_AREAS + 1)
    row, col = (area - 1) // GRID_COLS, (area - 1) % GRID_COLS
    col = np.where(row % 2 == 1, GRID_COLS - 1 - col, col)
    d_lat = (LAT_RANGE[1] - LAT_RANGE[0]) / (GRID_ROWS - 1)
    d_lon = (LON_RANGE[1] - LON_RANGE[0]) / (GRID_COLS - 1)
    area_lat = LAT_RANGE[1] - row * d_lat + rng.uniform(-0.2, 0.2, N_AREAS) * d_lat
    area_lon = LON_RANGE[0] + col * d_lon + rng.uniform(-0.2, 0.2, N_AREAS) * d_lon
    area_district = area_to_district(area)
    base_ward = (area - 1) * N_WARDS // N_AREAS + 1
    area_wards = [sorted({int((base_ward[a] - 1 + k) % N_WARDS) + 1 for k in range(rng.integers(1, 4))})
                  for a in range(N_AREAS)]

    used: set[tuple[int, str, str, str]] = set()
    cols: dict[str, list] = {k: [] for k in ("block", "beat", "district", "ward", "area", "lat", "lon", "w")}
    for d in range(1, N_DISTRICTS + 1):
        beat_no = 0
        for a in np.flatnonzero(area_district == d):
            for _ in range(rng.integers(2, 5)):
                sector, n = divmod(beat_no, 4)
                beat_no += 1
                beat = d * 100 + (sector + 1) * 10 + n + 1
                b_lat = area_lat[a] + rng.uniform(-0.3, 0.3) * d_lat
                b_lon = area_lon[a] + rng.uniform(-0.3, 0.3) * d_lon
                streets = rng.choice(len(STREETS), size=rng.integers(2, 5), replace=False)
                direction = "NSEW"[rng.integers(4)]
                start = int(rng.integers(0, 130))
                n_blocks = int(rng.integers(15, 51))
                for k in range(n_blocks):
                    s = int(streets[k % len(streets)])
                    key = (start + k // len(streets), direction, STREETS[s], _suffix(s))
                    if key in used:
                        continue
                    used.add(key)
                    cols["block"].append(f"{key[0]:03d}XX {key[1]} {key[2]} {key[3]}")
                    cols["beat"].append(beat)
                    cols["district"].append(d)
                    cols["ward"].append(area_wards[a][int(rng.integers(len(area_wards[a])))])
                    cols["area"].append(a + 1)
                    cols["lat"].append(b_lat + rng.uniform(-0.08, 0.08) * d_lat)
                    cols["lon"].append(b_lon + rng.uniform(-0.08, 0.08) * d_lon)
                    cols["w"].append(rng.pareto(1.5) + 0.2)  # a few hot blocks per beat
    out = {k: np.asarray(v) for k, v in cols.items()}
    out["area_weight"] = rng.lognormal(0.0, 0.8, N_AREAS)  # some areas see far more crime
    out["type_tilt"] = rng.lognormal(0.0, 0.5, (N_AREAS, len(CRIME_TYPES)))  # local crime mix
    return out


def _suffix(street: int) -> str:
    """Numbered streets are STs (E 79TH ST); named ones get a fixed suffix of their own."""
    return "ST" if STREETS[street][0].isdigit() else SUFFIXES[street % len(SUFFIXES)]


def area_to_district(area: np.ndarray) -> np.ndarray:
    """District (1..25) of community area (1..77): consecutive runs of 3-4 areas share a district."""
    return (np.asarray(area) - 1) * N_DISTRICTS // N_AREAS + 1


def generate_crimes(rows: int, seed: int) -> pa.Table:
    """Return `rows` synthetic crimes, deterministic per (rows, seed), ordered by date with id 1..rows."""
    _check(rows, seed)
    rows, seed = int(rows), int(seed)
    geo = layout()
    rng = np.random.default_rng(seed)

    # Where: a community area by popularity, then a block of that area by block weight.
    area_p = geo["area_weight"] / geo["area_weight"].sum()
    area_idx = rng.choice(N_AREAS, size=rows, p=area_p)
    block = _grouped_choice(rng, geo["area"] - 1, geo["w"], area_idx)

    # What: primary type from the national mix tilted by the area's local mix.
    base = np.array([w for _, w, _ in CRIME_TYPES])
    type_idx = _matrix_choice(rng, base * geo["type_tilt"], area_idx)
    arrest_p = np.array([p for _, _, p in CRIME_TYPES])
    arrest = rng.random(rows) < arrest_p[type_idx]

    # When: year by trend, month by season, uniform day, hour by time-of-day profile.
    year = FIRST_YEAR + rng.choice(len(YEAR_WEIGHTS), size=rows, p=_norm(YEAR_WEIGHTS))
    month = 1 + rng.choice(12, size=rows, p=_norm(MONTH_WEIGHTS))
    first = ((year - 1970) * 12 + month - 1).astype("datetime64[M]").astype("datetime64[D]")
    days_in_month = ((first.astype("datetime64[M]") + 1).astype("datetime64[D]") - first).astype(np.int64)
    day = (rng.random(rows) * days_in_month).astype(np.int64)
    hour = rng.choice(24, size=rows, p=_norm(HOUR_WEIGHTS))
    second = hour * 3600 + rng.integers(0, 3600, rows)
    micros = (first.astype(np.int64) + day) * 86_400_000_000 + second * 1_000_000

    lat = geo["lat"][block] + rng.normal(0.0, 0.0015, rows)
    lon = geo["lon"][block] + rng.normal(0.0, 0.0015, rows)
    order = np.argsort(micros, kind="stable")

    names = pa.array([f"{t}" for t, _, _ in CRIME_TYPES], type=pa.string())
    blocks = pa.array(geo["block"].tolist(), type=pa.string())
    i32 = lambda a: pa.array(np.asarray(a)[order].astype(np.int32), type=pa.int32())  # noqa: E731
    return pa.table({
        "id": pa.array(np.arange(1, rows + 1, dtype=np.int64)),
        "date": pa.array(micros[order], type=pa.timestamp("us", tz="UTC")),
        "year": i32(year),
        "month": i32(month),
        "district": i32(geo["district"][block]),
        "ward": i32(geo["ward"][block]),
        "beat": i32(geo["beat"][block]),
        "community_area": i32(geo["area"][block]),
        "block": blocks.take(pa.array(block[order])),
        "primary_type": names.take(pa.array(type_idx[order])),
        "arrest": pa.array(arrest[order], type=pa.bool_()),
        "latitude": pa.array(np.clip(lat[order], 41.6, 42.05), type=pa.float64()),
        "longitude": pa.array(np.clip(lon[order], -87.95, -87.52), type=pa.float64()),
    })


def _check(rows: object, seed: object) -> None:
    """rows >= 1 and seed >= 0, both integers (bools are not integers here)."""
    if isinstance(rows, bool) or not isinstance(rows, numbers.Integral) or rows < 1:
        raise BadInput(f"crimes row count must be an integer of at least 1, got {rows!r}.")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise BadInput(f"crimes seed must be a non-negative integer, got {seed!r}.")


def _norm(w) -> np.ndarray:
    w = np.asarray(w, dtype=np.float64)
    return w / w.sum()


def _grouped_choice(rng: np.random.Generator, group: np.ndarray, weight: np.ndarray,
                    pick: np.ndarray) -> np.ndarray:
    """For each entry of `pick` (a group id), draw an item of that group with probability ~ weight.

    Items must be sorted by group. Within-group CDFs are laid end to end as group + cdf, so one
    searchsorted serves every group at once.
    """
    totals = np.bincount(group, weights=weight)
    csum = np.cumsum(weight)
    start = np.searchsorted(group, np.arange(len(totals)), side="left")
    end = np.searchsorted(group, np.arange(len(totals)), side="right")
    before = np.where(start > 0, csum[np.maximum(start - 1, 0)], 0.0)
    keys = group + (csum - before[group]) / totals[group]
    idx = np.searchsorted(keys, pick + rng.random(len(pick)), side="right")
    return np.clip(idx, start[pick], end[pick] - 1)


def _matrix_choice(rng: np.random.Generator, weights: np.ndarray, pick: np.ndarray) -> np.ndarray:
    """Row `pick[i]` of the (groups x k) `weights` matrix gives the distribution for draw i; returns 0..k-1."""
    n_groups, k = weights.shape
    group = np.repeat(np.arange(n_groups), k)
    return _grouped_choice(rng, group, weights.ravel(), pick) - pick * k
