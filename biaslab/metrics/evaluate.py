"""All captioning metrics of one results file in one call (``biaslab evaluate-captions``,
stage ``eval_captioner`` through ``biaslab.captioning.evaluation``): Ratio, Error (paper 003),
BiasAmp (thesis Eqs. 2.2-2.3), LIC (thesis ch. 2), DBAC (Nair et al. 2025,
:mod:`biaslab.metrics.dbac`) and caption quality."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from biaslab.runtime import stats

__all__ = ["METRIC_GROUPS", "DEFAULT_METRICS", "evaluate_captions"]

METRIC_GROUPS = ("ratio", "error", "biasamp", "lic", "quality", "dbac")
#: the groups computed unless asked otherwise: DBAC trains four more attackers per seed
DEFAULT_METRICS = ("ratio", "error", "biasamp", "lic", "quality")


def _attacker_config(classifier: str, preset: str, num_threads: int | None,
                     bert_model: str | None):
    """The sentence classifier of LIC and DBAC (``biaslab.models.textclf``): the preset's config with
    the run's thread count and, for BERT attackers, its model."""
    from biaslab.models import textclf
    cfg = textclf.default_config(classifier, preset, progress=False)
    if num_threads:
        cfg = dataclasses.replace(cfg, num_threads=num_threads)
    if bert_model and classifier != "lstm":
        cfg = dataclasses.replace(cfg, model=bert_model)
    return cfg


def _unavailable(module: str, e: Exception) -> dict:
    return {"skipped": f"{module} not available ({type(e).__name__}: {e})"}


def evaluate_captions(predictions: dict[int, str], genders: dict[int, str],
                      human: dict[int, list[str]] | None = None,
                      metrics: tuple[str, ...] = DEFAULT_METRICS, words: str = "lic",
                      classifier: str = "lstm", preset: str = "paper", seeds: int = 10,
                      num_threads: int | None = None, progress: bool = False,
                      biasamp_min_count: int = 100, bert_model: str | None = None,
                      train_captions: Sequence[str] | None = None,
                      on_partial: Callable[[dict], None] | None = None,
                      max_human_captions: int | None = None,
                      dbac: dict | None = None, attribute: str = "gender") -> dict:
    """All requested metrics in one dict. Bias metrics use the predictions of images labelled
    with one of the attribute's two groups (female/male); quality metrics use every prediction
    that has human references.

    ``attribute="skin"`` (groups dark/light, :data:`biaslab.metrics.files.ATTRIBUTES`): the
    thesis' racial-bias LIC (sec. 2.5.3, Tables 2.3 and 2.5: captions are NOT masked, an
    unbiased model has LIC_M = 25 and LIC = 0). Ratio, Error, BiasAmp and DBAC count or mask
    the gender words of captions; skin tone has no such word list in the papers (captions
    rarely name it), so those groups are reported as ``{"skipped": reason}``, never computed on
    the wrong words.

    ``attribute="gender_skin"`` (the four groups female_dark, female_light, male_dark,
    male_light): LIC with a 4-way classifier (:mod:`biaslab.metrics.lic`, unbiased
    about 100 / 16 = 6.25). Decision: the captions' gender words ARE masked, as in the gender
    LIC (otherwise the gender half of every group is read off the words in both LIC_M and
    LIC_D, and LIC would mostly measure how often captions name a gender); skin tone has no
    word list, as above. Error is Burns et al.'s per group (the group's gender half is the
    image's gender) with the worst-group gap (:func:`biaslab.metrics.captions.error_by_group`);
    Ratio, BiasAmp and DBAC are skipped as for skin.

    BiasAmp (thesis Eqs. 2.2-2.3, :func:`biaslab.metrics.biasamp.bias_amplification`): the
    reference ``D`` (vocabulary = top 1,000 words of D, ``b`` from D, ``min_count`` filter in
    D) is ``train_captions`` when given -- the human captions of the captioner's TRAINING set,
    as the papers do -- and otherwise the human captions of the evaluated images (``human``);
    ``BiasAmp["reference"]`` says which (``"train"`` / ``"test_human"``) and
    ``n_reference_captions`` how many captions it has. The model side is every labelled
    prediction (with the test reference: every labelled prediction with human captions).
    ``BiasAmp["human_null"]`` (when ``human`` is given): the same BiasAmp of the labelled
    images' own human captions, one caption index at a time
    (:func:`biaslab.metrics.biasamp.human_null`): the value of a captioner that writes like
    the annotators, which a model's BiasAmp is read against (0 only when the test images
    mix people and scenes as the reference does).

    Args:
        predictions: image id -> generated caption.
        genders: image id -> its group, "female"/"male" (``attribute="skin"``: "dark"/"light");
            others are not bias-evaluated.
        human: image id -> human captions (references), or None.
        metrics: metric groups of :data:`METRIC_GROUPS`.
        words, classifier, preset, seeds, num_threads, progress, bert_model: LIC / word-list
            settings (see :func:`biaslab.metrics.lic.lic`).
        biasamp_min_count: BiasAmp min co-occurrences with each gender in D (papers: 100).
        train_captions: flat sequence of the training set's human captions (BiasAmp's D).
        max_human_captions: LIC_D averages over the first ``max_human_captions`` human-caption
            indices (None: every index, the paper's 5 on COCO; see :func:`biaslab.metrics.lic.lic`).
        on_partial: when given, gets a copy of the metrics computed so far just before the
            slow LIC step and again after every LIC seed (``LIC_seeds_done``); the CLI writes
            it to ``<out>.partial`` so a crash keeps them.
        dbac: DBAC's settings, a :class:`biaslab.metrics.settings.DbacSettings` or its params
            mapping (absent keys: its defaults, the authors'; ``seeds`` None = ``seeds``),
            plus ``categories``: the task list L (None = the 80 MSCOCO categories). The
            attacker is LIC's (``classifier``, ``preset``, ``num_threads``, ``bert_model``)
            and lambda_D reads the same human-caption indices (``max_human_captions``).
        attribute: ``gender``, ``skin`` or ``gender_skin`` (above).

    Returns:
        ``{"Ratio", "Error", "BiasAmp", "quality", "LIC_M", "LIC_D", "LIC", "LIC_*_std",
        "LIC_*_ci95" (t 95 % CI half-width over the LIC seeds, None for one seed), "LIC_*_n",
        "LIC_details", "DBAC"}`` (the requested groups; ``DBAC`` is
        :func:`biaslab.metrics.dbac.dbac_details`'s dict); a metric whose inputs are missing is
        reported as ``{"skipped": reason}``.

    Raises:
        ValueError: an unknown ``attribute``.
    """
    from biaslab.metrics.files import ATTRIBUTES
    if attribute not in ATTRIBUTES:
        raise ValueError(f"unknown attribute {attribute!r}; known: {list(ATTRIBUTES)}")
    groups = ATTRIBUTES[attribute][1]
    if attribute != "gender":
        how = ("thesis sec. 2.5.3 measures it with LIC on unmasked captions"
               if attribute == "skin" else
               "defined for two groups; run --attribute gender for the gender half")
        why = {"skipped": f"counts gender words; not defined for attribute {attribute!r} "
                          f"({how})"}
        skipped = {"ratio": "Ratio", "error": "Error", "biasamp": "BiasAmp", "dbac": "DBAC"}
        if attribute == "gender_skin":
            skipped.pop("error")    # Error per group: its gender half (error_by_group)
        out0 = {skipped[m]: dict(why) for m in metrics if m in skipped}
        metrics = tuple(m for m in metrics if m not in skipped)
    else:
        out0 = {}
    ids = sorted(i for i in predictions if i in genders)
    caps = {i: predictions[i] for i in ids}
    gen = {i: genders[i] for i in ids}
    out: dict[str, Any] = dict(out0)
    need_h = "needs --human"

    if "ratio" in metrics:
        try:
            from biaslab.metrics.captions import ratio_details
            out["Ratio"] = ratio_details(caps, gen, words)
        except ImportError as e:
            out["Ratio"] = _unavailable("biaslab.metrics.captions", e)
    if "error" in metrics and attribute == "gender_skin":
        from biaslab.metrics.captions import error_by_group
        out["Error"] = error_by_group(caps, gen, words)
    elif "error" in metrics:
        try:
            from biaslab.metrics.captions import error
            out["Error"] = error(caps, gen, words)
        except ImportError as e:
            out["Error"] = _unavailable("biaslab.metrics.captions", e)
    if "biasamp" in metrics:
        if human is None and train_captions is None:
            out["BiasAmp"] = {"skipped": "needs --train-captions (or --human)"}
        else:
            try:
                from biaslab.metrics.biasamp import bias_amplification_details, human_null
                if train_captions is not None:
                    ref_name, hid = "train", ids
                    ref, ref_g = [str(c) for c in train_captions], None
                else:
                    ref_name = "test_human"
                    hid = [i for i in ids if human.get(i)]
                    ref, ref_g = [human[i] for i in hid], [gen[i] for i in hid]
                res = bias_amplification_details([caps[i] for i in hid], ref,
                                                 [gen[i] for i in hid], ref_g,
                                                 words=words, min_count=biasamp_min_count)
                out["BiasAmp"] = {"ba": res["ba"], "n_words": res["n_words"],
                                  "n_undefined": res["n_undefined"],
                                  "min_count": biasamp_min_count, "reference": ref_name,
                                  "n_reference_captions": sum(
                                      1 if isinstance(r, str) else len(r) for r in ref),
                                  "n_human_captions": res["n_human_captions"],
                                  "n_model_captions": res["n_model_captions"]}
                nid = [i for i in ids if human and human.get(i)]
                if nid:   # the value of captions written like these images' annotators
                    out["BiasAmp"]["human_null"] = human_null(
                        [human[i] for i in nid], ref, [gen[i] for i in nid], ref_g,
                        words=words, min_count=biasamp_min_count)
            except ImportError as e:
                out["BiasAmp"] = _unavailable("biaslab.metrics.biasamp", e)
    if "quality" in metrics:
        if human is None:
            out["quality"] = {"skipped": need_h}
        else:
            qid = [i for i in sorted(predictions) if human.get(i)]
            if not qid:
                out["quality"] = {"skipped": "no prediction has human references"}
            else:
                try:
                    from biaslab.metrics.quality import coco_caption_scores
                    out["quality"] = {**coco_caption_scores(
                        {i: predictions[i] for i in qid}, {i: human[i] for i in qid}),
                        "n_images": len(qid)}
                except ImportError as e:
                    out["quality"] = _unavailable("biaslab.metrics.quality", e)
                except RuntimeError as e:   # Java missing for pycocoevalcap
                    out["quality"] = {"skipped": str(e)}
    if on_partial is not None and "lic" in metrics:
        on_partial(dict(out))
    if "lic" in metrics:
        from biaslab.metrics.lic import lic_details
        cfg = _attacker_config(classifier, preset, num_threads, bert_model)
        done: list[dict] = []

        def seed_done(rec: dict) -> None:   # the partial file grows seed by seed
            done.append(rec)
            on_partial({**out, "LIC_seeds_done": list(done)})
        try:
            res = lic_details(caps, human, gen, classifier=classifier, seeds=seeds, config=cfg,
                              words=words if attribute in ("gender", "gender_skin") else None,
                              progress=progress,
                              max_human_captions=max_human_captions,
                              on_seed=seed_done if on_partial is not None else None, groups=groups)
        except ValueError as e:   # e.g. too few images per gender
            out["LIC_M"] = out["LIC_D"] = out["LIC"] = {"skipped": str(e)}
        else:
            for k in ("LIC_M", "LIC_D", "LIC"):
                if res[k] is None:
                    out[k] = {"skipped": need_h}
                else:
                    out[k] = res[k]
                    out[f"{k}_std"] = res[f"{k}_std"]
                    # the t 95 % CI over the LIC seeds and their number (None with one seed)
                    rec = stats.record([r[k] for r in res["per_seed"]])
                    out[f"{k}_ci95"], out[f"{k}_n"] = rec["ci95"], rec["n"]
            out["LIC_details"] = {k: v for k, v in res.items()
                                  if k not in ("LIC_M", "LIC_M_std", "LIC_D", "LIC_D_std",
                                               "LIC", "LIC_std")}
            out["LIC_details"]["preset"] = preset
    if "dbac" in metrics:
        if human is None:
            out["DBAC"] = {"skipped": need_h}
        else:
            from biaslab.metrics.dbac import dbac_details as dbac_metric
            from biaslab.metrics.settings import DbacSettings
            d = dict(dataclasses.asdict(dbac) if isinstance(dbac, DbacSettings)
                     else dbac or {})
            categories = d.pop("categories", None)
            o = DbacSettings.from_mapping(d, "dbac")
            cfg = _attacker_config(classifier, preset, num_threads, bert_model)
            try:
                out["DBAC"] = dbac_metric(
                    caps, human, gen, directions=o.directions, classifier=classifier,
                    seeds=seeds if o.seeds is None else o.seeds, config=cfg,
                    categories=categories, words=words, bayes=o.bayes,
                    substitution=o.substitution, threshold=float(o.threshold),
                    test_ratio=float(o.test_ratio), max_human_captions=max_human_captions,
                    progress=progress)
            except ValueError as e:   # e.g. too few images per gender
                out["DBAC"] = {"skipped": str(e)}
    return out
