"""The whole dataset audit in one call (paper 004, REVISE): :func:`run_audit` runs metrics 1-5
of :mod:`biaslab.analysis.audit` on the schema.md tables, :func:`audit_metrics` makes the small
JSON summary of ``metrics/audit.json``.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd

from biaslab.data.gender import FEMALE, MALE
from biaslab.analysis.audit import (distance_table, images_per_gender, object_gender_table,
                                    person_object_distances, person_prominence,
                                    prominence_summary, top_skewed, word_gender_table)

# orchestration, metrics, plots
# --------------------------------------------------------------------------------------------

@dataclass
class AuditResult:
    """Everything :func:`run_audit` computes (tables are pandas DataFrames)."""
    images: dict[str, Any]
    prominence: pd.DataFrame
    prominence_summary: dict[str, Any]
    objects: pd.DataFrame
    distances: pd.DataFrame
    distance_table: pd.DataFrame
    words: pd.DataFrame
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AuditSettings:
    """Params group ``audit`` (stage ``audit``; REVISE, paper 004): the one place its defaults
    live (:func:`run_audit`'s keywords default to them).

    Attributes:
        min_count, alpha, correction: the tests' minimum count, level and multiple-testing
            correction (objects, words, distances).
        top_k: rows of each figure and of the metrics' top lists.
        test: objects' and words' test (``fisher`` / ``chi2``).
        area, center_norm, min_person_px: :func:`person_prominence`'s.
        distance_person: the ``person`` of :func:`person_object_distances`.
        appearance: the appearance test's settings
            (:func:`biaslab.analysis.audit_attribute.attribute_audit`).
    """
    min_count: int = 5
    alpha: float = 0.05
    top_k: int = 10
    correction: str = "bh"
    test: str = "fisher"
    area: str = "largest"
    center_norm: str = "unit"
    distance_person: str = "largest"
    min_person_px: float = 0.0
    appearance: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "appearance", dict(self.appearance or {}))

    def criteria(self) -> dict[str, Any]:
        """:func:`run_audit`'s keywords (every field but ``top_k`` and ``appearance``)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("top_k", "appearance")}


_A = AuditSettings


def run_audit(images: pd.DataFrame, captions: pd.DataFrame, persons: pd.DataFrame,
              objects: pd.DataFrame, labels: pd.DataFrame, *,
              min_count: int = _A.min_count, alpha: float = _A.alpha,
              correction: str = _A.correction, test: str = _A.test, area: str = _A.area,
              center_norm: str = _A.center_norm, distance_person: str = _A.distance_person,
              min_person_px: float = _A.min_person_px) -> AuditResult:
    """Run metrics 1-5 (see the module docstring) on the schema.md tables; the keywords'
    defaults are :class:`AuditSettings`'.

    ``min_count``, ``alpha``, ``correction`` apply to objects, words and distances; ``test`` to
    objects and words; ``area``, ``center_norm``, ``min_person_px`` to
    :func:`person_prominence`; ``distance_person`` is the ``person`` of
    :func:`person_object_distances`. Errors: those of the individual functions.
    """
    cfg = dict(min_count=min_count, alpha=alpha, correction=correction, test=test, area=area,
               center_norm=center_norm, distance_person=distance_person,
               min_person_px=min_person_px)
    prom = person_prominence(images, persons, labels, area=area, center_norm=center_norm,
                             min_person_px=min_person_px)
    dists = person_object_distances(images, persons, objects, labels, person=distance_person)
    return AuditResult(
        images=images_per_gender(labels),
        prominence=prom,
        prominence_summary=prominence_summary(prom, labels),
        objects=object_gender_table(objects, labels, min_count=min_count, alpha=alpha,
                                    correction=correction, test=test),
        distances=dists,
        distance_table=distance_table(dists, min_count=min_count, alpha=alpha,
                                      correction=correction),
        words=word_gender_table(captions, labels, min_count=min_count, alpha=alpha,
                                correction=correction, test=test),
        config=cfg,
    )


def _num(x: Any) -> Any:
    """JSON-safe number: NaN/inf -> None, floats to 6 significant digits, numpy -> python."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return float(f"{x:.6g}") if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _num(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_num(v) for v in x]
    return x


def _records(df: pd.DataFrame, cols: Sequence[str]) -> list[dict[str, Any]]:
    return [{c: _num(r[c]) for c in cols} for r in df[list(cols)].to_dict("records")]


def audit_metrics(result: AuditResult, top_k: int = 10) -> dict[str, Any]:
    """Small JSON-ready summary of an :class:`AuditResult` (NaN/inf -> null, floats rounded to
    6 significant digits).

    Keys: ``images`` (see :func:`images_per_gender`); ``prominence`` (flat:
    ``{area_frac,center_dist}_{female,male}_{n,mean,std}``, ``*_cohens_d``, ``*_p_welch``,
    ``tiny_person_*``, ``gendered_without_person``); ``objects`` and ``words``
    (``n_items``, ``n_tested``, ``n_significant``, ``significant`` = names of the
    significantly skewed items (objects only; for words see the CSV), ``top_female`` /
    ``top_male`` = up to ``top_k`` records ``{name, skew, majority_frac, n_female, n_male, p,
    p_adj, significant}``); ``distance`` (``n_pairs``, ``n_tested``, ``n_significant``,
    ``top`` = up to ``top_k`` records by |cohens_d|); ``config`` (the run parameters).
    """
    ps = result.prominence_summary
    prom: dict[str, Any] = {}
    for m in ("area_frac", "center_dist"):
        for k, v in ps[m].items():
            prom[f"{m}_{k}"] = v
    for k, v in ps["tiny_person"].items():
        prom[f"tiny_person_{k}"] = v
    if "gendered_without_person" in ps:
        prom["gendered_without_person"] = ps["gendered_without_person"]

    def skew_block(t: pd.DataFrame, key: str, list_significant: bool) -> dict[str, Any]:
        cols = [key, "skew", "majority_frac", "n_female", "n_male", "p", "p_adj",
                "significant"]
        block: dict[str, Any] = {
            "n_items": int(len(t)), "n_tested": int(t["tested"].sum()),
            "n_significant": int(t["significant"].sum()),
            "top_female": _records(top_skewed(t, key, top_k, FEMALE), cols),
            "top_male": _records(top_skewed(t, key, top_k, MALE), cols),
        }
        if list_significant:
            block["significant"] = sorted(map(str, t.loc[t["significant"], key]))
        return block

    dt = result.distance_table
    top_d = dt[dt["tested"]].head(top_k)
    return _num({
        "images": result.images,
        "prominence": prom,
        "objects": skew_block(result.objects, "category", True),
        "words": skew_block(result.words, "word", False),
        "distance": {
            "n_pairs": int(len(result.distances)), "n_tested": int(dt["tested"].sum()),
            "n_significant": int(dt["significant"].sum()),
            "top": _records(top_d, ["category", "mean_female", "mean_male", "cohens_d", "p",
                                    "p_adj", "significant", "n_female", "n_male"]),
        },
        "config": {**result.config, "top_k": top_k},
    })
