"""Adversarial gender removal from the intermediate representation (Wang et al., "Balanced
Datasets Are Not Enough: Estimating and Mitigating Gender Bias in Deep Image
Representations", ICCV 2019, sec. 5, "adv @ image" variant on the representation); paper 000
Table 1 row "Adversarial".

Model: the head's hidden layers are the encoder ``h = E(x)`` (at least one hidden layer:
``classifier.hidden``, or ``[repr_dim]`` when that is empty, since a linear head has no
representation to clean), followed by the object classifier (``|O|`` outputs, NO gender
outputs: paper 000 Table 1, "Ratio is inapplicable to Adversarial due to its gender
prediction module for mitigation"). An adversary ``A`` (MLP ``repr -> adv_hidden -> 1``,
P(man)) reads ``h`` through a gradient-reversal layer (Ganin and Lempitsky 2015): the
adversary minimises its BCE, the encoder receives ``-lambda`` times that gradient, i.e. the
encoder and object classifier minimise ``L_objects - lambda * L_adv`` (Wang et al. 2019
Eq. 3, with a single optimiser as in Ganin's formulation). The adversary is a training-time
module and is not saved. Rows of unknown gender do not enter the adversary's loss.
"""
from __future__ import annotations

import dataclasses

from biaslab.classify.methods.base import Method, masked_bce


def grad_reverse(x, lam: float = 1.0):
    """Gradient-reversal layer: identity in the forward pass, gradient multiplied by
    ``-lam`` in the backward pass (Ganin and Lempitsky, ICML 2015)."""
    import torch

    class _GR(torch.autograd.Function):
        @staticmethod
        def forward(ctx, inp):
            return inp.view_as(inp)

        @staticmethod
        def backward(ctx, grad):
            return -float(lam) * grad

    return _GR.apply(x)


def representation(head, x):
    """The encoder output ``h`` (b, repr) of a head with hidden layers: everything but its
    last linear layer, on standardised features."""
    return head.net[:-1]((x - head.mean) / head.std)


class Adversarial(Method):
    """Objects-only classifier with a gradient-reversed gender adversary on its representation.

    Settings:
        lam: weight ``lambda`` of the reversed adversary gradient (Wang et al. 2019 tune it
            per setting, trading mAP for leakage; 1.0 is our default).
        repr_dim: width of the encoder layer when ``classifier.hidden`` is empty.
        adv_hidden: hidden width of the adversary MLP (our choice; Wang et al. 2019 use a
            small MLP adversary).
    """
    name = "adversarial"
    gender_outputs = False

    @dataclasses.dataclass(frozen=True)
    class Settings:
        lam: float = 1.0
        repr_dim: int = 256
        adv_hidden: int = 256

        def __post_init__(self):
            if float(self.lam) < 0:
                raise ValueError(f"classifier.method_params.adversarial.lam must be >= 0, "
                                 f"got {self.lam}")
            for k in ("repr_dim", "adv_hidden"):
                if int(getattr(self, k)) < 1:
                    raise ValueError(f"classifier.method_params.adversarial.{k} must be >= 1, "
                                     f"got {getattr(self, k)}")

    def n_raw(self, n_obj):
        return n_obj

    def hidden(self, hidden):
        return list(hidden) or [int(self.settings.repr_dim)]

    def setup(self, y, m, n_obj):
        self.n_obj = n_obj

    def modules(self, head):
        from torch import nn
        k = head.net[-1].in_features
        self.adversary = nn.Sequential(nn.Linear(k, int(self.settings.adv_hidden)), nn.ReLU(),
                                       nn.Linear(int(self.settings.adv_hidden), 1))
        return [self.adversary]

    def adversary_loss(self, h, y, m):
        """BCE of the adversary's P(man) on the rows of known gender, reading ``h`` through
        the gradient-reversal layer."""
        n = self.n_obj
        z = self.adversary(grad_reverse(h, self.settings.lam))[:, 0]
        return masked_bce(z, y[:, n + 1], m[:, n + 1])

    def loss(self, head, x, y, m, idx):
        n = self.n_obj
        h = representation(head, x)
        task = masked_bce(head.net[-1](h), y[:, :n], m[:, :n])
        return task + self.adversary_loss(h, y, m)
