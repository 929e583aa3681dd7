"""Loading the three datasets into the warehouse as versioned tables (TPC-H, flights, crimes)."""

from __future__ import annotations

import shutil
import tempfile
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

from advisor.errors import BadInput
from workloads.data.crimes import generate_crimes
from workloads.data.flights import flights_tables
from workloads.data.tpch import generate_tpch

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog

DATASETS = ("tpch", "flights", "crimes")


def _load_parquet_files(catalog: Catalog, files: dict[str, str], dataset: str) -> dict[str, int]:
    out = {}
    for name, path in sorted(files.items()):
        v = catalog.create_table(name, catalog.spark.read.parquet(path), dataset)
        out[name] = v.rows
    return out


def load_dataset(catalog: Catalog, name: str, sf: float = 0.1, rows: int = 100_000, seed: int = 7) -> dict[str, int]:
    """Generate `name` and store every table as version 1; returns {table: rows}."""
    name = name.lower()
    if name not in DATASETS:
        raise BadInput(f"unknown dataset {name!r} (choose one of: {', '.join(DATASETS)})")
    staging = tempfile.mkdtemp(prefix=".staging-", dir=str(catalog.store.warehouse))
    try:
        if name == "tpch":
            return _load_parquet_files(catalog, generate_tpch(sf, staging), "tpch")
        if name == "flights":
            tables = flights_tables()
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
