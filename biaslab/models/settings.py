"""The training settings of the two small models the filters use: the object predictor eta
(paper 000 Eq. 5, :mod:`biaslab.models.objects`, params ``objects``) and the LiT
prompt-adherence scorer (paper 000 Eq. 4, :mod:`biaslab.models.clipscorer`, params
``scorer``). Each dataclass is the one place its defaults live; the field order is the key
order of the saved model's config. Torch-free, so every stage's params check reads the keys
(:func:`biaslab.runtime.validate.check_objects`, ``check_scorer``, which also check the
ranges) without importing the models.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["ObjectsSettings", "ScorerSettings"]


@dataclass(frozen=True)
class ObjectsSettings:
    """Training of the object predictor (group ``objects`` less its ``threads``).

    Attributes:
        min_count: a category is predicted when >= this many training images show it.
        epochs: full-batch AdamW steps; the best validation BCE is kept.
        lr, weight_decay: AdamW's.
        l2: ridge penalty on the linear head (logistic regression with C = 1 / (2 l2 n)).
        threshold: ``"val_f1"`` (per category, the best validation F1) or one probability in
            (0, 1) for every category.
        min_val_pos: validation positives a category needs for its own F1 threshold.
        labelled_only: train on the images whose object set is annotated only.
        seed: torch's seed of the head's initialisation.
    """
    min_count: int = 10
    epochs: int = 400
    lr: float = 3e-3
    weight_decay: float = 0.0
    l2: float = 0.1
    threshold: float | str = "val_f1"
    min_val_pos: int = 2
    labelled_only: bool = True
    seed: int = 0

    def config(self) -> dict[str, Any]:
        """The fields in order, as the saved model's config records them."""
        return asdict(self)


@dataclass(frozen=True)
class ScorerSettings:
    """Training of the LiT scorer (group ``scorer`` less ``text_encoder``, ``threads`` and
    ``cache_dir``).

    Attributes:
        proj_dim: the shared embedding's size.
        epochs, lr, weight_decay, batch_size: AdamW with a one-cycle schedule; the batch is
            capped at a quarter of the training images.
        dropout: on the projections' inputs, in [0, 1].
        patience: epochs without a better validation R@1 before stopping.
        init_temperature: InfoNCE's starting temperature (learned).
        prefix_prob: the probability a training caption carries ``prefix`` (CLIPScore's "A
            photo depicts "), in [0, 1].
        prefix: that prefix.
        seed: torch's and numpy's seed.
    """
    proj_dim: int = 256
    epochs: int = 30
    lr: float = 1e-3
    weight_decay: float = 1e-4
    batch_size: int = 256
    dropout: float = 0.3
    patience: int = 8
    init_temperature: float = 0.07
    prefix_prob: float = 0.0
    prefix: str = "A photo depicts "
    seed: int = 0

    def config(self) -> dict[str, Any]:
        """The fields in order, as the saved scorer's config records them."""
        return asdict(self)
