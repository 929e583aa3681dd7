"""The Spark edge: building the session, running a query's SQL (plainly, over registered
views of table versions) and reading its scans' metrics (files, bytes, rows) from the executed
plan.  Imports ``plan`` and ``warehouse``; nothing above.
"""
