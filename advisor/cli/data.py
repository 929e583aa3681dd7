"""`advisor data ...` and `advisor partitions ...`: loading, importing and updating tables, and
range partitions over them.

Kept apart from ``advisor.cli.main`` so the query commands read on their own; the CLI's warehouse
context is opened (``ctx()``) when a command runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from advisor.cli.common import STATE, ctx, emit_json, out
from advisor.errors import BadInput

data_app = typer.Typer(no_args_is_help=True, help="Load datasets, list tables, apply update batches.")
part_app = typer.Typer(no_args_is_help=True, help="Range partitions per table attribute.")


# ---------------- data ----------------
@data_app.command("load")
def data_load(dataset: str = typer.Argument(..., help="tpch | flights | crimes | topology | airports"),
              sf: float = typer.Option(0.1, "--sf", help="TPC-H scale factor (0.01 to 10)."),
              rows: int = typer.Option(100_000, "--rows", help="crimes: number of rows."),
              seed: int = typer.Option(7, "--seed", help="crimes, topology: generator seed."),
              nodes: int = typer.Option(100, "--nodes", help="topology: nodes (transit-stub, 100 per domain)."),
              density: float = typer.Option(2.0, "--density", help="topology: bidirectional links per node (1-8)."),
              radius_km: float = typer.Option(100.0, "--radius-km", help="airports: link airports this close."),
              tables: Optional[str] = typer.Option(None, "--tables", help="tpch: only these tables "
                                                   "(comma-separated, e.g. lineitem,orders; default all eight)."),
              replace: bool = typer.Option(False, "--replace", help="Drop existing tables of the dataset "
                                           "first (their versions, layouts and sketches).")):
    """Generate a dataset and store its tables as version 1 (topology: table link; airports: route)."""
    # start-up time: imported when the command runs (the CLI starts without Spark)
    from workloads.data.datasets import DATASETS, load_dataset, replaced

    if dataset.lower() not in DATASETS:
        raise BadInput(f"unknown dataset {dataset!r} (choose one of: {', '.join(DATASETS)})")
    if dataset.lower() == "tpch" and not (0.01 <= sf <= 10):
        raise BadInput(f"--sf must be between 0.01 and 10, got {sf}")
    if dataset.lower() == "crimes" and (rows < 1 or seed < 0):
        raise BadInput("--rows must be >= 1 and --seed >= 0")
    # start-up time: imported when the command runs (the CLI starts without Spark)
    from advisor.warehouse.catalog import Catalog

    only = None if tables is None else tables.split(",")
    if only is not None and dataset.lower() != "tpch":
        raise BadInput("--tables applies to the tpch dataset only")
    drops = replaced(Catalog.offline(ctx().store), dataset, only)
    if drops and not replace:
        raise BadInput(f"the warehouse already holds {'; '.join(drops)}: loading {dataset} again drops them; "
                       "pass --replace to do so")
    for d in drops:
        out.print(f"replacing {d}")
    counts = load_dataset(ctx().catalog, dataset, sf=sf, rows=rows, seed=seed, nodes=nodes, density=density,
                          radius_km=radius_km, tables=only)
    for t, n in counts.items():
        out.print(f"loaded {t}: {n:,} rows")


@data_app.command("init")
def data_init(force: bool = typer.Option(False, "--force", help="Start a new store even over existing "
                                         "warehouse data or a damaged advisor.db (kept aside); on a "
                                         "warehouse URI the new store takes the warehouse over.")):
    """Create an empty store in the warehouse directory (for a warehouse URI, on the driver)."""
    # start-up time: imported when the command runs (the CLI starts without Spark)
    from advisor.context import default_warehouse
    from advisor.warehouse import ownership, store

    s = store.Store(STATE.get("warehouse") or default_warehouse(), initialise=force)
    if force and s.remote:  # the new store owns the warehouse URI from now on
        ownership.take_over(s, ctx().spark)
    s.close()
    out.print(f"store ready: {s.path}")


@data_app.command("list")
def data_list(as_json: bool = typer.Option(False, "--json")):
    """Tables with their versions, row counts and sizes."""
    c = ctx()
    # start-up time: imported when the command runs (the CLI starts without Spark)
    from advisor.warehouse.catalog import Catalog

    cat = Catalog.offline(c.store)
    rows = []
    for t in cat.tables():
        for v in cat.versions(t):
            rows.append({"table": t, "version": v.version, "kind": v.kind, "rows": v.rows, "bytes": v.bytes,
                         "inserted": v.n_ins if v.kind == "batch" else 0, "deleted": v.n_del})
    if as_json:
        return emit_json(rows)
    tab = Table("table", "version", "kind", "rows", "size", "+ins", "-del")
    for r in rows:
        tab.add_row(r["table"], str(r["version"]), r["kind"], f"{r['rows']:,}", f"{r['bytes'] / 1e6:.1f} MB",
                    str(r["inserted"]), str(r["deleted"]))
    out.print(tab)


@data_app.command("import")
def data_import(name: str = typer.Argument(..., help="Warehouse name of the table."),
                path: Optional[str] = typer.Argument(None, help="Delta table directory, or files: a file, directory or glob."),
                fmt: Optional[str] = typer.Option(None, "--format", help="delta | parquet | csv | orc | json"),
                table: Optional[str] = typer.Option(None, "--table", help="A table in the Spark session's catalog (db.name)."),
                schema: Optional[str] = typer.Option(None, "--schema", help="DDL schema for csv/json, e.g. 'id INT, name STRING'."),
                key: Optional[str] = typer.Option(None, "--key", help="Comma-separated unique key columns."),
                as_of: Optional[int] = typer.Option(None, "--as-of", help="Delta: start at this version (time travel).")):
    """Import a table: a Delta table is read in place (its commits become versions); files and
    catalog tables are copied into the warehouse."""
    # start-up time: imported when the command runs (the CLI starts without Spark)
    from advisor.warehouse.imports import import_table

    keys = [k for k in (key or "").split(",") if k.strip()] or None
    v = import_table(ctx().catalog, name, path, fmt, table=table, schema=schema, key=keys, as_of=as_of)
    where = f"Delta version {v.version}, read in place" if v.kind == "delta" else f"version {v.version}"
    out.print(f"imported {v.table}: {v.rows:,} rows ({where})")


@data_app.command("apply")
def data_apply(batch: Optional[Path] = typer.Argument(None, help="Parquet or CSV file with an op column."),
               table: str = typer.Option(..., "--table"),
               snapshot: Optional[str] = typer.Option(None, "--snapshot", help="A new full snapshot of an imported table, diffed by key."),
               key: Optional[str] = typer.Option(None, "--key", help="Key columns for --snapshot (default: the import's)."),):
    """Apply an insert/delete batch (or the difference to a new snapshot) as a new table version."""
    # start-up time: imported when the command runs (the CLI starts without Spark)
    from advisor.maintain.policy.triggers import after_apply

    c = ctx()
    if (batch is None) == (snapshot is None):
        raise BadInput("give a batch file or --snapshot PATH (not both)")
    if snapshot is not None:
        # start-up time: imported when the command runs (the CLI starts without Spark)
        from advisor.warehouse.imports import snapshot_changes

        ins, dels = snapshot_changes(c.catalog, table, snapshot, [k for k in (key or "").split(",") if k.strip()] or None)
        v = c.catalog.apply_frames(table, ins, dels)
    else:
        v = c.catalog.apply_batch(table, str(batch))
    out.print(f"{v.table} version {v.version}: +{v.n_ins:,} -{v.n_del:,} rows, now {v.rows:,} rows")
    for r in after_apply(c.catalog, v.table, v.n_ins + v.n_del):
        out.print(f"maintained sketch {r.old_id} -> {r.new_id} ({r.how}, {r.seconds:.2f}s)")


@data_app.command("make-batch")
def data_make_batch(table: str, out_path: Path = typer.Option(..., "--out"),
                    inserts: int = typer.Option(1000, "--inserts"), deletes: int = typer.Option(0, "--deletes"),
                    seed: int = typer.Option(0, "--seed")):
    """Write an update batch for TABLE (copies of existing rows as inserts, random deletes)."""
    # start-up time: imported when the command runs (the CLI starts without Spark)
    from workloads.data.update_batches import make_batch

    p = make_batch(ctx().catalog, table, inserts, deletes, str(out_path), seed)
    out.print(f"wrote {p}: {inserts} insert(s), {deletes} delete(s)")


@data_app.command("delta")
def data_delta(table: str, v_from: int = typer.Option(..., "--from"), v_to: Optional[int] = typer.Option(None, "--to"),
               as_json: bool = typer.Option(False, "--json")):
    """Net inserted and deleted rows between two versions of TABLE."""
    ins, dels = ctx().catalog.delta(table, v_from, v_to)
    rec = {"table": table, "from": v_from, "to": v_to or ctx().catalog.current_version(table),
           "inserted": ins.count(), "deleted": dels.count()}
    if as_json:
        return emit_json(rec)
    out.print(f"{table} {rec['from']} -> {rec['to']}: {rec['inserted']:,} inserted, {rec['deleted']:,} deleted")


@data_app.command("compact")
def data_compact(table: str):
    """Fold a table's batches into a new base version."""
    v = ctx().catalog.compact(table)
    out.print(f"{v.table} compacted into version {v.version} ({v.rows:,} rows)")


# ---------------- partitions ----------------
@part_app.command("build")
def partitions_build(table: str, attr: str, fragments: int = typer.Option(1000, "--fragments")):
    """Equi-depth range partition of TABLE.ATTR with about N fragments."""
    # start-up time: imported when the command runs (the CLI starts without Spark)
    from advisor.partition.range_partition import build_partition

    p = build_partition(ctx().catalog, table, attr, fragments)
    nonempty = sum(1 for s in p.sizes if s)
    out.print(f"partition {p.id}: {p.table}.{p.attr} ({p.dtype}) {p.n_ranges} ranges + NULL fragment, "
              f"{nonempty} non-empty, largest {max(p.sizes):,} rows, NULLs {p.sizes[p.null_id]:,}")


@part_app.command("list")
def partitions_list():
    """Stored partitions."""
    tab = Table("id", "table", "attr", "type", "ranges", "table version")
    for r in ctx().store.query("SELECT * FROM partitions ORDER BY id"):
        tab.add_row(str(r["id"]), r["table_name"], r["attr"], r["dtype"],
                    str(len(json.loads(r["boundaries_json"])) + 1), str(r["table_version"]))
    out.print(tab)
