"""advisor: provenance-sketch data skipping for repeated analytical queries on Spark.

The packages follow the data flow, lowest first, and a package imports only those below it:
``plan`` (SQL to relational algebra and back) -> ``safety`` (Z3 safety and reuse checks) ->
``warehouse`` (store, versioned tables, statistics, stored sketches) -> ``engine`` (Spark session,
running queries, scan metrics) -> ``calibration`` (measured costs) -> ``partition`` (range
partitions) -> ``layout`` (clustered copies, skip prediction) -> ``sketch`` (capture, use, lookup)
-> ``maintain`` (incremental maintenance) -> ``estimation`` (samples, size estimates) ->
``selection`` (candidates, cost model, strategies, recommend) -> ``serve`` (the advise path every
entry point takes) -> ``cli`` and ``api`` (``from advisor import Advisor``, loaded on first use).  The flat modules
``errors``, ``numeric``, ``caches`` and ``memory`` sit below all of them; ``context`` holds what a
command needs.  ``tests/test_import_structure.py`` keeps the order.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    """``advisor.Advisor`` is imported on first use, so the CLI's start-up does not pay for it."""
    if name == "Advisor":
        from advisor.api import Advisor  # start-up time: the API brings Spark

        return Advisor
    raise AttributeError(f"module 'advisor' has no attribute {name!r}")
