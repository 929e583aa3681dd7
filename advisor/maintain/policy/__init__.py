"""When to maintain: the policies (eager, lazy, batched, arrival-aware), whether catching a stale
sketch up is worth it for the query that wants it, and the triggers where policies meet the
commands.  Sits above the Spark side of maintenance.
"""
