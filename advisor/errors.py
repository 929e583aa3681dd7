"""Error types that map to the CLI's exit codes (2 = bad input, 1 = failed check), and the one
message for SQL that Spark refuses."""


class BadInput(Exception):
    """The user gave us something we cannot accept (bad SQL, unknown table, malformed batch...).

    The CLI prints the message as one line on stderr and exits with code 2.
    """


class CheckFailed(Exception):
    """A check the user asked for did not pass (e.g. a performance regression); exit code 1."""


class Unsupported(BadInput):
    """A query shape the sketch machinery does not handle; the query may still run without a sketch."""


def spark_rejected(error: Exception, what: str = "the query", limit: int = 300) -> BadInput:
    """Bad input for SQL that Spark refused: the first line of Spark's own message, cut to ``limit``.

    >>> str(spark_rejected(ValueError("[TABLE_OR_VIEW_NOT_FOUND] nope\\nat line 1")))
    'Spark rejected the query: [TABLE_OR_VIEW_NOT_FOUND] nope'
    >>> str(spark_rejected(ValueError("bad"), "step 3: the query"))
    'Spark rejected step 3: the query: bad'
    """
    return BadInput(f"Spark rejected {what}: {str(error).splitlines()[0][:limit]}")
