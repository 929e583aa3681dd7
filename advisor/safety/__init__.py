"""Static checks with Z3: is a sketch on attributes X safe for a query (``static_check``, seed
001 §2), and may a sketch captured for one instance serve another (``reuse_check``, §5); both share
the encoding of expressions in ``z3_encoding``.  Imports only ``advisor.plan``; no Spark.
"""
