"""The run's protected attribute (param ``attribute``): each image's group from the
attribute's source, the test images per group with the smallest difference that size can
detect, and the captioners' LIC (and Error per group) for that attribute.

Attributes (:data:`biaslab.metrics.files.ATTRIBUTES`):

* ``gender`` (default): female / male from the one gender source of ``eval_captioner``
  (``eval_captioner.gender_source``; :func:`biaslab.captioning.evaluation.gender_labels`);
* ``skin``: dark / light from the perceived skin-tone labels (``bb_skin`` of
  ``perceived_gender_skin.csv``, Zhao et al. 2021; the synthetic generator writes the
  person's drawn tone there). ``Unsure``, ``Both`` and empty labels have no group;
* ``gender_skin``: the four groups ``<gender>_<skin>`` of images that have both labels
  (paper 000 sec. 7's intersectional extension).

Metrics per attribute follow :func:`biaslab.metrics.evaluate.evaluate_captions`: LIC for every
attribute (thesis sec. 2.5.3 for skin tone: captions NOT masked; gender words masked for
gender and gender x skin), Burns et al.'s Error per group with the worst-group gap for
``gender_skin``. The gender metrics themselves stay in ``metrics/captioning.json`` (stage
``eval_captioner``), so for ``gender`` this module reports the group sizes only.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from biaslab.runtime.io import InputError

PERCEIVED = "data/prepared/perceived_gender.parquet"


def attribute_groups(attribute: str) -> tuple[str, ...]:
    """The groups of ``attribute`` (sorted names), e.g. ``("dark", "light")`` for skin.

    Raises:
        ValueError: an attribute not in :data:`biaslab.metrics.files.ATTRIBUTES`."""
    from biaslab.metrics.files import ATTRIBUTES
    if attribute not in ATTRIBUTES:
        raise ValueError(f"unknown attribute {attribute!r}; known: {list(ATTRIBUTES)}")
    return tuple(ATTRIBUTES[attribute][1])


def skin_labels(perceived: pd.DataFrame | None, where: str = PERCEIVED) -> dict[int, str]:
    """``{image_id: "dark"/"light"}`` from the prepared perceived table's ``skin`` column
    (``Light`` / ``Dark``, any case, spaces stripped: the rule of
    :func:`biaslab.metrics.files.read_group_labels` for a CSV); other values have no group.

    Raises:
        InputError: no table, no ``skin`` column, or not one Light/Dark label (``where``
            names the file)."""
    if perceived is None or "skin" not in getattr(perceived, "columns", ()):
        raise InputError(where, "has no perceived skin-tone column (bb_skin): attribute skin "
                                "needs perceived_gender_skin.csv with bb_skin Light/Dark")
    tones = attribute_groups("skin")
    out = {}
    for i, s in zip(perceived["image_id"], perceived["skin"]):
        v = s.strip().lower() if isinstance(s, str) else None
        if v in tones:
            out[int(i)] = v
    if not out:
        raise InputError(where, "no image has a Light or Dark skin-tone label (bb_skin): "
                                "attribute skin has no groups on this data")
    return out


def group_labels(attribute: str, genders: Mapping[int, str],
                 perceived: pd.DataFrame | None) -> dict[int, str]:
    """Each image's group of ``attribute``.

    Args:
        attribute: ``gender``, ``skin`` or ``gender_skin``.
        genders: ``{image_id: "female"/"male"}`` (the evaluation's gender labels).
        perceived: ``data/prepared/perceived_gender.parquet`` (columns ``image_id``, ``skin``)
            or None.

    Returns:
        ``{image_id: group}`` over the images that have every label the attribute needs.

    Raises:
        ValueError: unknown attribute. InputError: no skin labels (skin, gender_skin).
    """
    attribute_groups(attribute)
    if attribute == "gender":
        return {int(i): str(g) for i, g in genders.items() if g in ("female", "male")}
    skin = skin_labels(perceived)
    if attribute == "skin":
        return skin
    return {int(i): f"{g}_{skin[int(i)]}" for i, g in genders.items()
            if g in ("female", "male") and int(i) in skin}


def min_detectable_difference(n1: int, n2: int, alpha: float = 0.05, power: float = 0.8,
                              p: float = 0.5) -> float | None:
    """Smallest difference between two groups' rates of a per-image 0/1 outcome (e.g. Error's
    "caption names the other gender", an attacker's correct call) that a two-sided
    two-proportion z test at level ``alpha`` detects with probability ``power``, in
    percentage points: ``(z_{1-alpha/2} + z_power) * sqrt(p (1 - p) (1/n1 + 1/n2)) * 100``
    (the normal-approximation power formula, e.g. Chow, Shao & Wang, *Sample Size
    Calculations in Clinical Research*, sec. 4.2), at the worst case ``p = 0.5``.

    Args:
        n1, n2: images per group (ints); fewer than 2 in either -> None.
        alpha, power: in (0, 1).
        p: the common rate under which the variance is taken, in (0, 1).

    Returns:
        float in percentage points, or None.

    Raises:
        ValueError: alpha, power or p outside (0, 1).
    """
    for name, v in (("alpha", alpha), ("power", power), ("p", p)):
        if not 0.0 < float(v) < 1.0:
            raise ValueError(f"{name} must be in (0, 1), got {v!r}")
    if int(n1) < 2 or int(n2) < 2:
        return None
    from scipy.stats import norm
    z = float(norm.ppf(1.0 - alpha / 2.0) + norm.ppf(power))
    return 100.0 * z * math.sqrt(p * (1.0 - p) * (1.0 / int(n1) + 1.0 / int(n2)))


def group_sizes(groups: Mapping[int, str], attribute: str,
                ids: Sequence[int] | None = None) -> dict[str, Any]:
    """Images per group (of ``ids`` when given) and the smallest detectable difference
    between the two smallest groups (:func:`min_detectable_difference`).

    Returns:
        ``{"n": int, "per_group": {group: int} (every group of the attribute, 0 included),
        "smallest_pair": [g1, g2], "min_detectable_difference_pp": float | None, "alpha":
        0.05, "power": 0.8}``."""
    keep = groups if ids is None else {i: groups[i] for i in ids if i in groups}
    per = {g: 0 for g in attribute_groups(attribute)}
    for g in keep.values():
        per[g] = per.get(g, 0) + 1
    small = sorted(per, key=lambda g: (per[g], g))[:2]
    return {"n": int(sum(per.values())), "per_group": per, "smallest_pair": small,
            "min_detectable_difference_pp": min_detectable_difference(per[small[0]],
                                                                      per[small[1]]),
            "alpha": 0.05, "power": 0.8}


#: the per-seed numbers kept for every attribute, and for gender_skin the Error ones
LIC_KEYS = ("LIC_M", "LIC_D", "LIC")
ERROR_KEYS = ("Error_pooled", "Error_worst_group_gap")


def flat_metrics(det: Mapping[str, Any], attribute: str) -> dict[str, float | None]:
    """One results set's numbers from :func:`evaluate_captions`' dict: ``LIC_M``, ``LIC_D``,
    ``LIC`` (None when skipped) and, for ``gender_skin``, ``Error_pooled``,
    ``Error_worst_group_gap`` and ``Error_<group>`` for every group."""
    def num(v):
        return float(v) if isinstance(v, (int, float)) and math.isfinite(float(v)) else None
    out = {k: num(det.get(k)) for k in LIC_KEYS}
    if attribute == "gender_skin":
        e = det.get("Error") or {}
        out["Error_pooled"] = num(e.get("pooled"))
        out["Error_worst_group_gap"] = num((e.get("worst_group_gap") or {}).get("gap"))
        for g in attribute_groups(attribute):
            out[f"Error_{g}"] = num(((e.get("per_group") or {}).get(g) or {}).get("Error"))
    return out


def metric_keys(attribute: str) -> tuple[str, ...]:
    """The keys :func:`flat_metrics` returns for ``attribute``."""
    if attribute == "gender_skin":
        return (*LIC_KEYS, *ERROR_KEYS,
                *(f"Error_{g}" for g in attribute_groups(attribute)))
    return LIC_KEYS
