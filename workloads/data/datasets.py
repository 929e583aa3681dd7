"""Loading the datasets into the warehouse as versioned tables (TPC-H, flights, crimes, and the link
tables of recursive queries: transit-stub topologies and the airports route graph)."""

from __future__ import annotations

import shutil
import tempfile
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

from advisor.errors import BadInput
from advisor.warehouse import filesystem, stored_paths
from advisor.warehouse.atomic import tmp_name
from advisor.warehouse.sketch_records import latest_versions
from workloads.data import tpch
from workloads.data.airports import route_links
from workloads.data.crimes import generate_crimes
from workloads.data.topology import topology_links
from workloads.data.tpch import generate_tpch

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog

DATASETS = ("tpch", "flights", "crimes", "topology", "airports")
# flights' names as ``workloads.data.flights.TABLES`` (that module loads its data when imported)
TABLES = {"tpch": tpch.TABLES, "flights": ("flights", "airlines", "airports", "planes", "weather"),
          "crimes": ("crimes",), "topology": ("link",), "airports": ("route",)}


def replaced(catalog: Catalog, name: str, tables: list[str] | None = None) -> list[str]:
    """What loading dataset ``name`` (only ``tables`` of it, when given) again would drop: one phrase per
    existing table (its versions, layouts and the sketches that read it), empty when none exists yet."""
    store = catalog.store
    sketches = latest_versions(store)
    out = []
    wanted = None if tables is None else {t.strip().lower() for t in tables}
    for t in TABLES[name.lower()]:
        if wanted is not None and t not in wanted:
            continue
        if not catalog.exists(t):
            continue
        nv = store.one("SELECT count(*) n FROM versions WHERE table_name=?", (t,))["n"]
        nl = store.one("SELECT count(*) n FROM layouts WHERE table_name=?", (t,))["n"]
        ns = sum(1 for s in sketches if t in s.data_versions or any(p.table == t for p in s.parts))
        out.append(f"{t} ({nv} version(s), {nl} layout(s), {ns} sketch(es) reading it)")
    return out


def _load_parquet_files(catalog: Catalog, files: dict[str, str], dataset: str) -> dict[str, int]:
    """Store the staged Parquet ``files`` ({table: driver-local path}) as version 1 of each table.
    Spark's executors read them: with a warehouse on a Hadoop file system they are first copied
    below its URI (a cluster's executors do not see the driver's disk), and removed afterwards."""
    store = catalog.store
    upload = None
    if store.remote:
        upload = stored_paths.join(store.root, tmp_name("staging"))
        fs = filesystem.for_path(upload, catalog.spark)
        fs.mkdirs(upload)
    try:
        out = {}
        for name, path in sorted(files.items()):
            if upload is not None:
                at = f"{upload}/{name}"
                fs.upload(path, at)
                path = at
            v = catalog.create_table(name, catalog.spark.read.parquet(path), dataset)
            out[name] = v.rows
        return out
    finally:
        if upload is not None:
            fs.remove(upload)


def load_dataset(catalog: Catalog, name: str, sf: float = 0.1, rows: int = 100_000, seed: int = 7,
                 nodes: int = 100, density: float = 2.0, radius_km: float = 100.0,
                 tables: list[str] | None = None) -> dict[str, int]:
    """Generate `name` and store every table as version 1 (TPC-H: only ``tables`` when given); returns
    {table: rows}.  ``topology`` writes link(src, dst, cost), ``airports`` route(src, dst, km)."""
    name = name.lower()
    if name not in DATASETS:
        raise BadInput(f"unknown dataset {name!r} (choose one of: {', '.join(DATASETS)})")
    staging = tempfile.mkdtemp(prefix=tmp_name("staging") + "-", dir=str(catalog.store.warehouse))
    try:
        if name == "tpch":
            return _load_parquet_files(catalog, generate_tpch(sf, staging, tables), "tpch")
        if name == "flights":
            from workloads.data.flights import flights_tables  # start-up time: reads its data when imported

            tables = flights_tables()
        elif name == "topology":
            tables = {"link": topology_links(nodes, seed, density)}
        elif name == "airports":
            tables = {"route": route_links(radius_km)}
        else:
            tables = {"crimes": generate_crimes(rows, seed)}
        files = {}
        for t, tab in tables.items():
            p = f"{staging}/{t}.parquet"
            pq.write_table(tab, p)
            files[t] = p
        return _load_parquet_files(catalog, files, name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
