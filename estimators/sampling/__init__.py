"""Drawing stratified reservoir samples: on Spark (``reservoir_spark``), on the driver with pyarrow
(``reservoir_local``, bit for bit the same rows via ``spark_hash`` and ``stratum_labels``), and
bringing a stored sample to a later table version (``sample_delta``).  Imports the statistical
modules of ``estimators`` and nothing of ``advisor`` but its leaf modules.
"""
