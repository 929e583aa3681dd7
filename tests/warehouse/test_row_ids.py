"""Row ids stay unique across versions, also for a table created with a single row (its largest
row id is 0, which must not read as "no rows")."""

from __future__ import annotations

import pandas as pd

from advisor.warehouse.catalog import Catalog
from advisor.warehouse.store import Store


def test_the_first_insert_into_a_one_row_table_gets_a_new_row_id(spark, tmp_path):
    cat = Catalog(spark, Store(tmp_path))
    cat.create_table("one", spark.createDataFrame(pd.DataFrame({"a": [1]})))
    ins = spark.createDataFrame(pd.DataFrame({"a": [2]}))
    none = spark.createDataFrame([], "_rid bigint")
    v = cat.apply_frames("one", ins, none)
    rids = sorted(r["_rid"] for r in cat.read("one", v.version, with_rid=True).collect())
    assert len(rids) == 2 and len(set(rids)) == 2
    assert v.rows == 2
