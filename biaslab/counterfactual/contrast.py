"""GenSynth contrast sets (paper 001 sec. 4): every source image edited into one version per
group, the background fixed (only the person's mask is edited), filtered by the KNN filter, and
a source image kept only when both of its versions pass (sec. 4.2: "we keep only images for
which both the man and woman edits are accepted").

The edits are this repository's counterfactual generator (``biaslab.counterfactual.generate``,
the backend of ``generate.backend``: render, copy_paste, sd_inpaint) applied to the persons of
the test split, so the contrast set is balanced by construction: each kept source image appears
exactly once per group.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from biaslab.data.gender import FEMALE, MALE

GROUPS = (FEMALE, MALE)


@dataclass(frozen=True)
class ContrastSettings:
    """Params group ``contrast`` (stage ``contrast_set``): its defaults live here, its ranges
    are checked at every stage's start (:func:`biaslab.runtime.validate.check_contrast`).

    Attributes:
        splits: the splits whose images are edited (paper 001 sec. 4: the test split).
        m: versions generated per (image, group) before the KNN filter.
        generate: params of group ``generate`` that override the training counterfactuals'
            for the contrast set (the paper tier: InstructPix2Pix, paper 001 sec. 4.1).
        workers: forked processes that encode the versions for the KNN filter.
    """
    splits: tuple[str, ...] = ("test",)
    m: int = 1
    generate: Mapping[str, Any] = field(default_factory=dict)
    workers: int = 2

    def __post_init__(self):
        object.__setattr__(self, "splits", tuple(self.splits))
        object.__setattr__(self, "generate", dict(self.generate or {}))

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "ContrastSettings":
        """From the composed params' group ``contrast`` (absent keys: the defaults; a null
        ``generate``: no override).

        Raises:
            ValueError: an unknown key or a value of the wrong type, naming ``contrast.<key>``.
        """
        from biaslab.runtime.settings import from_params
        return from_params(cls, params.get("contrast"), "contrast", check_types=True)


def contrast_pairs(cands: pd.DataFrame, accept: Sequence[bool]) -> pd.DataFrame:
    """The contrast set from scored candidates: per (source image, group) the first accepted
    candidate (lowest ``j``), and a source image only when both groups have one.

    Args:
        cands: candidate table of ``biaslab.counterfactual.generate.generate_candidates`` (at
            least ``image_id``, ``group``, ``j``, ``path``).
        accept: (len(cands),) bool, the KNN filter's verdict per candidate (paper 001 Eq. 2).

    Returns:
        One row per kept (image_id, group): ``image_id`` (int64, the source image),
        ``group`` ("female"/"male"), ``j``, ``path``; sorted by image_id then group.
        Every image_id appears exactly twice.

    Raises:
        ValueError: missing columns, or ``accept`` of another length.
    """
    miss = [c for c in ("image_id", "group", "j", "path") if c not in cands.columns]
    if miss:
        raise ValueError(f"candidate table lacks column(s) {miss}")
    ok = np.asarray(accept, dtype=bool)
    if len(ok) != len(cands):
        raise ValueError(f"{len(ok)} verdicts for {len(cands)} candidates")
    c = cands.reset_index(drop=True)[ok]
    c = c[c["group"].isin(GROUPS)].sort_values(["image_id", "group", "j"], kind="stable")
    first = c.drop_duplicates(["image_id", "group"], keep="first")
    both = first.groupby("image_id")["group"].transform("nunique") == len(GROUPS)
    out = first[both][["image_id", "group", "j", "path"]].reset_index(drop=True)
    out["image_id"] = out["image_id"].astype(np.int64)
    return out


def contrast_counts(cands: pd.DataFrame, accept: Sequence[bool], pairs: pd.DataFrame) -> dict:
    """What the filter kept: ``{"source_images", "candidates", "accepted": {group: n},
    "accept_fraction", "pairs", "pair_fraction"}`` (pairs = kept source images)."""
    ok = np.asarray(accept, dtype=bool)
    n_src = int(cands["image_id"].nunique())
    n_pairs = int(pairs["image_id"].nunique())
    return {"source_images": n_src, "candidates": int(len(cands)),
            "accepted": {g: int((ok & (cands["group"].to_numpy() == g)).sum()) for g in GROUPS},
            "accept_fraction": float(ok.mean()) if len(ok) else None,
            "pairs": n_pairs, "pair_fraction": n_pairs / n_src if n_src else None}
