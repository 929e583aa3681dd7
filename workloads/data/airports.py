"""A route graph over the real airports of the ``airportsdata`` package: airports (with an IATA
code) within ``radius_km`` of each other are linked both ways; route(src, dst, km) holds ICAO
codes and the great-circle distance (haversine, mean Earth radius) rounded to 0.1 km.

>>> t = route_links(50.0)
>>> t.num_rows > 0 and t.num_rows % 2 == 0
True
"""

from __future__ import annotations

import airportsdata
import numpy as np
import pyarrow as pa

from advisor.errors import BadInput

EARTH_KM = 6371.0088


def haversine_km(lat1, lon1, lat2, lon2):
    """Great-circle distance in km between points given in degrees (numpy arrays or scalars).

    >>> round(float(haversine_km(0.0, 0.0, 0.0, 1.0)), 1)
    111.2
    """
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dp, dl = p2 - p1, np.radians(np.asarray(lon2) - np.asarray(lon1))
    a = np.sin(dp / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2 * EARTH_KM * np.arcsin(np.sqrt(np.clip(a, 0.0, 1.0)))


def route_links(radius_km: float) -> pa.Table:
    """route(src, dst, km) of airports within ``radius_km`` of each other (module docstring)."""
    if not 1.0 <= radius_km <= 2000.0:
        raise BadInput(f"--radius-km must be between 1 and 2000, got {radius_km}")
    ap = sorted(
        (a["icao"], float(a["lat"]), float(a["lon"])) for a in airportsdata.load().values() if a.get("iata")
    )
    codes = np.array([a[0] for a in ap])
    lat = np.array([a[1] for a in ap])
    lon = np.array([a[2] for a in ap])
    order = np.argsort(lat, kind="stable")
    lat_s = lat[order]
    band = radius_km / 110.0 + 1e-9  # degrees of latitude: a degree is at least 110.5 km
    src, dst, km = [], [], []
    for pos, i in enumerate(order):
        hi = np.searchsorted(lat_s, lat[i] + band, side="right")
        cand = order[pos + 1 : hi]
        if not len(cand):
            continue
        d = haversine_km(lat[i], lon[i], lat[cand], lon[cand])
        for j, dk in zip(cand[d <= radius_km], d[d <= radius_km]):
            k = round(float(dk), 1)
            src += [codes[i], codes[j]]
            dst += [codes[j], codes[i]]
            km += [k, k]
    idx = np.lexsort((np.array(dst), np.array(src))) if src else np.array([], dtype=int)
    return pa.table(
        {
            "src": pa.array(np.array(src, dtype=object)[idx].tolist(), pa.string()),
            "dst": pa.array(np.array(dst, dtype=object)[idx].tolist(), pa.string()),
            "km": pa.array(np.array(km, dtype=np.float64)[idx]),
        }
    )
