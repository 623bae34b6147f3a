"""The settings of feature sensitivity (stage ``sensitivity``): the perturbation names and the
``sensitivity`` params with their defaults and rules, standard library only, so that the
params check every stage runs at start (``biaslab.runtime.validate``) applies the stage's own
rules without importing the stage's code (as ``biaslab.libra.settings`` does for LIBRA's).
The perturbations themselves: :mod:`biaslab.analysis.perturb`.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

#: the perturbation kinds (:mod:`biaslab.analysis.perturb`)
KINDS = ("objects", "blur", "swap")


def perturbation_name(kind: str, level: float | None = None) -> str:
    """``objects@0.1``, ``blur@2``, ``swap``: the stable name of one perturbation.

    Raises:
        ValueError: an unknown kind, or a level missing / given where it does not apply.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown perturbation kind {kind!r}; known: {KINDS}")
    if kind == "swap":
        if level is not None:
            raise ValueError("swap takes no level")
        return "swap"
    if level is None:
        raise ValueError(f"{kind} needs a level")
    return f"{kind}@{float(level):g}"


def parse_name(name: str) -> tuple[str, float | None]:
    """Inverse of :func:`perturbation_name`: ``"objects@0.25"`` -> ``("objects", 0.25)``.

    Raises:
        ValueError: not a perturbation name (unknown kind, a level that is not a number, or
            out of range: objects in (0, 1], blur > 0).
    """
    kind, _, lvl = str(name).partition("@")
    if kind not in KINDS:
        raise ValueError(f"{name!r}: unknown perturbation kind {kind!r}; known: {KINDS}")
    if kind == "swap":
        if lvl:
            raise ValueError(f"{name!r}: swap takes no level")
        return kind, None
    try:
        level = float(lvl)
    except ValueError:
        raise ValueError(f"{name!r}: the level after '@' must be a number") from None
    if kind == "objects" and not 0 < level <= 1:
        raise ValueError(f"{name!r}: an object fraction must lie in (0, 1]")
    if kind == "blur" and not (level > 0 and math.isfinite(level)):
        raise ValueError(f"{name!r}: a blur strength must be > 0 (% of the long side)")
    return kind, level


#: the captioning metrics whose sensitivity stage sensitivity_captioner measures
CAPTION_METRICS = ("Ratio", "Error", "BiasAmp", "LIC")


@dataclass(frozen=True)
class SensitivitySettings:
    """Params group ``sensitivity`` (stages ``sensitivity`` and ``sensitivity_captioner``):
    its defaults live here and its rules run on construction, torch-free, so every stage's
    params check (``biaslab.runtime.validate``) applies the same ones.

    Attributes:
        perturbations: perturbation names (:func:`perturbation_name`), non-empty.
        max_images: test images perturbed (None: all; else >= 10); seed (>= 0): their draw
            and the objects hidden.
        fill: ``"mean"`` or a grey level 0-255 for hidden objects.
        n_boot: bootstrap resamples of each CI (>= 100); leakage_rounds: Leakage attacker
            rounds (>= 1).
        workers: processes for the model jobs (>= 1).
        captioner_perturbations: the captioners' subset of ``perturbations`` (their images
            are stage sensitivity's); captioner_metrics: theirs of :data:`CAPTION_METRICS`,
            non-empty while captioner_perturbations is not.

    Raises:
        ValueError: a bad perturbation name (:func:`parse_name`) or a value out of its
            range, the key named.
    """
    perturbations: tuple[str, ...] = ("objects@0.1", "objects@0.25", "objects@0.5", "blur@1",
                                      "blur@2", "blur@4", "swap")
    max_images: int | None = None
    fill: Any = "mean"
    seed: int = 0
    n_boot: int = 1000
    leakage_rounds: int = 1
    workers: int = 1
    captioner_perturbations: tuple[str, ...] = ("objects@0.1", "blur@1", "swap")
    captioner_metrics: tuple[str, ...] = ("Ratio", "Error", "BiasAmp")

    def __post_init__(self):
        names = self.perturbations
        if isinstance(names, (str, bytes)) or not isinstance(names, Sequence) or not names:
            raise ValueError(f"perturbations must be a non-empty list, got {names!r}")
        for n in names:
            parse_name(n)
        for key, allowed, what in (("captioner_perturbations", names,
                                    "sensitivity.perturbations"),
                                   ("captioner_metrics", CAPTION_METRICS, "known")):
            v = getattr(self, key)
            if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
                raise ValueError(f"{key} must be a list, got {v!r}")
            bad = [x for x in v if x not in allowed]
            if bad or len(set(v)) != len(v):
                raise ValueError(f"{key}: {bad or 'a repeated name'} not allowed: each must be "
                                 f"one of {what} ({list(allowed)}), once")
        if self.captioner_perturbations and not self.captioner_metrics:
            raise ValueError("captioner_metrics is empty while captioner_perturbations is not")
        for key, low, null in (("max_images", 10, True), ("seed", 0, False),
                               ("n_boot", 100, False), ("leakage_rounds", 1, False),
                               ("workers", 1, False)):
            v = getattr(self, key)
            if null and v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"{key} must be an integer >= {low}"
                                 f"{' or null' if null else ''}, got {v!r}")
        f = self.fill
        if f != "mean" and (isinstance(f, bool) or not isinstance(f, int) or not 0 <= f <= 255):
            raise ValueError(f"fill must be 'mean' or a grey level 0-255, got {f!r}")
        for key in ("perturbations", "captioner_perturbations", "captioner_metrics"):
            object.__setattr__(self, key, tuple(getattr(self, key)))

    @classmethod
    def from_params(cls, params: Mapping) -> "SensitivitySettings":
        """From the composed params' group ``sensitivity`` (absent keys: the defaults).

        Raises:
            ValueError: an unknown key, or what construction raises.
        """
        given = dict(params.get("sensitivity") or {})
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise ValueError(f"unknown key {unknown[0]!r} (known: {sorted(known)})")
        return cls(**given)
