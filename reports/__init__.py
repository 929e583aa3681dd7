"""Run records of ``advisor replay`` (``schema``) turned into self-contained HTML reports
(``html``, with random strategies' draws summed up in ``draws``) and compared by the CI gate
(``gate``).  Pure: no Spark, and nothing of ``advisor`` is imported.
"""
