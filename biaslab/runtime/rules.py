"""The rules a ``params.yaml`` value is checked by: :class:`ParamError` and one function per
kind of value (an integer bound, a number in a range, a probability, a list of distinct names,
a list of registered names, seeds, a closed set of keys). Each takes the group's dict ``p``, the
group's dotted name and the key, does nothing when the key is absent, and raises
``ParamError("<group>.<key>", problem)`` otherwise. :mod:`biaslab.runtime.validate` composes
them into one check per group.
"""
from __future__ import annotations

import ast
import importlib.util
import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from numbers import Integral, Real
from pathlib import Path
from typing import Any

from biaslab import registry


class ParamError(ValueError):
    """A bad parameter value: ``param`` is its dotted name, ``problem`` says what is wrong."""

    def __init__(self, param: str, problem: str):
        self.param = param
        self.problem = problem
        super().__init__(f"{param}: {problem}")


def settings_error(e: Exception, group: str) -> ParamError:
    """The :class:`ParamError` of a settings class's error ``e`` (``biaslab.runtime.settings.
    from_params`` or a ``__post_init__``), whose message starts with the dotted param name:
    that name when it lies inside ``group``, else ``group`` with the whole message."""
    head, _, rest = str(e).partition(" ")
    name = head.rstrip(":")
    if name.startswith(group) and rest:
        return ParamError(name, rest)
    return ParamError(group, str(e))


def is_int(v: Any) -> bool:
    """True for an integer that is not a bool (YAML ``true`` is not a count)."""
    return isinstance(v, Integral) and not isinstance(v, bool)


def is_real(v: Any) -> bool:
    """True for a real number (int or float) that is not a bool."""
    return isinstance(v, Real) and not isinstance(v, bool)


def int_at_least(p: Mapping, group: str, key: str, low: int, allow_null: bool) -> None:
    """``p[key]`` an integer >= ``low`` (or null, meaning all, with ``allow_null``)."""
    if key not in p:
        return
    v = p[key]
    if v is None and allow_null:
        return
    if not is_int(v) or v < low:
        null = "null (all) or " if allow_null else ""
        raise ParamError(f"{group}.{key}", f"must be {null}an integer >= {low}, got {v!r}")

def probability(p: Mapping, group: str, key: str) -> None:
    """``p[key]`` a number in [0, 1]."""
    if key in p:
        v = p[key]
        if not is_real(v) or not 0.0 <= float(v) <= 1.0:
            raise ParamError(f"{group}.{key}", f"must be a number in [0, 1], got {v!r}")


def registered_names(p: Mapping, group: str, key: str, known: registry.Registry) -> None:
    """``p[key]`` a list of distinct names registered in ``known`` (built-ins and installed
    plug-ins: biaslab.registry, which imports no component)."""
    if key not in p or p[key] is None:
        return
    v = p[key]
    if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
        raise ParamError(f"{group}.{key}", f"must be a list of names, got {v!r}")
    bad = [x for x in v if x not in known]
    if bad:
        raise ParamError(f"{group}.{key}", f"unknown name(s) {bad}; known: {known.names()}")
    if len(set(v)) != len(v):
        raise ParamError(f"{group}.{key}", f"names repeat: {list(v)} (each would be trained "
                                           f"and reported twice)")


def seed_list(p: Mapping, group: str, key: str, at_least: int) -> None:
    """``p[key]`` a list of at least ``at_least`` distinct integers >= 0."""
    if key not in p:
        return
    v = p[key]
    if (isinstance(v, (str, bytes)) or not isinstance(v, Sequence)
            or not all(is_int(x) and x >= 0 for x in v) or len(set(v)) != len(v)
            or len(v) < at_least):
        raise ParamError(f"{group}.{key}", f"must be a list of at least {at_least} distinct "
                                           f"integers >= 0, got {v!r}")


def known_keys(p: Mapping, group: str, known: Sequence[str]) -> None:
    """Reject a key of ``group`` that no stage reads (a typo would be ignored silently)."""
    unknown = sorted(set(p) - set(known))
    if unknown:
        raise ParamError(f"{group}.{unknown[0]}", f"unknown key (known: {sorted(known)})")


def positive_ints(p: Mapping, group: str, key: str) -> None:
    """``p[key]`` a non-empty list of integers >= 1."""
    if key not in p:
        return
    v = p[key]
    if (isinstance(v, (str, bytes)) or not isinstance(v, Sequence) or not v
            or not all(is_int(x) and x >= 1 for x in v)):
        raise ParamError(f"{group}.{key}", f"must be a non-empty list of positive integers, "
                                           f"got {v!r}")


def real_in(p: Mapping, group: str, key: str, low: float, high: float = math.inf, *,
          open_low: bool = False, allow_null: bool = False) -> None:
    """``p[key]`` a finite real in [low, high] (``(low, high]`` with ``open_low``)."""
    if key not in p or (p[key] is None and allow_null):
        return
    v = p[key]
    ok = is_real(v) and math.isfinite(float(v)) and float(v) <= high and (
        float(v) > low if open_low else float(v) >= low)
    if not ok:
        lo = "(" if open_low else "["
        hi = "]" if math.isfinite(high) else ")"
        null = "null or " if allow_null else ""
        raise ParamError(f"{group}.{key}", f"must be {null}a number in {lo}{low:g}, {high:g}{hi}, "
                                           f"got {v!r}")


def name_list(p: Mapping, group: str, key: str) -> None:
    """``p[key]`` a non-empty list of distinct, non-empty strings."""
    if key not in p:
        return
    v = p[key]
    if (isinstance(v, (str, bytes)) or not isinstance(v, Sequence) or not v
            or not all(isinstance(x, str) and x for x in v) or len(set(v)) != len(v)):
        raise ParamError(f"{group}.{key}", f"must be a non-empty list of distinct names, "
                                           f"got {v!r}")


@lru_cache(maxsize=None)
def literal(module: str, name: str) -> Any:
    """The value of ``module``'s top-level literal ``name`` (a tuple or dict of constants), read
    from its source without importing it: the modules that own the model settings import torch,
    and these checks run at every stage's start. ``tests/test_validate.py`` checks each value
    read this way against the imported module.

    Raises:
        LookupError: ``module`` has no top-level ``name = <literal>``."""
    spec = importlib.util.find_spec(module)
    for node in ast.parse(Path(spec.origin).read_bytes()).body:
        if isinstance(node, ast.Assign) and any(isinstance(x, ast.Name) and x.id == name
                                                for x in node.targets):
            return ast.literal_eval(node.value)
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and \
                node.target.id == name and node.value is not None:
            return ast.literal_eval(node.value)
    raise LookupError(f"{module}.{name}: no top-level literal")


def one_of(p: Mapping, group: str, key: str, known: Sequence[str]) -> None:
    """``p[key]`` one of ``known``."""
    if key in p and p[key] not in known:
        raise ParamError(f"{group}.{key}", f"unknown {p[key]!r}; known: {list(known)}")


def threads_count(p: Mapping, group: str, key: str = "threads") -> None:
    """``p[key]`` a thread count: null (the machine's cores) or an integer >= 1."""
    int_at_least(p, group, key, 1, allow_null=True)


