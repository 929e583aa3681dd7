"""From a query to sketch-size estimates per candidate attribute (seed 002, Alg. 1 and 2): the
query's shape, stored stratified samples, the query evaluated over a sample on the driver, the
estimators run over it, and exact sizes for the oracle.  Imports ``maintain`` (its frames) and
below, and the ``estimators`` package.
"""
