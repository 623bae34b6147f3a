"""Loss re-weighting baselines of paper 000 Table 1: "Upweight" (importance weighting, Byrd and
Lipton, "What is the Effect of Importance Weighting in Deep Learning?", ICML 2019) and "CB"
(class-balanced loss, Cui et al., "Class-Balanced Loss Based on Effective Number of Samples",
CVPR 2019). Both multiply the binary cross-entropy of each (row, output) entry by a weight
computed once from the training rows."""
from __future__ import annotations

import dataclasses

import numpy as np

from biaslab.classify.methods.base import Method, gender_index, masked_bce


def upweight_weights(y: np.ndarray, m: np.ndarray, n_obj: int) -> np.ndarray:
    """Importance weights that make gender independent of every object in the weighted
    training set (float32, shape of ``y``).

    For object output ``c``, a row of gender ``g`` whose presence of ``c`` is ``v`` gets
    ``w = n(c=v) * n(g) / (N * n(c=v, g))``, counts over the rows where the object output is
    not masked and the gender is known (N of them). The weighted count of every (object value,
    gender) cell is then ``n(c=v) n(g) / N``: the product of the marginals, i.e. each cell is
    weighted inversely to its co-occurrence frequency relative to independence, while the
    object's and the gender's own frequencies are kept (the mean weight is 1, so the loss
    scale is that of ERM). Paper 000 does not give its weighting; "inverse to each
    (object, gender) co-occurrence frequency" is our reading, normalised by the marginals so
    that rare objects are not also up-weighted (that would be class balancing, the CB row).
    Gender outputs and rows of unknown gender get weight 1.
    """
    w = np.ones_like(y, dtype=np.float32)
    g = gender_index(y, m, n_obj)
    for c in range(n_obj):
        rows = (m[:, c] > 0) & (g >= 0)
        n = int(rows.sum())
        if n == 0:
            continue
        v = y[rows, c] > 0
        gg = g[rows]
        wc = np.ones(n, np.float64)
        for val in (False, True):
            for gi in (0, 1):
                cell = (v == val) & (gg == gi)
                if cell.any():
                    wc[cell] = (v == val).sum() * (gg == gi).sum() / (n * cell.sum())
        w[np.flatnonzero(rows), c] = wc
    return w


def class_balanced_weights(y: np.ndarray, m: np.ndarray, beta: float) -> np.ndarray:
    """Class-balanced weights (Cui et al. 2019 sec. 3-4) of every (row, output) entry, float32,
    shape of ``y``: each sigmoid output is a two-class problem; its positives and negatives
    (masked entries not counted) have effective numbers ``E_n = (1 - beta^n) / (1 - beta)``
    and weights ``1 / E_n`` normalised to sum to 2 (the number of classes, Cui et al.'s
    normalisation), so a balanced output keeps weight 1 for both values. A value with no
    training entry gets weight 0 (it never occurs) and the other weight 1.

    Raises ValueError unless ``0 <= beta < 1`` (beta = 0: no re-weighting).
    """
    if not 0 <= float(beta) < 1:
        raise ValueError(f"classifier.method_params.class_balanced.beta must be in [0, 1), "
                         f"got {beta}")
    beta = float(beta)
    pos = ((y > 0) & (m > 0)).sum(0).astype(np.float64)
    neg = ((y <= 0) & (m > 0)).sum(0).astype(np.float64)

    def inv_eff(n):
        e = (1 - beta ** n) / (1 - beta) if beta > 0 else np.minimum(n, 1.0)
        return np.where(n > 0, 1.0 / np.where(e > 0, e, 1.0), 0.0)

    ip, ineg = inv_eff(pos), inv_eff(neg)
    s = ip + ineg
    wp = np.where(s > 0, 2 * ip / np.where(s > 0, s, 1), 1.0)
    wn = np.where(s > 0, 2 * ineg / np.where(s > 0, s, 1), 1.0)
    wp = np.where(neg == 0, 1.0, wp)
    wn = np.where(pos == 0, 1.0, wn)
    return np.where(y > 0, wp[None], wn[None]).astype(np.float32)


class _Weighted(Method):
    def setup(self, y, m, n_obj):
        import torch
        self.weights = torch.from_numpy(self.compute(y, m, n_obj))

    def loss(self, head, x, y, m, idx):
        return masked_bce(head(x), y, m, self.weights[idx])


class Upweight(_Weighted):
    """Loss up-weighting (Byrd and Lipton 2019) by :func:`upweight_weights`; no params."""
    name = "upweight"

    def compute(self, y, m, n_obj):
        return upweight_weights(y, m, n_obj)


class ClassBalanced(_Weighted):
    """Class-balanced BCE (Cui et al. 2019) by :func:`class_balanced_weights`.

    Settings:
        beta: effective-number hyper-parameter (Cui et al. 2019 use 0.9-0.9999; our
            default 0.999 is one of theirs).
    """
    name = "class_balanced"

    @dataclasses.dataclass(frozen=True)
    class Settings:
        beta: float = 0.999

        def __post_init__(self):
            if not 0 <= float(self.beta) < 1:
                raise ValueError(f"classifier.method_params.class_balanced.beta must be in "
                                 f"[0, 1), got {self.beta}")

    def compute(self, y, m, n_obj):
        return class_balanced_weights(y, m, self.settings.beta)
