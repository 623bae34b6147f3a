"""Domain discriminative and domain independent training (Wang et al., "Towards Fairness in
Visual Recognition: Effective Strategies for Bias Mitigation", CVPR 2020 -- "Wang et al.
2020b" in paper 000 -- sec. 4-5); paper 000 Table 1 rows "DomDisc" and "DomInd".

The domains are the two genders. Both models have one object head per domain on the shared
features -- raw outputs ``[objects | woman domain] + [objects | man domain] + [woman, man]``
(2 |O| + 2) -- and keep the two gender outputs of paper 000 appendix B.1 ("the
classification layers predict both protected groups and object classes"), trained with the
plain BCE, so Ratio is defined for them as paper 000 Table 1 reports it.

* DomDisc: the ``2 |O|`` object outputs are a joint (object, domain) classifier: output
  ``(c, d)`` is trained on every row with target ``y_c * [gender = d]`` (a woman image with a
  cup is a positive of "cup, woman" and a negative of "cup, man"; the authors' CelebA
  criterion). Inference: the sum of the two domains' probabilities, ``P(c) = sigma(z_cw) +
  sigma(z_cm)`` -- marginalising the joint (their ``inference_sum_prob``) -- clipped to
  [1e-6, 1 - 1e-6] (two independent sigmoids may sum past 1; the clip only ties entries
  above 1 - 1e-6).
* DomInd: output ``(c, d)`` is trained only on the rows of domain ``d`` (the other domain's
  head is masked): two object classifiers that never compare across genders. Inference: the
  sum of the per-domain scores (logits), ``P(c) = sigma(z_cw + z_cm)`` (Wang et al. 2020b
  sec. 5, "sum of scores"; their ``inference_sum_out``): the ranking (mAP) is that of the sum,
  and the decision at 0.5 (Leakage predictions) is "mean per-domain logit > 0".

Rows of unknown gender train neither domain's object outputs (their domain is unknown).
"""
from __future__ import annotations

import numpy as np

from biaslab.classify.methods.base import Method, gender_index

_EPS = 1e-6


class _TwoDomains(Method):
    def n_raw(self, n_obj):
        return 2 * n_obj + 2

    def raw_targets(self, y, m, n_obj):
        g = gender_index(y, m, n_obj)
        yo, mo = y[:, :n_obj], m[:, :n_obj]
        yr = np.zeros((len(y), 2 * n_obj + 2), np.float32)
        mr = np.zeros_like(yr)
        yr[:, 2 * n_obj:], mr[:, 2 * n_obj:] = y[:, n_obj:], m[:, n_obj:]
        for d in (0, 1):
            sl = slice(d * n_obj, (d + 1) * n_obj)
            yr[:, sl], mr[:, sl] = self.domain_targets(yo, mo, g, d)
        return yr, mr


class DomainDiscriminative(_TwoDomains):
    """Joint (object, gender) outputs; inference = sum of per-domain probabilities."""
    name = "domain_discriminative"

    @staticmethod
    def domain_targets(yo, mo, g, d):
        known = (g >= 0)[:, None]
        return yo * (g == d)[:, None], mo * known

    def logits(self, raw):
        import torch
        n = (raw.shape[1] - 2) // 2
        p = (torch.sigmoid(raw[:, :n]) + torch.sigmoid(raw[:, n:2 * n])).clamp(_EPS, 1 - _EPS)
        return torch.cat([torch.log(p / (1 - p)), raw[:, 2 * n:]], 1)


class DomainIndependent(_TwoDomains):
    """One object head per gender, trained on its own gender's rows; inference = sum of the
    per-domain logits."""
    name = "domain_independent"

    @staticmethod
    def domain_targets(yo, mo, g, d):
        return yo, mo * (g == d)[:, None]

    def logits(self, raw):
        import torch
        n = (raw.shape[1] - 2) // 2
        return torch.cat([raw[:, :n] + raw[:, n:2 * n], raw[:, 2 * n:]], 1)
