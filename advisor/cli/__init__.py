"""The ``advisor`` command line (typer): a thin layer over the packages below.  Command modules
import their implementation lazily, so that ``advisor --help`` starts without loading Spark,
pyarrow or Z3.
"""

from advisor.cli.main import app, main

__all__ = ["app", "main"]
