"""Running the CLI in-process for tests (sharing the test SparkSession)."""

from __future__ import annotations

import pytest

from advisor.cli.main import main


def cli(args, capsys):
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as e:
        main(args)
    o = capsys.readouterr()
    return e.value.code, o.out, o.err
