"""Group distributionally robust optimisation (Sagawa et al., "Distributionally Robust Neural
Networks for Group Shifts", ICLR 2020 / arXiv 2019, Algorithm 1); paper 000 Table 1 row
"GroupDRO".

Groups (our reading of "gender x object presence" for a multi-label model): for every object
output ``c`` the four groups ``(gender, presence of c)``, index ``k = 2 * gender + presence``
(gender 0 = woman, 1 = man). Each object output has its own adversarial group weights
``q[c]`` (a distribution over its 4 groups, uniform at the start), updated once per
mini-batch by exponentiated gradient ascent (Algorithm 1):

    q[c, k] <- q[c, k] * exp(eta * L[c, k]);   q[c] <- q[c] / sum(q[c])

where ``L[c, k]`` is the mean BCE of output ``c`` over the batch rows in group ``k`` (0 when
the batch has none: that group's weight is then only renormalised, as in the authors' code),
and the object loss of output ``c`` is ``sum_k q[c, k] * L[c, k]`` with the updated q. The two
gender outputs keep the plain masked mean BCE (they define the groups). The batch loss is the
mean over the ``|O| + 2`` outputs. Rows of unknown gender belong to no group and do not enter
the object loss. Sagawa et al.'s strong L2 penalty and group adjustments are not used
(``classifier.weight_decay`` is the shared knob).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from biaslab.classify.methods.base import Method, gender_index


def dro_update(q, group_loss, eta: float):
    """One exponentiated-gradient step of Sagawa et al. Algorithm 1: ``q * exp(eta * L)``
    renormalised along the last axis. ``q``, ``group_loss``: tensors (..., K); returns the new
    q (no gradient)."""
    import torch
    with torch.no_grad():
        q = q * torch.exp(float(eta) * group_loss.detach())
        return q / q.sum(-1, keepdim=True)


def group_losses(logits, y, m, groups, n_obj: int):
    """Per-(object, group) mean BCE of a batch and the group counts.

    Args:
        logits, y, m: (b, n_obj + 2) tensors (raw = inference layout for GroupDRO).
        groups: int64 (b, n_obj) group index 0..3 per row and object, -1 = no group.
    Returns:
        ``(L, counts)``: float (n_obj, 4) mean losses (0 where a group is empty), counts.
    """
    import torch
    bce = torch.nn.functional.binary_cross_entropy_with_logits(
        logits[:, :n_obj], y[:, :n_obj], reduction="none") * m[:, :n_obj]
    onehot = torch.zeros(*groups.shape, 4, dtype=bce.dtype)
    valid = groups >= 0
    onehot[valid] = torch.nn.functional.one_hot(groups[valid], 4).to(bce.dtype)
    onehot = onehot * m[:, :n_obj, None]
    counts = onehot.sum(0)                                     # (n_obj, 4)
    sums = (bce[:, :, None] * onehot).sum(0)
    return sums / counts.clamp_min(1.0), counts


class GroupDRO(Method):
    """Group DRO over (gender, object presence) groups, one q per object (module docstring).

    Settings:
        eta: step size of the group-weight update (Sagawa et al.'s ``robust_step_size``; 0.01
            is the value of the authors' code and of their CelebA / Waterbirds runs).
    """
    name = "group_dro"

    @dataclasses.dataclass(frozen=True)
    class Settings:
        eta: float = 0.01

        def __post_init__(self):
            if float(self.eta) < 0:
                raise ValueError(f"classifier.method_params.group_dro.eta must be >= 0, got "
                                 f"{self.eta}")

    def setup(self, y, m, n_obj):
        import torch
        g = gender_index(y, m, n_obj)
        grp = np.where(g[:, None] >= 0, 2 * g[:, None] + (y[:, :n_obj] > 0), -1)
        self.groups = torch.from_numpy(grp.astype(np.int64))
        self.n_obj = n_obj
        self.q = torch.full((n_obj, 4), 0.25)

    def loss(self, head, x, y, m, idx):
        import torch
        logits = head(x)
        n = self.n_obj
        L, _ = group_losses(logits, y, m, self.groups[idx], n)
        self.q = dro_update(self.q, L, self.settings.eta)
        obj = (self.q * L).sum()
        bce = torch.nn.functional.binary_cross_entropy_with_logits(
            logits[:, n:], y[:, n:], reduction="none") * m[:, n:]
        gender = (bce.sum(0) / m[:, n:].sum(0).clamp_min(1.0)).sum()
        return (obj + gender) / (n + 2)
