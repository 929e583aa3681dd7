"""Recursive queries over a link table: recognising linear ``WITH RECURSIVE`` shapes, evaluating
them on Spark, absorption-provenance sketches for them, and keeping the derived view and its sketch
current under link insertions and deletions (witness sets, BDDs, DRed, recapture)."""
