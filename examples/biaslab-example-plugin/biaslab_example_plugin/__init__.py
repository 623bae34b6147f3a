"""An example biaslab plug-in (docs/extending.md): one component of each kind that adds a row
to paper 000's Tables 1-3, the causal probe and the validity verdicts.

* ``reweighted`` (training set, entry point group ``biaslab.datasets``): Original with every
  image repeated ``round(w_i)`` times (at least once, at most ``MAX_COPIES``), ``w`` the raking
  weights under which every labelled object co-occurs equally often with each gender
  (:func:`biaslab.data.datasets.balancing_weights`, paper 000 sec. 2.1's p(a | g) = p(a)): the
  integer reweighting between Original and over-sampling.
* ``label_smoothing`` (model-level method, ``biaslab.methods``): the binary cross-entropy of
  every output against targets smoothed towards 1/2, ``y (1 - eps) + eps / 2`` (Szegedy et al.,
  "Rethinking the Inception Architecture", CVPR 2016, sec. 7, for two classes per output).
* ``neutral`` (caption post-processor, ``biaslab.postprocessors``): every gender word of the
  Original captioner's captions replaced by its neutral form
  (:func:`biaslab.data.gender.neutralise`): the "just remove gender" baseline that LIBRA (paper
  003) argues against; Table 2 marks it degenerate (it names nobody's gender).

Each entry declares the claims its author would test (``claims``); the pipeline judges them
against Original in ``metrics/validity.json``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from biaslab.data import datasets as D
from biaslab.classify.methods.base import Method, masked_bce
from biaslab.data.gender import neutralise as _neutralise
from biaslab.registry import Entry

#: the most copies of one image (as over-sampling's ``datasets.max_copies``)
MAX_COPIES = 20


def reweighted(ctx) -> pd.DataFrame:
    """Original with integer copies ``clip(round(w_i), 1, MAX_COPIES)`` of image i, ``w`` =
    ``balancing_weights(Original)`` (mean 1). Repeated rows get sample ids ``<id>#<k>``.

    Args:
        ctx: :class:`biaslab.data.variants.VariantContext` (``ctx.original``: Original's manifest).

    Returns:
        the manifest, Original's columns, rows in Original's order.
    """
    d = ctx.original.reset_index(drop=True)
    copies = np.clip(np.rint(D.balancing_weights(d)), 1, MAX_COPIES).astype(int)
    rows = d.loc[d.index.repeat(copies)].copy()
    k = rows.groupby("sample_id").cumcount()
    rows["sample_id"] = rows["sample_id"] + np.where(k > 0, "#" + k.astype(str), "")
    return rows.reset_index(drop=True)


class LabelSmoothing(Method):
    """ERM with label smoothing: targets ``y (1 - eps) + eps / 2`` on every masked output.

    Params:
        eps: smoothing in [0, 1) (Szegedy et al. 2016 use 0.1).
    """
    name = "label_smoothing"
    PARAMS = {"eps": 0.1}

    def check(self) -> None:
        if not 0 <= float(self.params["eps"]) < 1:
            raise ValueError(f"classifier.method_params.label_smoothing.eps must be in [0, 1), "
                             f"got {self.params['eps']}")

    def loss(self, head, x, y, m, idx):
        eps = float(self.params["eps"])
        return masked_bce(head(x), y * (1 - eps) + eps / 2, m)


def neutral(captions: list[str], ctx) -> list[str]:
    """Every caption with its gender words neutralised (the word list of ``label.words``).

    Args:
        captions: one caption per test image.
        ctx: :class:`biaslab.captioning.postprocess.CaptionContext`.
    """
    words = (ctx.params.get("label") or {}).get("words", "lic")
    return [_neutralise(c, words=words) for c in captions]


REWEIGHTED = Entry(kind="datasets", name="reweighted", target=reweighted,
                   label="Reweighted (plug-in)", order=25,
                   doc="Original, each image repeated round(balancing weight) times",
                   claims={"objects": "<"})
LABEL_SMOOTHING = Entry(kind="methods", name="label_smoothing", target=LabelSmoothing,
                        label="Label smoothing (plug-in)",
                        params="classifier.method_params.label_smoothing",
                        defaults=LabelSmoothing.PARAMS, claims={"objects": "≤"})
NEUTRAL = Entry(kind="postprocessors", name="neutral", target=neutral,
                label="Original + neutral words (plug-in)",
                doc="gender words replaced by neutral ones", claims={"LIC": "≤"})
