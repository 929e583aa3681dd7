"""The incremental operators of the maintenance engine (seed 000): the operator protocol,
aggregation (dictionary and array state), join with bloom-filter pre-filtering, and top-k with a
buffer.  Pure pandas/numpy; imported by ``advisor.maintain.engine``.
"""
