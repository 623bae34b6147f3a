"""Old import paths of the modules that moved into packages (issue 27 item 6).

Until stop 53 every module sat at the top of ``biaslab``; they now live in ``runtime``,
``data``, ``models``, ``analysis`` and ``counterfactual``. A plug-in or a user script written
against the old names (``from biaslab import stats``, ``import biaslab.datasets``) keeps
working: :class:`MovedFinder` answers the old name with the *same module object* as the new
one (so a monkeypatch through either name patches both) and warns once with
``DeprecationWarning`` naming the new path. The library itself uses only the new names
(``tests/test_architecture.py`` checks it).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: old module name (under ``biaslab.``) -> the package it moved into
MOVED = {
    **dict.fromkeys(("io", "paths", "parallel", "executor", "stats", "progress", "guard", "live",
                     "provenance", "lockcheck", "numerics", "runstats", "settings", "validate",
                     "plan"), "runtime"),
    **dict.fromkeys(("coco", "openimages", "synthetic", "labels", "gender", "datasets",
                     "variants", "published"), "data"),
    **dict.fromkeys(("features", "textclf", "clipscorer", "objects"), "models"),
    **dict.fromkeys(("audit", "probe", "validity", "controls", "artifact", "sweep", "spurious",
                     "backends", "figures"), "analysis"),
    **dict.fromkeys(("contrast", "filters"), "counterfactual"),
}


def new_name(old: str) -> str | None:
    """``"biaslab.stats"`` -> ``"biaslab.runtime.stats"``; None for a name that did not move."""
    head, _, rest = old.partition(".")
    if head != "biaslab" or not rest:
        return None
    mod, _, sub = rest.partition(".")
    if mod not in MOVED:
        return None
    return ".".join(filter(None, ("biaslab", MOVED[mod], mod, sub)))


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module):
        pass        # already executed under its new name


class MovedFinder(importlib.abc.MetaPathFinder):
    """Resolves an old ``biaslab.<module>`` name to its new module (module docstring)."""

    def find_spec(self, fullname, path=None, target=None):
        new = new_name(fullname)
        if new is None:
            return None
        warnings.warn(f"{fullname} moved to {new}; import it from there", DeprecationWarning,
                      stacklevel=2)
        return importlib.util.spec_from_loader(fullname, _Alias(new))


def install() -> None:
    """Put one :class:`MovedFinder` at the end of ``sys.meta_path`` (idempotent): the real
    finders answer first, so it only ever sees names that no longer exist."""
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedFinder())
