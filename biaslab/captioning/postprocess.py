"""Caption post-processors: a method that rewrites a trained captioner's
captions, as LIBRA's debiasing caption generator does (paper 003 sec. 4), is an entry of
:data:`biaslab.registry.POSTPROCESSORS`. Stage ``eval_captioner`` applies each one named in
``eval_captioner.postprocessors`` to every seed of its ``base`` captioner (Original) and
evaluates the result as row ``<base>+<name>`` of Table 2, with the same metrics, seeds and
verdicts as the captioners' own rows.

A post-processor is ``apply(captions, ctx) -> captions``: ``captions`` is a list of str (one per
test image, in ``ctx.image_ids`` order), the result a list of str of the same length and order.
It raises :class:`biaslab.registry.Skipped` (with the reason) when an input it needs is
missing; the row is then left out and the reason written to ``data/captions/eval.json``.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from biaslab import registry


@dataclass(frozen=True)
class CaptionContext(registry.SettingsLookup):
    """What a post-processor may read.

    Attributes:
        table: the test images, columns ``image_id`` (int) and ``path`` (str), in caption
            order.
        seed: the captioner seed whose captions these are (a stochastic post-processor seeds
            from it, so each seed's row is reproducible).
        feature_cache: the frozen backbone's feature cache directory.
        num_threads: torch threads for its models (None: torch's default).
        train_captions: the human captions of the training split (a learned post-processor
            trains on them; the captioners were trained on the same images).
        words: the gender word list (``label.words``; :mod:`biaslab.data.gender`).
        component_settings: each post-processor's settings by name, built once by the stage
            (``registry.POSTPROCESSORS.settings_for``); read through ``ctx.settings(name)``
            (:class:`biaslab.registry.SettingsLookup`).
    """
    table: pd.DataFrame
    seed: int
    feature_cache: str
    num_threads: int | None = None
    train_captions: tuple[str, ...] = ()
    words: str = "lic"
    component_settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def image_ids(self) -> list[int]:
        """The test images' ids, in caption order."""
        return self.table["image_id"].astype(int).tolist()

    settings_kind: ClassVar[str] = "postprocessors"


def apply(name: str, captions: list[str], ctx: CaptionContext) -> list[str]:
    """Post-processor ``name`` (registry) on ``captions``. Raises
    :class:`biaslab.registry.Skipped` from it, RegistryError for an unknown name, TypeError
    when it returns anything but a list of str of the same length (naming it)."""
    out = registry.POSTPROCESSORS.load(name)(list(captions), ctx)
    if (not isinstance(out, list) or len(out) != len(captions)
            or not all(isinstance(c, str) for c in out)):
        raise TypeError(f"caption post-processor {name!r} "
                        f"({registry.POSTPROCESSORS.origin(name)}) must return a list of "
                        f"{len(captions)} str, got {type(out).__name__}"
                        f"{'' if not isinstance(out, list) else f' of {len(out)}'}")
    return out


@dataclass(frozen=True)
class LibraSettings:
    """The +LIBRA row's settings, gathered from the groups stage ``dcg_apply`` shares
    (:meth:`from_params`).

    Attributes:
        dcg: the DCG trained by stage ``dcg_train`` (``eval_captioner.dcg``).
        seed: the DCG's masking seed; the captioner seed is added (``libra.seed``).
        num_beams: DCG beams (``libra.apply.num_beams``; None: the model's default).
    """
    dcg: str = "data/libra/dcg"
    seed: int = 0
    num_beams: int | None = None

    def __post_init__(self):
        if self.num_beams is not None and int(self.num_beams) < 1:
            raise ValueError(f"libra.apply.num_beams must be >= 1, got {self.num_beams}")

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "LibraSettings":
        """From the whole params.yaml: ``eval_captioner.dcg``, ``libra.seed``,
        ``libra.apply.num_beams`` (absent: the defaults)."""
        lib = params.get("libra") or {}
        dcg = (params.get("eval_captioner") or {}).get("dcg", cls.dcg)
        return cls(dcg=str(dcg), seed=int(lib.get("seed", 0)),
                   num_beams=(lib.get("apply") or {}).get("num_beams"))


def libra(captions: list[str], ctx: CaptionContext) -> list[str]:
    """LIBRA's DCG (paper 003 sec. 4, Eq. 9) on the captions: the model trained by stage
    ``dcg_train`` (:class:`LibraSettings`), seeded ``seed + ctx.seed``. Raises Skipped when
    no DCG was trained there."""
    from biaslab.captioning.evaluation import apply_libra
    s = ctx.settings("LIBRA")
    if not Path(s.dcg, "dcg.json").is_file():
        raise registry.Skipped(f"no DCG at {s.dcg}")
    return apply_libra(s.dcg, captions, ctx.table, ctx.feature_cache,
                       seed=int(s.seed) + int(ctx.seed), num_threads=ctx.num_threads,
                       num_beams=s.num_beams)


__all__ = ["CaptionContext", "LibraSettings", "apply", "libra"]
