"""What the warehouse holds: the SQLite store, versioned tables (a Parquet base plus insert and
delete batches, net deltas), column statistics, value kinds and the stored sketch records.  May
import ``plan`` and ``safety``; the catalog reads tables through the Spark session it is given.
"""
