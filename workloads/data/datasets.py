"""Loading the datasets into the warehouse as versioned tables (TPC-H, flights, crimes, and the link
tables of recursive queries: transit-stub topologies and the airports route graph)."""

from __future__ import annotations

import shutil
import tempfile
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

from advisor.errors import BadInput
from workloads.data.airports import route_links
from workloads.data.crimes import generate_crimes
from workloads.data.flights import flights_tables
from workloads.data.topology import topology_links
from workloads.data.tpch import generate_tpch

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog

DATASETS = ("tpch", "flights", "crimes", "topology", "airports")


def _load_parquet_files(catalog: Catalog, files: dict[str, str], dataset: str) -> dict[str, int]:
    out = {}
    for name, path in sorted(files.items()):
        v = catalog.create_table(name, catalog.spark.read.parquet(path), dataset)
        out[name] = v.rows
    return out


def load_dataset(catalog: Catalog, name: str, sf: float = 0.1, rows: int = 100_000, seed: int = 7,
                 nodes: int = 100, density: float = 2.0, radius_km: float = 100.0) -> dict[str, int]:
    """Generate `name` and store every table as version 1; returns {table: rows}.  ``topology``
    writes link(src, dst, cost), ``airports`` route(src, dst, km)."""
    name = name.lower()
    if name not in DATASETS:
        raise BadInput(f"unknown dataset {name!r} (choose one of: {', '.join(DATASETS)})")
    staging = tempfile.mkdtemp(prefix=".staging-", dir=str(catalog.store.warehouse))
    try:
        if name == "tpch":
            return _load_parquet_files(catalog, generate_tpch(sf, staging), "tpch")
        if name == "flights":
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
