"""A copy of a Delta table read in place (a clustered layout or narrow copy in the advisor's
warehouse) brought to a later version of the table, so it is never served stale.

The copy holds the table at one version, each row with the ``_rid`` of the table's declared key
(Spark's ``xxhash64`` of the key columns, as ``delta_source.snapshot`` gives it).  The net change since (the change feed
read on the driver, ``delta_source.net_changes``) removes the rows whose key it deletes, then adds
the rows it inserts: an UPDATE or a MERGE's matched rows are both, with the same key, so the
post-image replaces the pre-image.  A table without a declared key has no copy to bring forward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import functions as F

from advisor.errors import BadInput
from advisor.warehouse import delta_source
from advisor.warehouse.table_files import RID

if TYPE_CHECKING:  # the catalog's tables and versions side: a copy needs the table's key, schema and source
    from advisor.warehouse.catalog_versions import TableVersions


def bring_forward(catalog: TableVersions, base_df, name: str, from_version: int, to: int, with_rid: bool,
                  map_rows=None):
    """``base_df`` (the copy, at ``from_version``) as the table is at ``to``; ``map_rows`` maps the
    inserted rows (an Arrow table) before they join the copy, e.g. to number them into the copy's
    blocks."""
    key = catalog.key(name)
    if not key:
        raise BadInput(f"Delta table {name!r} has no declared key: a copy of it cannot follow its commits")
    df = base_df
    if to > from_version:
        types = dict(catalog.schema(name))
        cols = [c for c in base_df.columns if c in types]
        need = list(dict.fromkeys(cols + list(key)))
        ins, dels = delta_source.net_changes(catalog.spark, catalog.source(name)["location"], from_version, to, need)
        if dels.num_rows:
            df = df.join(_with_rid(catalog, dels.select(list(key)), key, types).select(RID), on=RID, how="left_anti")
        if ins.num_rows:
            new = _with_rid(catalog, map_rows(ins) if map_rows is not None else ins, key, types)
            df = df.unionByName(new.select(*[F.col(f.name).cast(f.dataType).alias(f.name)
                                             for f in base_df.schema.fields]))
    return df if with_rid else df.drop(RID)


def _with_rid(catalog: TableVersions, rows: pa.Table, key: list, types: dict):
    """``rows`` as a Spark DataFrame with the ``_rid`` Spark gives the key (``delta_source.snapshot``),
    the key columns cast to the table's types first."""
    df = catalog.spark.createDataFrame(rows)
    return df.withColumn(RID, F.xxhash64(*[F.col(k).cast(types[k]) for k in key]))
