"""Image captioners of paper 000 Table 2 and their evaluation (stages ``train_captioner`` /
``eval_captioner``; ``captioner.archs`` in params.yaml picks the architectures).

One module per captioner, found by the architecture's name:

=================  ==========================================================================
``clipcap``        :mod:`biaslab.captioning.clipcap`: ClipCap (MLP prefix + causal LM) on the
                   frozen backbone's pooled feature (Mokady et al. 2021)
``transformer``    :mod:`biaslab.captioning.transformer`: encoder-decoder Transformer trained
                   from scratch on the frozen backbone's feature grid (app. B.2 "Transformer");
                   with ``captioner.transformer.encoder`` / ``decoder`` naming checkpoints
                   (models=paper: ViT + GPT-2), :mod:`biaslab.captioning.vit_gpt2` fine-tunes
                   Hugging Face's VisionEncoderDecoderModel on pixels through the same entry
``blip2``          :mod:`biaslab.captioning.blip2`: BLIP-2 (``Salesforce/blip2-opt-2.7b``,
                   ``from_pretrained``) fine-tuned on pixels (Q-Former, queries, projection;
                   app. B.2: AdamW 2e-6, batch 8); paper tier (models=paper), no offline
                   weights
=================  ==========================================================================

Shared pieces: :mod:`~biaslab.captioning.tokens` (word-level tokenizer),
:mod:`~biaslab.captioning.training` (AdamW / early-stopping loop),
:mod:`~biaslab.captioning.decoding` (beam search), :mod:`~biaslab.captioning.data`
(manifests -> samples, pooled and grid features), :mod:`~biaslab.captioning.evaluation`
(Table 2 metrics over seeds).

The registry (:data:`ARCHS`, :func:`get_arch`, a view of :data:`biaslab.registry.ARCHS`) is the
one place the stages look an architecture up: each :class:`Arch` gives its config builder, trainer, loader and feature
reader, so training and evaluation call the same path for every architecture.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from biaslab.runtime.paths import live_dir, model_dir

__all__ = ["Arch", "DEFAULT_ARCH", "get_arch", "archs_from_params", "arch_model_dir",
           "arch_live_dir", "arch_name"]

DEFAULT_ARCH = "clipcap"


@dataclass(frozen=True)
class Arch:
    """One captioner architecture.

    ``config_from_params(captioner_params, **overrides) -> config``;
    ``train(feats, captions, rows, val_feats, val_captions, val_rows, config, on_epoch,
    progress) -> (model, history)``; ``load(directory, num_threads=None) -> model`` (with
    ``generate(feats, beam, max_len, batch_size, no_repeat_ngram) -> list[str]``, ``save``,
    ``config``, ``meta``); ``features(table, cache_dir, config, **kw) -> array`` (the input
    ``generate`` / ``train`` read: pooled (n, F) or grid (n, N, C)); ``config_file``: the file
    a saved model directory always holds."""
    name: str
    module: str

    def _mod(self):
        import importlib
        return importlib.import_module(self.module)

    def config_from_params(self, p: Mapping | None, **overrides):
        return self._mod().config_from_params(p, **overrides)

    def train(self, *args, **kwargs):
        return self._mod().train_captioner(*args, **kwargs)

    def load(self, directory: str | os.PathLike, num_threads: int | None = None):
        return self._mod().MODEL.load(directory, num_threads=num_threads)

    @property
    def config_file(self) -> str:
        return self._mod().CONFIG_FILE

    def feature_key(self, config) -> tuple:
        """Hashable key of the features ``config`` reads (models sharing it share features)."""
        if getattr(config, "pixels", False):
            return ("pixels",)
        return (getattr(config, "grid", None), config.image_encoder, config.image_size)

    def features(self, table: pd.DataFrame, cache_dir: str | os.PathLike, config,
                 **kw) -> np.ndarray:
        from biaslab.captioning.data import grid_features, image_features
        if getattr(config, "pixels", False):    # paper-tier ViT + GPT-2: image paths
            from biaslab.captioning.vit_gpt2 import image_inputs
            return image_inputs(table)
        if getattr(config, "grid", None) is not None:      # grid-reading architectures
            return grid_features(table, cache_dir, config.image_encoder, config.image_size,
                                 int(config.grid), **kw)
        return image_features(table, cache_dir, config.image_encoder, config.image_size, **kw)


def get_arch(name: str) -> Arch:
    """The :class:`Arch` called ``name``, an entry of :data:`biaslab.registry.ARCHS`
    (built-ins and installed plug-ins, entry point group ``biaslab.archs``; an entry's target
    names the module); ``ValueError`` naming ``captioner.archs`` and the known names
    otherwise."""
    from biaslab import registry
    if str(name) not in registry.ARCHS:
        raise ValueError(f"captioner.archs: unknown architecture {name!r} (known: "
                         f"{sorted(registry.ARCHS.names())})")
    t = registry.ARCHS.get(str(name)).target
    return Arch(str(name), t if isinstance(t, str) else t.__name__)


def archs_from_params(p: Mapping | None) -> list[str]:
    """``captioner.archs`` (default ``[clipcap]``), checked: a non-empty list of known,
    distinct names. Raises ``ValueError``."""
    names = list((p or {}).get("archs") or [DEFAULT_ARCH])
    if isinstance((p or {}).get("archs"), str):
        names = [p["archs"]]
    for n in names:
        get_arch(n)
    if len(set(names)) != len(names):
        raise ValueError(f"captioner.archs: repeated architecture in {names}")
    return names


def arch_name(dataset: str, arch: str) -> str:
    """Run-name stem: ``<dataset>`` for ClipCap (paths unchanged), ``<dataset>-<arch>``
    otherwise."""
    return dataset if arch == DEFAULT_ARCH else f"{dataset}-{arch}"


def arch_model_dir(dataset: str, seed: int, arch: str = DEFAULT_ARCH) -> str:
    """Model directory: :func:`biaslab.runtime.paths.model_dir` ``("captioner", dataset, seed)`` for
    ClipCap (``data/models/captioner/<dataset>/<dataset>-<seed>``); other architectures sit
    beside it with the arch in the name:
    ``data/models/captioner/<dataset>/<dataset>-<arch>-<seed>`` (inside the directory the
    dataset's train_captioner stage owns)."""
    base = Path(model_dir("captioner", dataset, seed))
    return str(base.parent / f"{arch_name(dataset, arch)}-{int(seed)}")


def arch_live_dir(dataset: str, seed: int, arch: str = DEFAULT_ARCH) -> str:
    """DVCLive directory, named as :func:`arch_model_dir`:
    ``dvclive/captioner/<dataset>/<dataset>[-<arch>]-<seed>``."""
    base = Path(live_dir("captioner", dataset, seed))
    return str(base.parent / f"{arch_name(dataset, arch)}-{int(seed)}")



