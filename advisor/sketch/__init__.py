"""Provenance sketches at work: capturing one with an instrumented run (``capture``), turning it
into scan filters (``apply``), running a query with it (``run``) and deciding which stored sketch
may serve a query (``lookup``).  Imports ``layout`` and below.
"""
