"""The advise path: the one way a query is served (reuse a stored sketch, or decide by cost whether
to sketch and capture, then run and record why) and an update is taken in (maintain per the
policy).  `advisor run`, `advisor run --file`, the replay harness and the Python API all call it."""
