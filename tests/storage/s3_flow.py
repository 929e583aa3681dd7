"""The s3a:// warehouse flow, run in a process of its own (its Spark session carries hadoop-aws and
the AWS SDK bundle, which the suite's shared session does not): load, capture, use, apply batches,
maintain.  Prints one JSON line of what it saw; any failed check exits non-zero."""

from __future__ import annotations

import json
import sys

from advisor import Advisor
from advisor.engine.session import build_session
from advisor.maintain.spark import state_store
from advisor.partition.range_partition import load_partition
from advisor.plan.parse import parse_sql
from advisor.plan.to_sql import query_sql
from advisor.sketch.apply import sketch_source
from advisor.sketch.capture import capture_batch
from advisor.warehouse import filesystem, stored_paths
from advisor.warehouse.sketch_records import latest_versions
from workloads.data.datasets import load_dataset
from workloads.data.update_batches import make_batch

SQL = "SELECT beat, count(*) AS n FROM crimes GROUP BY beat HAVING count(*) > 13"


def main(wh: str, conf_json: str, scratch: str) -> None:
    spark = build_session("local[2]", {"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "1g",
                                       **json.loads(conf_json)}, app_name="advisor-s3")
    adv = Advisor(spark, warehouse=wh)
    cat = adv.ctx.catalog
    load_dataset(cat, "crimes", rows=3000, seed=7)
    q = parse_sql(SQL, cat.schema)

    def plain():
        return sorted(map(tuple, adv.run(SQL, advise=False).rows))

    def sketched(sk):
        src = sketch_source(cat, sk, {"crimes": cat.current_version("crimes")})
        return sorted(map(tuple, spark.sql(query_sql(q, src)).collect()))

    adv.capture(SQL, on="crimes.beat", fragments=40)
    sk = latest_versions(adv.ctx.store)[0]
    first = sketched(sk) == plain()
    for i in range(3):
        adv.apply(make_batch(cat, "crimes", 30, 6, f"{scratch}/b{i}.parquet", i + 1), "crimes")
    adv.maintain()
    state_store.flush()
    head = latest_versions(adv.ctx.store)[0]
    part = head.parts[0]
    (fresh,), _ = capture_batch(cat, [(q, {"crimes": part.attr}, {"crimes": load_partition(cat.store, part.partition_id)})],
                                {"crimes": cat.current_version("crimes")})
    rows = sketched(head)
    paths = [p for r in adv.ctx.store.query("SELECT base_path, ins_path, del_path FROM versions UNION ALL "
                                            "SELECT ins_path, del_path, NULL FROM net_deltas") for p in r if p]
    print(json.dumps({
        "first_equal": first, "rows": len(rows), "equal": rows == plain(),
        "maintained": head.id != sk.id and head.data_versions["crimes"] == 4,
        "equal_to_recapture": fresh.parts[0].fragments == part.fragments,
        "count": cat.read("crimes").count(), "arrow_rows": cat.read_arrow("crimes").num_rows,
        "paths": len(paths), "relative": all(stored_paths.is_relative(p) for p in paths),
        "on_s3": all(filesystem.exists(stored_paths.join(wh, p)) for p in paths),
        "base": cat.version("crimes", 1).base_path}))
    adv.close()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
