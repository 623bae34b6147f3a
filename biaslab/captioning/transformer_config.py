"""Configuration of the ``transformer`` captioner (:mod:`biaslab.captioning.transformer`)
and its saved-model constants, in a module of their own so that the paper-tier
implementation (:mod:`biaslab.captioning.vit_gpt2`) and the offline one share them without
importing each other (no import cycles)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from biaslab.runtime.settings import at_least, block_from_params

__all__ = ["ARCH", "CONFIG_FILE", "WEIGHTS_FILE", "SHARED", "TransformerConfig",
           "config_from_params"]

ARCH = "transformer"
CONFIG_FILE = "transformer.json"
WEIGHTS_FILE = "model.safetensors"
FORMAT = 1



@dataclass
class TransformerConfig:
    """Hyper-parameters (params.yaml ``captioner`` + ``captioner.transformer``).

    Architecture (``captioner.transformer``): ``grid`` (cells per side of the encoder's
    feature grid; 7 = EfficientNet-Lite0's own 7 x 7 map at 224 px), ``enc_layers`` /
    ``dec_layers`` (ViT-B and GPT-2 have 12 each; tiny tier 2), ``d_model`` (768 in the paper's
    models; 128), ``heads`` (12; 4), ``ff`` (feed-forward width; 4 x d_model as in ViT / GPT-2),
    ``dropout`` (0.1 as in ViT / GPT-2), ``lr`` (paper 000 app. B.2: 1e-4 for fine-tuning;
    offline default 1e-3, see the module docstring), ``batch_size`` (app. B.2: 64).
    Shared with ClipCap (``captioner.*``): ``vocab_size``, ``min_count``, ``max_len``,
    ``epochs``, ``weight_decay``, ``warmup``, ``patience``, ``beam``, ``seed``,
    ``num_threads``, ``local_files_only``; ``image_encoder`` / ``image_size`` from
    ``features``.

    Tier (``captioner.transformer``): ``encoder`` ``grid`` (offline: the model above on the
    frozen backbone's feature grid) or a ViT checkpoint (hub id / directory; paper:
    ``google/vit-base-patch16-224-in21k``), ``decoder`` ``tiny`` (offline, from scratch) or a
    causal LM with an encoder (paper: ``gpt2``): any encoder other than ``grid`` fine-tunes
    ViT + GPT-2 on pixels (:mod:`biaslab.captioning.vit_gpt2`; ``grid``, ``enc_layers``,
    ``dec_layers``, ``d_model``, ``heads``, ``ff``, ``dropout`` and ``vocab_size`` /
    ``min_count`` are then the checkpoints').
    """
    grid: int = 7
    enc_layers: int = 2
    dec_layers: int = 2
    d_model: int = 128
    heads: int = 4
    ff: int = 512
    dropout: float = 0.1
    lr: float = 1e-3
    batch_size: int = 64
    vocab_size: int = 10000
    min_count: int = 2
    max_len: int = 20
    epochs: int = 30
    weight_decay: float = 0.01
    warmup: float = 0.05
    patience: int = 4
    beam: int = 3
    seed: int = 0
    image_encoder: str = "efficientnet_lite0"
    image_size: int | None = 224
    num_threads: int | None = 1
    encoder: str = "grid"
    decoder: str = "tiny"
    local_files_only: bool = True

    @property
    def pixels(self) -> bool:
        """True for the paper tier (a ViT checkpoint as ``encoder``): the model reads image
        paths, not grid features."""
        return str(self.encoder) != "grid"

    @classmethod
    def from_params(cls, params) -> "TransformerConfig":
        """From the composed params' group ``captioner`` (:func:`config_from_params`): the
        arch's settings as its registry entry declares them."""
        return config_from_params((params or {}).get("captioner"))


#: keys of ``captioner`` that :class:`TransformerConfig` reads (the rest of its fields come
#: from ``captioner.transformer``)
SHARED = ("vocab_size", "min_count", "max_len", "epochs", "weight_decay", "warmup", "patience",
          "beam", "seed", "num_threads", "image_encoder", "image_size", "local_files_only")


def config_from_params(p: Mapping | None, **overrides) -> TransformerConfig:
    """``TransformerConfig`` from the ``captioner`` params dict: the shared keys
    (:data:`SHARED`) from ``p``, the architecture keys from ``p["transformer"]``, then
    ``overrides`` (None values ignored). Raises ``ValueError`` naming the param for a bad
    value or an unknown ``captioner.transformer`` key."""
    cfg = block_from_params(TransformerConfig, p, "transformer", SHARED, "captioner",
                            overrides)
    at_least(cfg, ("grid", "enc_layers", "dec_layers", "d_model", "heads", "ff", "batch_size",
                   "max_len", "epochs", "beam"), 1, "captioner.transformer")
    if cfg.d_model % cfg.heads:
        raise ValueError(f"captioner.transformer.d_model ({cfg.d_model}) must be divisible by "
                         f"heads ({cfg.heads})")
    if not cfg.lr > 0:
        raise ValueError(f"captioner.transformer.lr must be > 0, got {cfg.lr!r}")
    if not 0 <= float(cfg.dropout) < 1:
        raise ValueError(f"captioner.transformer.dropout must be in [0, 1), got {cfg.dropout!r}")
    return cfg
