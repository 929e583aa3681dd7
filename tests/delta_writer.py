"""A plain PySpark writer, separate from the advisor: its own process and SparkSession with only
Delta Lake on the classpath, committing SQL statements to Delta tables.

    python tests/delta_writer.py '[["/data/t", "DELETE FROM {t} WHERE id < 10"], ...]'

``{t}`` in a statement names the table at the path given with it.  With ``-`` instead of a list
the writer stays up and reads one such list a line from standard input, commits it and answers
``ok`` on standard output (one JVM for a test that commits between advisor runs).
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession

from advisor.engine.packages import jar_conf


class Writer:
    """This writer as a separate process that stays up (for tests): ``commit`` hands it
    statements and returns once they are committed."""

    def __init__(self):
        import subprocess

        self.p = subprocess.Popen([sys.executable, __file__, "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)
        assert self.p.stdout.readline().strip() == "ok", "the writer did not start"

    def commit(self, pairs: list[tuple[str, str]]) -> None:
        self.p.stdin.write(json.dumps(pairs) + "\n")
        self.p.stdin.flush()
        assert self.p.stdout.readline().strip() == "ok", "the writer failed"

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(timeout=300)


def main(pairs: list[tuple[str, str]] | None) -> None:
    b = SparkSession.builder.master("local[1]").appName("plain-writer").config("spark.ui.enabled", "false")
    # small tables: a MERGE's or UPDATE's shuffles and a snapshot's state in a few tasks, not 200 or 50
    b = b.config("spark.sql.shuffle.partitions", "4").config("spark.databricks.delta.snapshotPartitions", "2")
    for k, v in jar_conf().items():  # the Delta jars and its session extension, nothing of the advisor's
        b = b.config(k, v)
    s = b.getOrCreate()
    s.sparkContext.setLogLevel("ERROR")
    try:
        if pairs is not None:
            for path, stmt in pairs:
                s.sql(stmt.replace("{t}", f"delta.`{path}`"))
            return
        print("ok", flush=True)  # started
        for line in sys.stdin:
            for path, stmt in json.loads(line):
                s.sql(stmt.replace("{t}", f"delta.`{path}`"))
            print("ok", flush=True)
    finally:
        s.stop()


if __name__ == "__main__":
    main(None if sys.argv[1] == "-" else json.loads(sys.argv[1]))
