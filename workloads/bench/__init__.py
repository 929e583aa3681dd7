"""Benchmark harnesses behind ``advisor bench``: plain vs sketched runs, incremental maintenance vs
recapture, advice accuracy against the exact oracle (one and two attributes), and partition
building; plus the fixed query suites and query templates they run.
"""
