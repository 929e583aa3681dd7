"""The ``>>>`` examples in the product's docstrings run and hold: every module that carries one is
found and run with ``doctest``; there must be at least ``MIN_MODULES`` of them."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MIN_MODULES = 10


def modules_with_examples() -> list[str]:
    out = []
    for top in ("advisor", "estimators", "workloads", "reports"):
        for p in sorted((ROOT / top).rglob("*.py")):
            if ">>> " in p.read_text():
                out.append(".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"))
    return out


MODULES = modules_with_examples()


def test_enough_modules_show_runnable_examples():
    assert len(MODULES) >= MIN_MODULES, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_examples_hold(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, result
