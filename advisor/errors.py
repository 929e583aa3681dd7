"""Error types that map to the CLI's exit codes (2 = bad input, 1 = failed check)."""


class BadInput(Exception):
    """The user gave us something we cannot accept (bad SQL, unknown table, malformed batch...).

    The CLI prints the message as one line on stderr and exits with code 2.
    """


class CheckFailed(Exception):
    """A check the user asked for did not pass (e.g. a performance regression); exit code 1."""


class Unsupported(BadInput):
    """A query shape the sketch machinery does not handle; the query may still run without a sketch."""
