"""Costs measured on this engine: one Spark job's fixed cost (a probe query) and the per-row rates
read from the store's run log, which the cost model and maintenance policies price with.  Imports
the warehouse and engine layers only.
"""
