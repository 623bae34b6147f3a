"""Focal loss (Lin et al., "Focal Loss for Dense Object Detection", ICCV 2017, Eq. 5): the
binary cross-entropy of each sigmoid output scaled by ``(1 - p_t)^gamma`` (``p_t`` = the
probability given to the true value), so confidently right entries weigh little; paper 000
Table 1 row "Focal"."""
from __future__ import annotations

import dataclasses

from biaslab.classify.methods.base import Method


def focal_bce(logits, y, m, gamma: float = 2.0, alpha: float | None = None):
    """Masked mean focal loss (Lin et al. 2017 Eq. 5) over the entries where ``m`` is 1:
    ``-alpha_t (1 - p_t)^gamma log p_t`` with ``p_t = sigmoid(z)`` for ``y = 1`` and
    ``1 - sigmoid(z)`` for ``y = 0``; ``alpha_t = alpha`` for positives, ``1 - alpha`` for
    negatives, or 1 when ``alpha`` is None. ``gamma = 0, alpha = None`` is the plain BCE.
    Torch tensors of one shape; returns a scalar (sum over masked entries / their count)."""
    import torch
    bce = torch.nn.functional.binary_cross_entropy_with_logits(logits, y, reduction="none")
    p = torch.sigmoid(logits)
    p_t = p * y + (1 - p) * (1 - y)
    loss = (1 - p_t).pow(float(gamma)) * bce
    if alpha is not None:
        loss = loss * (float(alpha) * y + (1 - float(alpha)) * (1 - y))
    return (loss * m).sum() / m.sum().clamp_min(1.0)


class Focal(Method):
    """Focal loss on every output (objects and gender).

    Settings:
        gamma: focusing parameter (Lin et al. 2017: 2, their best value; paper 000 gives no
            value, we use theirs).
        alpha: class-balance factor for positives, or None (default; Lin et al. use 0.25 for
            detection with its extreme foreground/background imbalance -- not our setting).
    """
    name = "focal"

    @dataclasses.dataclass(frozen=True)
    class Settings:
        gamma: float = 2.0
        alpha: float | None = None

        def __post_init__(self):
            if float(self.gamma) < 0:
                raise ValueError(f"classifier.method_params.focal.gamma must be >= 0, got "
                                 f"{self.gamma}")
            if self.alpha is not None and not 0 <= float(self.alpha) <= 1:
                raise ValueError(f"classifier.method_params.focal.alpha must be in [0, 1] or "
                                 f"null, got {self.alpha}")

    def loss(self, head, x, y, m, idx):
        return focal_bce(head(x), y, m, self.settings.gamma, self.settings.alpha)
