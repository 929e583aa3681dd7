"""SQL text to a small relational algebra (``ir``) and back to Spark SQL (``to_sql``), with result
types of expressions and a pyarrow rendering of predicates.  Pure: imports nothing of the
product but ``advisor.errors``, and no Spark.
"""
