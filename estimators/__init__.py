"""Sampling and estimation for cost-based provenance-sketch selection (seed 002).

Modules (import them directly; this package file imports nothing so that the pure modules stay
usable without Spark and the Spark one is only loaded on demand):

* ``sampling``   -- stratified reservoir sample on Spark (the only module that needs Spark).
* ``bootstrap``  -- vectorised numpy stratified bootstrap, plus a Spark ``applyInPandas`` wrapper.
* ``clt``        -- Haas (1997) CLT variances, normal intervals and pass probabilities.
* ``aggregates`` -- per-group estimates (bootstrap or CLT), HAVING predicates, pass probabilities,
  nested aggregation.
* ``size``       -- sketch-size estimators per candidate attribute (Alg. 2 point estimate,
  expectation, interval).
* ``topk``       -- probability that a group is in the top k, and the resulting sketch size.

Conventions shared by all modules: a sample is a pandas frame with the sampled rows, ``_n_g`` (the
population size of the row's stratum) and ``_stratum`` (the stratum key); a group that is fully
sampled (``n == N``) is exact, so every estimate for it is the true value and every pass probability
is 0 or 1.
"""
