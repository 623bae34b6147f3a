"""The settings of feature sensitivity (stage ``sensitivity``): the perturbation names and the
``sensitivity`` params with their defaults and rules, standard library only, so that the
params check every stage runs at start (``biaslab.runtime.validate``) applies the stage's own
rules without importing the stage's code (as ``biaslab.libra.settings`` does for LIBRA's).
The perturbations themselves: :mod:`biaslab.analysis.perturb`.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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


#: the stage's params (group ``sensitivity``) with their defaults: the one place they live
DEFAULTS = {"perturbations": ["objects@0.1", "objects@0.25", "objects@0.5", "blur@1",
                              "blur@2", "blur@4", "swap"],
            "max_images": None, "fill": "mean", "seed": 0, "n_boot": 1000,
            "leakage_rounds": 1, "workers": 1,
            # the captioners (stage sensitivity_captioner): a subset of the perturbations
            # above (their images are stage sensitivity's) and of CAPTION_METRICS
            "captioner_perturbations": ["objects@0.1", "blur@1", "swap"],
            "captioner_metrics": ["Ratio", "Error", "BiasAmp"]}
#: the captioning metrics whose sensitivity stage sensitivity_captioner measures
CAPTION_METRICS = ("Ratio", "Error", "BiasAmp", "LIC")


def settings(params: Mapping) -> dict:
    """The ``sensitivity`` params over :data:`DEFAULTS`, checked (torch-free: the params check
    at every stage's start, ``biaslab.runtime.validate``, applies the same rules).

    Raises:
        ValueError: an unknown key, a bad perturbation name
            (:func:`parse_name`), ``max_images`` < 10, ``fill`` not
            ``"mean"`` or a grey level 0-255, ``seed`` < 0, ``n_boot`` < 100,
            ``leakage_rounds`` < 1, ``workers`` < 1, a ``captioner_perturbations`` name
            not in ``perturbations``, a ``captioner_metrics`` name not in
            :data:`CAPTION_METRICS`.
    """
    given = dict(params.get("sensitivity") or {})
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} (known: {sorted(DEFAULTS)})")
    s = {**DEFAULTS, **given}
    names = s["perturbations"]
    if isinstance(names, (str, bytes)) or not isinstance(names, Sequence) or not names:
        raise ValueError(f"perturbations must be a non-empty list, got {names!r}")
    for n in names:
        parse_name(n)
    for key, allowed, what in (("captioner_perturbations", names, "sensitivity.perturbations"),
                               ("captioner_metrics", CAPTION_METRICS, "known")):
        v = s[key]
        if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
            raise ValueError(f"{key} must be a list, got {v!r}")
        bad = [x for x in v if x not in allowed]
        if bad or len(set(v)) != len(v):
            raise ValueError(f"{key}: {bad or 'a repeated name'} not allowed: each must be one "
                             f"of {what} ({list(allowed)}), once")
    if s["captioner_perturbations"] and not s["captioner_metrics"]:
        raise ValueError("captioner_metrics is empty while captioner_perturbations is not")

    def integer(key, low, null=False):
        v = s[key]
        if null and v is None:
            return
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ValueError(f"{key} must be an integer >= {low}"
                             f"{' or null' if null else ''}, got {v!r}")
    integer("max_images", 10, null=True)
    integer("seed", 0)
    integer("n_boot", 100)
    integer("leakage_rounds", 1)
    integer("workers", 1)
    f = s["fill"]
    if f != "mean" and (isinstance(f, bool) or not isinstance(f, int) or not 0 <= f <= 255):
        raise ValueError(f"fill must be 'mean' or a grey level 0-255, got {f!r}")
    return s


@dataclass(frozen=True)
class SensitivitySettings:
    """Params group ``sensitivity``, checked (:func:`settings`; its defaults are
    :data:`DEFAULTS`): what stages ``sensitivity`` and ``sensitivity_captioner`` read of it.

    Attributes:
        perturbations: perturbation names (:func:`perturbation_name`).
        max_images: test images perturbed (None: all); seed: their draw and the objects hidden.
        fill: ``"mean"`` or a grey level 0-255 for hidden objects.
        n_boot: bootstrap resamples of each CI; leakage_rounds: Leakage attacker rounds.
        workers: processes for the model jobs.
        captioner_perturbations, captioner_metrics: the captioners' subset.
    """
    perturbations: tuple[str, ...]
    max_images: int | None
    fill: Any
    seed: int
    n_boot: int
    leakage_rounds: int
    workers: int
    captioner_perturbations: tuple[str, ...]
    captioner_metrics: tuple[str, ...]

    @classmethod
    def from_params(cls, params: Mapping) -> "SensitivitySettings":
        """From the composed params (group ``sensitivity`` over :data:`DEFAULTS`).

        Raises:
            ValueError: what :func:`settings` raises.
        """
        s = settings(params)
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in s.items()})
