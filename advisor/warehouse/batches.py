"""Reading and validating update batches: a Parquet or CSV file with an `op` column.

Rows with op in {insert, i, +} carry every table column; rows with op in {delete, d, -} carry the
`_rid` of the row to delete. Anything else is rejected with one clear sentence (BadInput).
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import functions as F

from advisor.errors import BadInput

RID = "_rid"
OP = "op"


def read_batch(spark, path: str, schema: list[tuple[str, str]]):
    """Return (insert rows cast to the table schema, delete row ids) or raise BadInput."""
    p = Path(path)
    if not p.exists():
        raise BadInput(f"batch file {path} does not exist")
    try:
        if p.suffix.lower() == ".csv":
            # RFC 4180: a quoted field may hold commas, doubled quotes and line breaks
            raw = (spark.read.option("header", True).option("multiLine", True).option("escape", '"')
                   .csv(str(p)))
        else:
            raw = spark.read.parquet(str(p))
    except Exception as e:  # Spark's AnalysisException and friends: unreadable file
        raise BadInput(f"cannot read batch {path}: {str(e).splitlines()[0][:200]}") from None
    raw = raw.toDF(*[c.lower() for c in raw.columns])
    cols = [c for c, _ in schema]
    if OP not in raw.columns:
        raise BadInput(f"batch {path} has no '{OP}' column (expected insert/delete per row)")
    unknown = sorted(set(raw.columns) - set(cols) - {OP, RID})
    if unknown:
        raise BadInput(f"batch {path} has column(s) not in the table: {', '.join(unknown)}")
    op = F.lower(F.trim(F.col(OP).cast("string")))
    bad_ops = raw.filter(~op.isin("i", "insert", "+", "d", "delete", "-") | F.col(OP).isNull()).limit(1).collect()
    if bad_ops:
        raise BadInput(f"batch {path} has an unknown op {bad_ops[0][OP]!r} (use insert or delete)")
    ins = raw.filter(op.isin("i", "insert", "+"))
    dels = raw.filter(op.isin("d", "delete", "-"))
    n_ins = ins.count()
    n_del = dels.count()
    ins_df = None
    if n_ins:
        missing = [c for c in cols if c not in raw.columns]
        if missing:
            raise BadInput(f"batch {path} inserts rows but lacks column(s): {', '.join(missing)}")
        casted = []
        for c, t in schema:
            casted.append(F.col(c).try_cast(t).alias(c))
            failed = ins.filter(F.col(c).isNotNull() & F.col(c).try_cast(t).isNull()).limit(1).collect()
            if failed:
                raise BadInput(f"batch {path}: value {failed[0][c]!r} in column {c} is not a valid {t}")
        ins_df = ins.select(*casted)
    del_ids = None
    if n_del:
        if RID not in raw.columns:
            raise BadInput(f"batch {path} deletes rows but has no {RID} column")
        ids = dels.select(F.col(RID).try_cast("long").alias(RID), F.col(RID).alias("_raw"))
        if ids.filter(F.col(RID).isNull()).limit(1).count():
            raise BadInput(f"batch {path} has a delete row without a valid integer {RID}")
        del_ids = ids.select(RID)
    if not n_ins and not n_del:
        raise BadInput(f"batch {path} is empty")
    return ins_df, del_ids
