"""The built-in captioning metrics as registry components: one ``compute(ctx)`` per column of
paper 000 Table 2 and thesis Table 2.1, the same contract as a plug-in metric (registry kind
``metrics``, :class:`biaslab.captioning.evaluation.MetricContext` -> float or None).

Several columns come out of one computation: pycocoevalcap scores METEOR, BLEU-4 and CIDEr in
one call, one set of LIC attackers gives LIC_M, LIC_D and LIC (paper 002 Eq. 4), one set of
DBAC attackers gives its four numbers. :func:`biaslab.captioning.evaluation.caption_metrics`
runs those once per results set and hands their details to every metric in
``ctx.details`` (:func:`biaslab.metrics.evaluate.evaluate_captions`' dict plus ``CLIPScore``
and ``DBA``); the functions here read their number from there, or compute it from the
captions when it is their own (``no_gender_word``, ``length``). A number that could not be
computed (a skipped group, ``{"skipped": reason}`` in the details) is None.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["COMPANIONS", "meteor", "bleu4", "cider", "clipscore", "ratio", "error",
           "lic", "lic_m", "lic_d", "biasamp", "dba_g", "dba_o", "no_gender_word", "length",
           "dbac_t_to_a", "dbac_a_to_t", "dbac_direct_t_to_a", "dbac_direct_a_to_t"]


def _at(details: Mapping[str, Any], *path: str) -> Any:
    """``details[path[0]][path[1]]...``; None where a level is missing or is not a mapping (a
    ``{"skipped": reason}`` group has no number)."""
    node: Any = details
    for k in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(k)
    return None if isinstance(node, Mapping) else node


def meteor(ctx) -> float | None:
    """METEOR x100 (pycocoevalcap; paper 000 Table 2) over predictions with human captions."""
    return _at(ctx.details, "quality", "METEOR")


def bleu4(ctx) -> float | None:
    """BLEU-4 x100 (pycocoevalcap)."""
    return _at(ctx.details, "quality", "BLEU-4")


def cider(ctx) -> float | None:
    """CIDEr-D x100 (pycocoevalcap)."""
    return _at(ctx.details, "quality", "CIDEr")


def clipscore(ctx) -> float | None:
    """CLIPScore x100 (Hessel et al. 2021; :func:`biaslab.captioning.evaluation.
    clip_score_for`); None without a scorer."""
    return _at(ctx.details, "CLIPScore")


def ratio(ctx) -> float | None:
    """Ratio = max(r, 1/r), r = #man / #woman captions (paper 000 Table 2,
    :func:`biaslab.metrics.captions.ratio`); ``inf`` when one gender is never said."""
    return _at(ctx.details, "Ratio", "ratio_max")


def error(ctx) -> float | None:
    """Error: % of gender-labelled images misgendered (:func:`biaslab.metrics.captions.error`)."""
    return _at(ctx.details, "Error")


def lic(ctx) -> float | None:
    """LIC = LIC_M - LIC_D x100 (paper 002 Eq. 4, :func:`biaslab.metrics.lic.lic`), the mean
    over the LIC attacker seeds."""
    return _at(ctx.details, "LIC")


def lic_m(ctx) -> float | None:
    """LIC_M x100: the attacker's leakage on the model's captions (paper 002)."""
    return _at(ctx.details, "LIC_M")


def lic_d(ctx) -> float | None:
    """LIC_D x100: the attacker's leakage on human captions (paper 002)."""
    return _at(ctx.details, "LIC_D")


def biasamp(ctx) -> float | None:
    """BiasAmp x100 (thesis Eq. 2.11, :func:`biaslab.metrics.biasamp.bias_amplification`)."""
    return _at(ctx.details, "BiasAmp", "ba")


def dba_g(ctx) -> float | None:
    """DBA_G: directional bias amplification, gender to objects (thesis Eq. 2.13,
    :func:`biaslab.metrics.dba.caption_dba`); None without object annotations."""
    return _at(ctx.details, "DBA", "DBA_G")


def dba_o(ctx) -> float | None:
    """DBA_O: directional bias amplification, objects to gender (thesis Eq. 2.14)."""
    return _at(ctx.details, "DBA", "DBA_O")


def _gendered(ctx) -> list[int]:
    return [i for i in sorted(ctx.predictions) if ctx.genders.get(i) in ("female", "male")]


def no_gender_word(ctx) -> float | None:
    """% of the gender-labelled images whose caption names no word of ``ctx.words``
    (:func:`biaslab.data.gender.caption_gender` "none"): a captioner that drops the person
    reads "unbiased" on Ratio. Not in the papers; None without a labelled image."""
    from biaslab.data.gender import caption_gender
    gendered = _gendered(ctx)
    if not gendered:
        return None
    return 100.0 * sum(caption_gender(ctx.predictions[i], ctx.words) == "none"
                       for i in gendered) / len(gendered)


def length(ctx) -> float | None:
    """Mean tokens (:func:`biaslab.data.gender.tokenize`) per caption over every prediction;
    None without one."""
    import numpy as np
    from biaslab.data.gender import tokenize
    ids = sorted(ctx.predictions)
    return float(np.mean([len(tokenize(ctx.predictions[i])) for i in ids])) if ids else None


def _dbac(direction: str, variant: str):
    def compute(ctx) -> float | None:
        return _at(ctx.details, "DBAC", direction, variant, "mean")
    return compute


dbac_t_to_a = _dbac("T->A", "DBAC")
dbac_t_to_a.__doc__ = ("DBAC text to attribute with the authors' prior correction "
                       "(:func:`biaslab.metrics.dbac.dbac_details`), the mean over DBAC seeds, "
                       "a fraction in [-1, 1]; None when DBAC is off.")
dbac_a_to_t = _dbac("A->T", "DBAC")
dbac_a_to_t.__doc__ = "DBAC attribute to text with the prior correction (as dbac_t_to_a)."
dbac_direct_t_to_a = _dbac("T->A", "DBAC_direct")
dbac_direct_t_to_a.__doc__ = "DBAC text to attribute without the prior correction."
dbac_direct_a_to_t = _dbac("A->T", "DBAC_direct")
dbac_direct_a_to_t.__doc__ = "DBAC attribute to text without the prior correction."

#: counts each row of ``data/captions/eval.json`` carries right after a metric, not columns
#: of their own: ``{metric: (key, reader)}`` (#man / #woman beside Ratio, the number of
#: evaluated images after the DBA pair)
COMPANIONS = {"Ratio": ("ratio_raw", lambda ctx: _at(ctx.details, "Ratio", "ratio")),
              "DBA_O": ("n_images", lambda ctx: len(ctx.predictions))}
