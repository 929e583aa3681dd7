"""advisor: provenance-sketch data skipping for repeated analytical queries on Spark.

The packages follow the data flow, lowest first, and a package imports only those below it:
``plan`` (SQL to relational algebra and back) -> ``safety`` (Z3 safety and reuse checks) ->
``warehouse`` (store, versioned tables, statistics, stored sketches) -> ``engine`` (Spark session,
running queries, scan metrics) -> ``calibration`` (measured costs) -> ``partition`` (range
partitions) -> ``layout`` (clustered copies, skip prediction) -> ``sketch`` (capture, use, lookup)
-> ``maintain`` (incremental maintenance) -> ``estimation`` (samples, size estimates) ->
``selection`` (candidates, cost model, strategies, recommend) -> ``cli``.  The flat modules
``errors``, ``numeric``, ``caches`` and ``memory`` sit below all of them; ``context`` holds what a
command needs.  ``tests/test_import_structure.py`` keeps the order.
"""

__version__ = "0.1.0"
