"""Real public data files, fetched once and cached: data that none of the project's generators made.

The source is the npm package ``vega-datasets`` 3.2.1 (BSD-3-Clause; the Vega project's example
data), downloaded as its tarball and checked against the sha512 ``integrity`` its registry entry
records (pinned below).  The tarball is kept under ``~/.cache/advisor/datasets/`` (or
``$ADVISOR_DATASETS_CACHE``) and files are extracted from it on demand, so a second run needs no
network.  Two files serve the replay workloads over users' own tables:

* ``flights-3m.parquet``: 3,000,000 US flights (date timestamp[us], delay, distance, origin,
  destination), written by Polars;
* ``seattle-weather.csv``: 1,461 days of Seattle weather (date, precipitation, temp_max, temp_min,
  wind, weather).

Usage (the first call downloads, later calls read the cache)::

    vega_file("seattle-weather.csv")
    # -> ~/.cache/advisor/datasets/vega-datasets-3.2.1/data/seattle-weather.csv
"""

from __future__ import annotations

import base64
import hashlib
import os
import tarfile
import urllib.request
import uuid
from pathlib import Path

from advisor.errors import BadInput

PACKAGE = "vega-datasets"
VERSION = "3.2.1"
URL = f"https://registry.npmjs.org/{PACKAGE}/-/{PACKAGE}-{VERSION}.tgz"
# the registry's ``dist.integrity`` of vega-datasets 3.2.1 (https://registry.npmjs.org/vega-datasets/3.2.1)
INTEGRITY = "sha512-lTSwZA6yq6qSU2YZm+6bqILiIvTPPxn4itir7jPGFmHIdPvUfQ9pCzzcrklYywMJgLUbaIeSkZQdiJd6wBxPug=="
CACHE_ENV = "ADVISOR_DATASETS_CACHE"
TIMEOUT = 60  # seconds without data before a download is given up


def cache_dir() -> Path:
    """Where fetched files are kept: ``$ADVISOR_DATASETS_CACHE`` or ``~/.cache/advisor/datasets``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "advisor" / "datasets"


def _integrity(path: Path) -> str:
    h = hashlib.sha512()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return "sha512-" + base64.b64encode(h.digest()).decode()


def vega_tarball() -> Path:
    """The package tarball in the cache, downloaded (to a temporary name, checked, renamed) when
    absent.  BadInput when it cannot be fetched or its checksum is not the pinned one."""
    final = cache_dir() / f"{PACKAGE}-{VERSION}.tgz"
    if final.is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
    try:
        try:
            with urllib.request.urlopen(URL, timeout=TIMEOUT) as r, open(tmp, "wb") as f:
                f.writelines(iter(lambda: r.read(1 << 20), b""))
        except OSError as e:  # URLError, timeouts, a full disk
            raise BadInput(f"cannot download {URL}: {getattr(e, 'reason', None) or e} "
                           f"(or place the file at {final})") from None
        got = _integrity(tmp)
        if got != INTEGRITY:
            raise BadInput(f"{URL}: checksum mismatch (got {got[:30]}..., expected {INTEGRITY[:30]}...)")
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    return final


def vega_file(name: str) -> Path:
    """The package's ``data/NAME`` (``NAME`` or ``data/NAME``) as a local file, extracted from the
    cached tarball on first use (to a temporary name, then renamed)."""
    rel = name.removeprefix("data/")
    if not rel or rel.startswith(("/", ".")) or ".." in Path(rel).parts:
        raise BadInput(f"{PACKAGE}: {name!r} is not a file name under data/")
    final = cache_dir() / f"{PACKAGE}-{VERSION}" / "data" / rel
    if final.is_file():
        return final
    tgz = vega_tarball()
    member = f"package/data/{rel}"
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
    try:
        with tarfile.open(tgz, "r:gz") as tar:
            try:
                src = tar.extractfile(member)
            except KeyError:
                src = None
            if src is None:
                raise BadInput(f"{PACKAGE} {VERSION} has no file data/{rel}")
            with src, open(tmp, "wb") as f:
                f.writelines(iter(lambda: src.read(1 << 20), b""))
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    return final
