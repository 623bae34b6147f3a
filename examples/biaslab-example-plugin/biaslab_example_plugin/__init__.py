"""An example biaslab plug-in (docs/extending.md): one component of each kind that adds a row
to paper 000's Tables 1-3, the causal probe and the validity verdicts.

* ``reweighted`` (training set, entry point group ``biaslab.datasets``): Original with every
  image repeated ``round(w_i)`` times (at least once, at most ``max_copies``, its one param at
  ``datasets.reweighted.max_copies``: :class:`ReweightedSettings`), ``w`` the raking
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
* ``context_neutral`` (a learned caption post-processor with its own training, module
  :mod:`biaslab_example_plugin.context_neutral`): gender words neutralised only where the
  caption's other words predict them, by a classifier it fits on the training captions.

And two components that add columns rather than rows:

* ``sharpness`` (candidate filter, ``biaslab.filters``): ``-|log(VoL(candidate) /
  VoL(original))|``, VoL the variance of the Laplacian of a 64 x 64 grey thumbnail (Pech-Pacheco
  et al., "Diatom autofocusing in brightfield microscopy", ICPR 2000): 0 when the edit keeps
  the original's sharpness, negative when inpainting blurs or over-sharpens. Named in
  ``filters.names`` (with a weight in ``filters.weights``), it joins weighted rank selection
  and Table 4.
* ``types`` (captioning metric, ``biaslab.metrics``): the number of distinct word types in one
  captioner's captions of the test set (van Miltenburg, Elliott & Vossen, "Measuring the
  Diversity of Automatic Image Descriptions", COLING 2018). Named in
  ``eval_captioner.metrics``, it is a Table 2 column of every row.

Each row entry declares the claims its author would test (``claims``); the pipeline judges them
against Original in ``metrics/validity.json``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from PIL import Image

from biaslab.data import datasets as D
from biaslab.classify.methods.base import Method, masked_bce
from biaslab.data.gender import neutralise as _neutralise
from biaslab.registry import Entry

@dataclass(frozen=True)
class ReweightedSettings:
    """``reweighted``'s one param (``datasets.reweighted``) and its default.

    Attributes:
        max_copies: the most copies of one image, >= 1 (as over-sampling's
            ``datasets.max_copies``); 1 gives Original back.
    """
    max_copies: int = 20

    def __post_init__(self):
        if self.max_copies < 1:
            raise ValueError(f"datasets.reweighted.max_copies must be >= 1, got "
                             f"{self.max_copies}")


def reweighted(ctx) -> pd.DataFrame:
    """Original with integer copies ``clip(round(w_i), 1, max_copies)`` of image i, ``w`` =
    ``balancing_weights(Original)`` (mean 1). Repeated rows get sample ids ``<id>#<k>``.

    Args:
        ctx: :class:`biaslab.data.variants.VariantContext` (``ctx.original``: Original's
            manifest; ``ctx.settings("reweighted")``: :class:`ReweightedSettings`).

    Returns:
        the manifest, Original's columns, rows in Original's order.
    """
    s = ctx.settings("reweighted")
    d = ctx.original.reset_index(drop=True)
    copies = np.clip(np.rint(D.balancing_weights(d)), 1, s.max_copies).astype(int)
    rows = d.loc[d.index.repeat(copies)].copy()
    k = rows.groupby("sample_id").cumcount()
    rows["sample_id"] = rows["sample_id"] + np.where(k > 0, "#" + k.astype(str), "")
    return rows.reset_index(drop=True)


class LabelSmoothing(Method):
    """ERM with label smoothing: targets ``y (1 - eps) + eps / 2`` on every masked output.

    Settings:
        eps: smoothing in [0, 1) (Szegedy et al. 2016 use 0.1).
    """
    name = "label_smoothing"

    @dataclass(frozen=True)
    class Settings:
        eps: float = 0.1

        def __post_init__(self):
            if not 0 <= float(self.eps) < 1:
                raise ValueError(f"classifier.method_params.label_smoothing.eps must be in "
                                 f"[0, 1), got {self.eps}")

    def loss(self, head, x, y, m, idx):
        eps = float(self.settings.eps)
        return masked_bce(head(x), y * (1 - eps) + eps / 2, m)


def neutral(captions: list[str], ctx) -> list[str]:
    """Every caption with its gender words neutralised (the word list of ``label.words``).

    Args:
        captions: one caption per test image.
        ctx: :class:`biaslab.captioning.postprocess.CaptionContext`.
    """
    words = ctx.words
    return [_neutralise(c, words=words) for c in captions]


def _variance_of_laplacian(path, size: int = 64) -> float:
    """VoL of the ``size`` x ``size`` grey thumbnail of the image at ``path`` (pixels in
    [0, 1]); the 4-neighbour Laplacian on the interior pixels."""
    with Image.open(path) as im:
        a = np.asarray(im.convert("L").resize((size, size), Image.BOX), np.float64) / 255.0
    lap = (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] - 4.0 * a[1:-1, 1:-1])
    return float(lap.var())


def sharpness(ctx) -> np.ndarray:
    """``-|log(VoL(candidate) / VoL(original))|`` per candidate, float (n,) in (-inf, 0]
    (higher = closer to the original's sharpness); flat images get a floor of 1e-12.

    Args:
        ctx: :class:`biaslab.counterfactual.filters.FilterContext`.
    """
    orig = {int(i): _variance_of_laplacian(ctx.originals[int(i)]) for i in ctx.image_ids}
    cand = [_variance_of_laplacian(p) for p in ctx.candidate_paths]
    floor = 1e-12
    return np.asarray([-abs(np.log(max(c, floor) / max(orig[int(i)], floor)))
                       for c, i in zip(cand, ctx.candidates["image_id"])], np.float64)


def types(ctx) -> float | None:
    """The number of distinct word types (``biaslab.data.gender.tokenize``) over the captions
    of one results set; None without captions.

    Args:
        ctx: :class:`biaslab.captioning.evaluation.MetricContext`.
    """
    from biaslab.data.gender import tokenize
    caps = [c for c in ctx.predictions.values() if c]
    return float(len({w for c in caps for w in tokenize(c)})) if caps else None


REWEIGHTED = Entry(kind="datasets", name="reweighted", target=reweighted,
                   label="Reweighted (plug-in)", order=25, params="datasets.reweighted",
                   settings=ReweightedSettings,
                   doc="Original, each image repeated round(balancing weight) times",
                   claims={"objects": "<"})
LABEL_SMOOTHING = Entry(kind="methods", name="label_smoothing", target=LabelSmoothing,
                        label="Label smoothing (plug-in)",
                        params="classifier.method_params.label_smoothing",
                        settings=LabelSmoothing.Settings, claims={"objects": "≤"})
NEUTRAL = Entry(kind="postprocessors", name="neutral", target=neutral,
                label="Original + neutral words (plug-in)",
                doc="gender words replaced by neutral ones", claims={"LIC": "≤"})
SHARPNESS = Entry(kind="filters", name="sharpness", target=sharpness,
                  label="Sharpness (plug-in)",
                  doc="-|log ratio| of the variance of the Laplacian, candidate vs original")
TYPES = Entry(kind="metrics", name="types", target=types, label="Types (plug-in)",
              task="captioning", better="higher",
              doc="distinct word types in a captioner's captions (van Miltenburg et al. 2018)")
