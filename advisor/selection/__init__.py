"""Choosing a sketch: candidate attributes, two-attribute candidates, the cost model and the
strategies that pick, the forecast of a template's reuse, remembered decisions, and ``recommend``
that runs it all.  Imports every layer below; only the CLI and the workloads sit above.
"""
