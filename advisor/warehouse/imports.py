"""Importing users' tables: a Delta table is read in place; Parquet, CSV, ORC and JSON files and
catalog tables are copied into the warehouse's own versioned store.

Every check runs before anything is written, so a refused import changes nothing.

    advisor data import trips /data/trips --format delta --key trip_id
    advisor data import stations 'raw/stations_*.csv' --format csv --key station_id
    advisor data import orders --table sales.orders
"""

from __future__ import annotations

import functools
import glob
import os
from pathlib import Path

from pyspark.sql import functions as F

from advisor.errors import BadInput
from advisor.warehouse import delta_source

FILE_FORMATS = ("parquet", "csv", "orc", "json")
FORMATS = ("delta",) + FILE_FORMATS


def _first_line(e: Exception) -> str:
    return str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__


def _location(path: str) -> str:
    """An absolute location: URIs as given, local paths resolved."""
    return path if "://" in path else str(Path(path).resolve())


def _check_key(df, key: list[str] | None, what: str) -> list[str] | None:
    if not key:
        return None
    key = [k.strip().lower() for k in key if k.strip()]
    cols = {c.lower() for c in df.columns}
    missing = [k for k in key if k not in cols]
    if missing:
        raise BadInput(f"{what} has no key column(s) {', '.join(missing)} (columns: {', '.join(sorted(cols))})")
    return key


def _check_unique(df, key: list[str], what: str) -> None:
    """Refuse a key with duplicate or NULL values (one Spark job)."""
    any_null = functools.reduce(lambda a, b: a | b, [F.col(k).isNull() for k in key])
    nulls = F.sum(any_null.cast("int"))
    per_key = df.groupBy(*key).agg(F.count(F.lit(1)).alias("n"))
    r = per_key.agg(F.max("n").alias("most"), nulls.alias("nulls")).first()
    if r["nulls"]:
        raise BadInput(f"{what}: key ({', '.join(key)}) has NULL values")
    if r["most"] and r["most"] > 1:
        dup = per_key.where(f"n = {int(r['most'])}").first()
        vals = ", ".join(f"{k}={dup[k]!r}" for k in key)
        raise BadInput(f"{what}: key ({', '.join(key)}) is not unique ({vals} occurs {dup['n']} times)")


def read_files(spark, path: str, fmt: str, schema: str | None = None):
    """A DataFrame over the files at ``path`` (a file, directory or glob) in ``fmt``; CSV with a
    header line.  Without ``schema`` CSV and JSON types are inferred."""
    fmt = fmt.lower()
    if fmt not in FILE_FORMATS:
        raise BadInput(f"unknown format {fmt!r} (choose one of: {', '.join(FORMATS)})")
    if "://" not in path and not glob.glob(path):
        raise BadInput(f"no files at {path}")
    reader = spark.read.format(fmt)
    if fmt == "csv":
        reader = reader.option("header", "true").option("mode", "FAILFAST")
        if schema is None:
            reader = reader.option("inferSchema", "true")
    if fmt == "json":
        reader = reader.option("mode", "FAILFAST")
    if schema is not None:
        try:
            reader = reader.schema(schema)
        except Exception as e:
            raise BadInput(f"--schema {schema!r} is not a valid DDL schema: {_first_line(e)}") from None
    try:
        df = reader.load(path)
        df.schema  # noqa: B018  (resolves the files now: an unreadable path fails here)
    except Exception as e:
        raise BadInput(f"cannot read {path} as {fmt}: {_first_line(e)}") from None
    if not df.columns or (fmt in ("json",) and df.columns == ["_corrupt_record"]):
        raise BadInput(f"{path} holds no {fmt} records")
    return df


def import_delta(catalog, name: str, path: str, key: list[str] | None = None, as_of: int | None = None):
    """Register the Delta table at ``path`` as ``name``, read in place from version ``as_of``
    (default: its latest).  It needs its Change Data Feed (maintenance reads changes from it) and a
    row identity for samples: Delta row tracking or a declared ``key``."""
    loc = _location(path)
    latest = delta_source.latest_version(loc)
    if latest is None:
        raise BadInput(f"{path} is not a Delta table (no {delta_source.LOG} with commits)")
    version = latest if as_of is None else int(as_of)
    if not 0 <= version <= latest:
        raise BadInput(f"--as-of {version}: {path} has versions 0 to {latest}")
    delta_source.check_readable(catalog.spark, loc, version)
    props = delta_source.properties(catalog.spark, loc)
    if props.get(delta_source.CDF, "false").lower() != "true":
        raise BadInput(f"{path} has no change data feed, so sketches on it could not be maintained: enable it with "
                       f"ALTER TABLE delta.`{loc}` SET TBLPROPERTIES ({delta_source.CDF} = true)")
    df = delta_source.snapshot(catalog.spark, loc, version)
    key = _check_key(df, key, path)
    if key is None and props.get(delta_source.ROW_TRACKING, "false").lower() != "true":
        raise BadInput(f"{path} has no row identity: declare a unique key with --key COLS, or enable row tracking "
                       f"with ALTER TABLE delta.`{loc}` SET TBLPROPERTIES ({delta_source.ROW_TRACKING} = true)")
    if key is not None:
        _check_unique(df, key, path)
    return catalog.register_delta(name, loc, version, key)


def import_files(catalog, name: str, path: str, fmt: str, schema: str | None = None, key: list[str] | None = None):
    """Copy the ``fmt`` files at ``path`` into the warehouse as version 1 of ``name``."""
    df = read_files(catalog.spark, path, fmt, schema)
    key = _check_key(df, key, path)
    if key is not None:
        _check_unique(df, key, path)
    v = catalog.create_table(name, df, dataset=f"{fmt}:{path}")
    catalog.record_source(name, fmt, _location(path), key, {"schema": schema} if schema else None)
    return v


def import_catalog_table(catalog, name: str, table: str, key: list[str] | None = None, as_of: int | None = None):
    """Import the Spark catalog table ``table``: a Delta table is read in place at its location,
    any other is copied."""
    spark = catalog.spark
    if not spark.catalog.tableExists(table):
        raise BadInput(f"no table {table!r} in the Spark catalog")
    detail = None
    try:
        detail = spark.sql(f"DESCRIBE DETAIL {table}").first()
    except Exception:  # not a Delta table: DESCRIBE DETAIL is Delta's
        detail = None
    if detail is not None and str(detail["format"]).lower() == "delta":
        loc = str(detail["location"])
        return import_delta(catalog, name, loc[len("file:"):] if loc.startswith("file:") else loc, key, as_of)
    if as_of is not None:
        raise BadInput(f"--as-of needs a Delta table; {table} is not one")
    df = spark.table(table)
    key = _check_key(df, key, table)
    if key is not None:
        _check_unique(df, key, table)
    v = catalog.create_table(name, df, dataset=f"table:{table}")
    catalog.record_source(name, "table", table, key)
    return v


def import_table(catalog, name: str, path: str | None, fmt: str | None, table: str | None = None,
                 schema: str | None = None, key: list[str] | None = None, as_of: int | None = None):
    """The one entry point of ``advisor data import``: route by ``fmt`` (or ``table``)."""
    if not name or not name.replace("_", "").isalnum() or name[0].isdigit():
        raise BadInput(f"table name {name!r} must be letters, digits and underscores, not starting with a digit")
    if (path is None) == (table is None):
        raise BadInput("give either PATH with --format, or --table db.name")
    if table is not None:
        return import_catalog_table(catalog, name, table, key, as_of)
    fmt = (fmt or "").lower()
    if fmt == "delta":
        if schema is not None:
            raise BadInput("--schema applies to csv and json files; a Delta table has its own schema")
        return import_delta(catalog, name, path, key, as_of)
    if fmt not in FILE_FORMATS:
        raise BadInput(f"unknown format {fmt or '(none)'!r} (choose one of: {', '.join(FORMATS)})")
    if as_of is not None:
        raise BadInput("--as-of is time travel on a Delta table; plain files have one version")
    if "://" not in path and os.path.isdir(os.path.join(path, delta_source.LOG)):
        raise BadInput(f"{path} is a Delta table: import it with --format delta")
    return import_files(catalog, name, path, fmt, schema, key)


def snapshot_changes(catalog, name: str, path: str, key: list[str] | None = None):
    """(insert rows, delete row ids) turning the current version of ``name`` into the new snapshot
    at ``path`` (same format as the import), matched by ``key``: rows whose key is new or whose
    values changed are inserted, rows whose key is gone or whose values changed are deleted."""
    src = catalog.source(name)
    if src is None or src["format"] not in FILE_FORMATS + ("table",):
        raise BadInput(f"table {name!r} was not imported from files: --snapshot needs a file import")
    if catalog.is_delta(name):
        raise BadInput(f"table {name!r} is a Delta table: its commits are read from its change feed")
    key = [k.lower() for k in (key or src["key"] or [])]
    if not key:
        raise BadInput(f"--snapshot needs --key COLS: table {name!r} has no declared key")
    fmt = src["format"] if src["format"] != "table" else "parquet"
    schema = catalog.schema(name)
    new = read_files(catalog.spark, path, fmt, (src["options"] or {}).get("schema"))
    new = new.toDF(*[c.lower() for c in new.columns])
    cols = [c for c, _ in schema]
    if sorted(new.columns) != sorted(cols):
        raise BadInput(f"snapshot {path} has columns {', '.join(new.columns)}; table {name!r} has {', '.join(cols)}")
    casted = []
    for c, t in schema:
        bad = new.where(F.col(c).isNotNull() & F.col(c).try_cast(t).isNull()).limit(1).collect()
        if bad:
            raise BadInput(f"snapshot {path}: value {bad[0][c]!r} in column {c} is not a valid {t}")
        casted.append(F.col(c).try_cast(t).alias(c))
    new = new.select(*casted)
    _check_key(new, key, path)
    _check_unique(new, key, path)
    cur = catalog.read(name, with_rid=True)
    rest = [c for c in cols if c not in key]
    o, n = cur.alias("o"), new.alias("n")
    on = [F.col(f"o.{k}") == F.col(f"n.{k}") for k in key]
    same = F.lit(True)
    for c in rest:
        same = same & F.col(f"o.{c}").eqNullSafe(F.col(f"n.{c}"))
    j = o.join(n, on, "full_outer")
    o_key, n_key = F.col(f"o.{key[0]}"), F.col(f"n.{key[0]}")
    changed = o_key.isNotNull() & n_key.isNotNull() & ~same
    ins = j.where(o_key.isNull() | changed).select(*[F.col(f"n.{c}").alias(c) for c in cols])
    dels = j.where(n_key.isNull() | changed).select(F.col("o._rid").alias("_rid"))
    return ins, dels
