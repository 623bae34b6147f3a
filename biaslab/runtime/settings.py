"""Settings dataclasses from ``params.yaml`` groups: one helper for every settings class
.

A settings class is a frozen or plain ``dataclass`` whose fields are one params group's keys
with their defaults (``biaslab.captioning.clipcap.CaptionerConfig``, ``biaslab.libra.dcg.
DCGSettings``, ...). :func:`from_params` builds one from the group's dict and rejects what
would otherwise be ignored or fail deep inside a stage: an unknown key (a typo, named in the
message), a value of the wrong type (optional, by the field's annotation), and
:func:`at_least` a count below its bound. Every message starts with the param's dotted name,
e.g. ``libra.dcg: unknown key(s) ['hiddne']; known: [...]`` or ``captioner.beam must be >= 1,
got 0``, which ``biaslab.runtime.validate`` reports as ``params.yaml: <param>: <problem>``.

Torch-free and dependency-free, so ``biaslab.runtime.validate`` may build every group's settings at
stage start.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

#: annotation words -> accepted types (``from __future__ import annotations`` makes every
#: annotation a string such as ``"int | None"``); other words accept anything
_TYPES: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "str": (str,),
                                       "bool": (bool,), "None": (type(None),)}


def field_names(cls: type) -> set[str]:
    """Names of the fields of dataclass ``cls``."""
    return {f.name for f in dataclasses.fields(cls)}


def check_type(value: Any, annotation: Any, param: str) -> None:
    """Raise ``ValueError("<param> must be <annotation>, got <value>")`` when ``value`` does
    not match ``annotation`` (a string of ``int`` / ``float`` / ``str`` / ``bool`` / ``None``
    joined by ``|``; an int passes as a float, a bool never as an int or float; a word outside
    these accepts anything)."""
    ok = tuple(t for k in str(annotation).split("|")
               for t in _TYPES.get(k.strip(), (object,)))
    if not isinstance(value, ok) or (isinstance(value, bool) and bool not in ok):
        raise ValueError(f"{param} must be {annotation}, got {value!r}")


def from_params(cls: type[T], values: Mapping | None, param: str, *, unknown: str = "raise",
                check_types: bool = False, overrides: Mapping | None = None) -> T:
    """Dataclass ``cls`` from a params dict.

    Args:
        cls: the settings dataclass; fields missing from ``values`` keep their defaults.
        values: the group's mapping (None = all defaults).
        param: the group's dotted name, the start of every message (``"libra.dcg"``).
        unknown: ``"raise"`` (a key that is not a field raises) or ``"ignore"`` (dropped: for a
            group that also holds other components' keys, e.g. ``captioner.datasets``).
        check_types: check each given value against its field's annotation
            (:func:`check_type`).
        overrides: applied after ``values``; None values and names that are not fields are
            dropped (keyword arguments of the callers, e.g. a seed).

    Returns:
        an instance of ``cls``.

    Raises:
        ValueError: ``"<param>: unknown key(s) [...]; known: [...]"`` or
            ``"<param>.<key> must be <type>, got <value>"``.
    """
    if unknown not in ("raise", "ignore"):
        raise ValueError(f"unknown must be 'raise' or 'ignore', got {unknown!r}")
    if values is not None and not isinstance(values, Mapping):
        raise ValueError(f"{param} must be a mapping of settings, got {values!r}")
    names = field_names(cls)
    d = dict(values or {})
    bad = sorted(set(d) - names)
    if bad and unknown == "raise":
        raise ValueError(f"{param}: unknown key(s) {bad}; known: {sorted(names)}")
    d = {k: v for k, v in d.items() if k in names}
    if check_types:
        for f in dataclasses.fields(cls):
            if f.name in d:
                check_type(d[f.name], f.type, f"{param}.{f.name}")
    d.update({k: v for k, v in (overrides or {}).items() if v is not None and k in names})
    return cls(**d)


def block_from_params(cls: type[T], group: Mapping | None, block: str, shared: Iterable[str],
                      param: str, overrides: Mapping | None = None) -> T:
    """Dataclass ``cls`` from a group whose component has its own block: the ``shared`` keys
    from ``group`` itself, every other field from ``group[block]`` (e.g. ``captioner.
    transformer``), then ``overrides`` (as in :func:`from_params`).

    Raises:
        ValueError: ``"<param>.<block>: unknown key(s) [...]"`` for a key of the block that is
            not a field or is a shared key (those belong to the group).
    """
    group = dict(group or {})
    sub = dict(group.get(block) or {})
    shared = tuple(shared)
    bad = sorted(set(sub) - (field_names(cls) - set(shared)))
    if bad:
        raise ValueError(f"{param}.{block}: unknown key(s) {bad}")
    d = {k: group[k] for k in shared if k in group}
    d.update(sub)
    return from_params(cls, d, f"{param}.{block}", overrides=overrides)


def at_least(obj: Any, keys: Iterable[str], bound: float, param: str) -> None:
    """Raise ``ValueError("<param>.<key> must be >= <bound>, got <value>")`` for the first of
    ``keys`` whose attribute of ``obj`` is below ``bound`` (a count, a size, a beam width)."""
    for k in keys:
        v = getattr(obj, k)
        if v < bound:
            raise ValueError(f"{param}.{k} must be >= {bound}, got {v!r}")
