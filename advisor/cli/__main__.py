"""``python -m advisor.cli``: the ``advisor`` command (replay's child processes start it this way)."""

from advisor.cli.main import main

main()
