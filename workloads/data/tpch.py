"""TPC-H data via the `tpchgen-cli` console script, written as Spark-friendly Parquet.

tpchgen-cli (a dbgen-compatible Rust port) writes plain Parquet types (int64, int32, decimal(15,2),
date32, UTF-8 strings), but embeds an Arrow schema that makes pyarrow read the strings back as
`string_view`; we rewrite each file row group by row group with plain Arrow types so pyarrow,
pandas and Spark all see the same, boring schema.
"""

from __future__ import annotations

import math
import numbers
import os
import shutil
import subprocess
import sys
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq

from advisor.errors import BadInput

TABLES = ("customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier")
MIN_SF, MAX_SF = 0.01, 10.0


def generate_tpch(sf: float, out_dir: str, tables: tuple[str, ...] | list[str] | None = None) -> dict[str, str]:
    """Write the TPC-H tables at scale factor `sf` (all eight, or only ``tables``) to `out_dir`; return
    {table: parquet path}.  A workload over lineitem alone need not wait for the other seven."""
    _check_sf(sf)
    tables = _check_tables(tables)
    cli = _find_cli()
    os.makedirs(out_dir, exist_ok=True)
    raw_dir = tempfile.mkdtemp(prefix=".tpchgen-", dir=out_dir)
    try:
        cmd = [cli, "parquet", "--scale-factor", format(float(sf), "g"), "--output-dir", raw_dir,
               "--overwrite", "--no-progress", "--quiet"]
        if len(tables) < len(TABLES):
            cmd += ["--tables", ",".join(tables)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            lines = [ln for ln in (proc.stderr or proc.stdout or "").splitlines() if ln.strip()]
            last = lines[-1].strip() if lines else "no output"
            raise RuntimeError(f"tpchgen-cli failed with exit code {proc.returncode}: {last}")
        paths: dict[str, str] = {}
        for table in tables:
            src = os.path.join(raw_dir, f"{table}.parquet")
            if not os.path.isfile(src):
                raise RuntimeError(f"tpchgen-cli did not write {table}.parquet into {raw_dir}")
            dst = os.path.join(out_dir, f"{table}.parquet")
            normalize_parquet(src, dst)
            paths[table] = dst
        return paths
    finally:
        shutil.rmtree(raw_dir, ignore_errors=True)


def _check_sf(sf: object) -> None:
    """Reject non-numbers and scale factors outside [0.01, 10] (tiny SFs are degenerate, big ones too slow)."""
    if isinstance(sf, bool) or not isinstance(sf, numbers.Real) or not math.isfinite(float(sf)):
        raise BadInput(f"TPC-H scale factor must be a number between {MIN_SF:g} and {MAX_SF:g}, got {sf!r}.")
    if not MIN_SF <= float(sf) <= MAX_SF:
        raise BadInput(f"TPC-H scale factor must be between {MIN_SF:g} and {MAX_SF:g}, got {float(sf):g}.")


def _check_tables(tables) -> tuple[str, ...]:
    """The requested TPC-H tables in canonical order (all eight when None); an unknown name is bad input.

    >>> _check_tables(["Orders", "lineitem"])
    ('lineitem', 'orders')
    """
    if tables is None:
        return TABLES
    wanted = {str(t).strip().lower() for t in tables if str(t).strip()}
    unknown = sorted(wanted - set(TABLES))
    if unknown or not wanted:
        raise BadInput(f"unknown TPC-H table(s) {', '.join(unknown) or '(none given)'} "
                       f"(choose from: {', '.join(TABLES)})")
    return tuple(t for t in TABLES if t in wanted)


def _find_cli() -> str:
    """Prefer the script installed next to this interpreter (the venv), then fall back to PATH."""
    names = ["tpchgen-cli.exe", "tpchgen-cli"] if os.name == "nt" else ["tpchgen-cli"]
    bindir = os.path.dirname(sys.executable)
    for name in names:
        cand = os.path.join(bindir, name)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    found = shutil.which("tpchgen-cli")
    if not found:
        raise RuntimeError("tpchgen-cli not found next to the Python interpreter or on PATH; "
                           "install the 'tpchgen-cli' package.")
    return found


def plain_type(t: pa.DataType) -> pa.DataType:
    """Map Arrow types Spark or pandas handle awkwardly to plain equivalents (identity otherwise)."""
    if pa.types.is_dictionary(t):
        return plain_type(t.value_type)
    if pa.types.is_string_view(t) or pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_binary_view(t) or pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_uint8(t) or pa.types.is_uint16(t):
        return pa.int32()
    if pa.types.is_uint32(t) or pa.types.is_uint64(t):
        return pa.int64()
    if pa.types.is_date64(t):
        return pa.date32()
    return t


def normalize_parquet(src: str, dst: str) -> None:
    """Copy `src` to `dst` with plain types, keeping its row-group layout (so Spark splits stay alike)."""
    pf = pq.ParquetFile(src)
    schema = pa.schema([pa.field(f.name, plain_type(f.type), nullable=f.nullable)
                        for f in pf.schema_arrow])
    tmp = dst + ".tmp"
    with pq.ParquetWriter(tmp, schema, compression="snappy", store_decimal_as_integer=True) as writer:
        for i in range(pf.num_row_groups):
            rg = pf.read_row_group(i).cast(schema)
            writer.write_table(rg, row_group_size=max(rg.num_rows, 1))
    os.replace(tmp, dst)
