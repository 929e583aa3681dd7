"""Maintenance on Spark data: the base side of joins read through Spark, bulk initialisation of
operator state, state persistence with a write-behind cache, renting or buying state, deriving
sketches for new bindings and the service that brings a stored sketch up to date.  Imports the
pure engine, ``sketch`` and below.
"""
