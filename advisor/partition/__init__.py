"""Equi-depth range partitions of an attribute: building them (exact or sampled quantiles),
assigning fragment ids (Spark and pandas twins), coarser partitions derived from fine ones, and
runs of consecutive fragments.  Imports ``warehouse``, ``engine`` and below.
"""
