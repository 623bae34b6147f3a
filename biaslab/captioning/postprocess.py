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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from biaslab import registry


@dataclass(frozen=True)
class CaptionContext:
    """What a post-processor may read.

    Attributes:
        table: the test images, columns ``image_id`` (int) and ``path`` (str), in caption
            order.
        params: the whole params.yaml (its own group included).
        seed: the captioner seed whose captions these are (a stochastic post-processor seeds
            from it, so each seed's row is reproducible).
        feature_cache: the frozen backbone's feature cache directory.
        num_threads: torch threads for its models (None: torch's default).
        train_captions: the human captions of the training split (a learned post-processor
            trains on them; the captioners were trained on the same images).
    """
    table: pd.DataFrame
    params: Mapping[str, Any]
    seed: int
    feature_cache: str
    num_threads: int | None = None
    train_captions: tuple[str, ...] = ()

    @property
    def image_ids(self) -> list[int]:
        """The test images' ids, in caption order."""
        return self.table["image_id"].astype(int).tolist()

    def settings(self, name: str) -> Any:
        """The settings of post-processor ``name`` (its entry's ``settings`` dataclass filled
        from its ``params`` group, ``eval_captioner.postprocessor_params.<name>``;
        :func:`biaslab.registry.settings_of`), None when it declares none."""
        return registry.settings_of(registry.POSTPROCESSORS.get(name), self.params)


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


def libra(captions: list[str], ctx: CaptionContext) -> list[str]:
    """LIBRA's DCG (paper 003 sec. 4, Eq. 9) on the captions: the model trained by stage
    ``dcg_train`` at ``eval_captioner.dcg`` (default ``data/libra/dcg``), seeded
    ``libra.seed + ctx.seed``, ``libra.apply.num_beams`` beams. Raises Skipped when no DCG
    was trained there."""
    from biaslab.captioning.evaluation import apply_libra
    dcg = str((ctx.params.get("eval_captioner") or {}).get("dcg", "data/libra/dcg"))
    if not Path(dcg, "dcg.json").is_file():
        raise registry.Skipped(f"no DCG at {dcg}")
    lib = ctx.params.get("libra") or {}
    return apply_libra(dcg, captions, ctx.table, ctx.feature_cache,
                       seed=int(lib.get("seed", 0)) + int(ctx.seed),
                       num_threads=ctx.num_threads,
                       num_beams=(lib.get("apply") or {}).get("num_beams"))


__all__ = ["CaptionContext", "apply", "libra"]
