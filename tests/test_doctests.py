"""Every docstring example (``>>>``) in the library runs and gives what it shows."""
import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(
    ".".join(p.relative_to(ROOT).with_suffix("").parts)
    for p in (ROOT / "biaslab").rglob("*.py") if ">>> " in p.read_text(encoding="utf-8"))


def test_some_module_has_examples():
    assert "biaslab.analysis.equivalence" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    res = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0, res
