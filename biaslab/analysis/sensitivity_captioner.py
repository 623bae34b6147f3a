"""Feature sensitivity of the captioners (Table 2's bias metrics beside their sensitivity:
Hirota et al., ICCV 2025, arXiv 2509.07596), the logic of stage ``sensitivity_captioner``.

Every trained captioner (``captioner.archs`` x ``captioner.datasets`` x ``captioner.seeds``)
captions the unperturbed test images and their perturbed copies (stage ``sensitivity``,
:mod:`biaslab.analysis.perturb`: the person kept to the pixel); each bias metric's change is
perturbed minus unperturbed:

* ``Ratio`` (max(r, 1/r), r = #man / #woman captions; :func:`biaslab.metrics.captions.ratio`)
  and ``Error`` (% of female/male images captioned with the other gender;
  :func:`biaslab.metrics.captions.error`): per-image caption labels, so the change has a
  paired percentile bootstrap 95 % CI over test images and seeds together
  (:func:`biaslab.analysis.sensitivity.paired_change`);
* ``BiasAmp`` (thesis Eqs. 2.2-2.3, reference = the training captions) and ``LIC`` (trains
  its classifiers on each set's captions): one value per set and seed, so the CI is the t
  interval over seeds of the per-seed changes
  (:func:`biaslab.analysis.sensitivity.seed_change`).

The % is the change as a share of the unperturbed bias, its distance from no bias: Ratio 1,
Error 0, LIC 0, BiasAmp the test images' own human captions' value
(:func:`biaslab.metrics.biasamp.human_null`, the null Table 2 reads BiasAmp against). The
ground truth (the image's gender label) stays the original's. Caption post-processors
(the ``+LIBRA`` rows) are not perturbed: they rewrite captions, not images, and would add a
DCG run per set.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from biaslab.analysis import sensitivity as SE

if TYPE_CHECKING:
    from biaslab.analysis.sensitivity_settings import SensitivitySettings
    from biaslab.captioning.table2 import Table2Settings

NONE = "none"
#: the captioning metrics whose sensitivity can be measured; the first two bootstrap per image
METRICS = ("Ratio", "Error", "BiasAmp", "LIC")
BOOT = ("Ratio", "Error")
NULL = {"Ratio": 1.0, "Error": 0.0, "LIC": 0.0}


def caption_indicators(captions: Sequence[str], words: str = "lic"
                       ) -> tuple[np.ndarray, np.ndarray]:
    """``(man, woman)``: bool (n,) each, whether a caption reads "man" / "woman"
    (:func:`biaslab.metrics.captions.caption_label`: a caption with words of both genders or of
    none is neither)."""
    from biaslab.metrics.captions import MAN, WOMAN, caption_label
    labels = [caption_label(str(c), words) for c in captions]
    return (np.array([v == MAN for v in labels], bool),
            np.array([v == WOMAN for v in labels], bool))


def ratio_rows(man: np.ndarray, woman: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Caption Ratio = max(r, 1/r), r = #man / #woman, of each row of ``idx`` (int (B, n)).
    float64 (B,); inf where one count is 0, nan for 0/0 (as
    :func:`biaslab.metrics.captions.ratio`)."""
    return SE.ratio_rows(np.asarray(woman, np.float64), np.asarray(man, np.float64), idx)


def error_rows(man: np.ndarray, woman: np.ndarray, male: np.ndarray, idx: np.ndarray
               ) -> np.ndarray:
    """Error x100 of each row of ``idx``: the share of its images captioned with the other
    gender (a female image captioned "man", a male one "woman"; neutral captions count in the
    denominator, as :func:`biaslab.metrics.captions.error`). float64 (B,)."""
    male = np.asarray(male, bool)
    wrong = (np.asarray(man, bool) & ~male) | (np.asarray(woman, bool) & male)
    return 100.0 * wrong[idx].mean(-1)


def boot_rows(metric: str, labels: tuple[np.ndarray, np.ndarray], male: np.ndarray,
              idx: np.ndarray) -> np.ndarray:
    """One of :data:`BOOT` on caption labels ``(man, woman)`` for each row of ``idx``.
    Raises ValueError for another name."""
    if metric == "Ratio":
        return ratio_rows(*labels, idx)
    if metric == "Error":
        return error_rows(*labels, male, idx)
    raise ValueError(f"no per-image bootstrap for {metric!r}; known: {BOOT}")


def summarize_captioner(outputs: Sequence[Mapping], perturbations: Sequence[str],
                        male: np.ndarray, metrics: Sequence[str], *, n_boot: int,
                        seed: int, nulls: Mapping[str, float] | None = None) -> dict:
    """Every requested metric's change under every perturbation for one captioner row.

    Args:
        outputs: per seed, ``{"labels": {set: (man, woman)}, "values": {set: {metric:
            value or None}}}``; ``set`` is ``"none"`` or a perturbation; labels aligned with
            ``male`` (bool (n,)).
        perturbations, metrics: what to summarise (``metrics`` of :data:`METRICS`).
        nulls: no-bias values over :data:`NULL` (BiasAmp's is the human captions' value).

    Returns:
        ``{perturbation: {metric: paired_change / seed_change record}}``.
    """
    null = {**NULL, **(nulls or {})}
    n = len(male)

    def fn(o, key, m):
        labs = o["labels"][key]
        return lambda idx: boot_rows(m, labs, male, idx)
    out: dict = {}
    for name in perturbations:
        rec = {}
        for m in metrics:
            if m in BOOT:
                rec[m] = SE.paired_change([fn(o, NONE, m) for o in outputs],
                                          [fn(o, name, m) for o in outputs], n,
                                          null=null[m], n_boot=n_boot, seed=seed)
            else:
                rec[m] = SE.seed_change([o["values"][NONE].get(m) for o in outputs],
                                        [o["values"][name].get(m) for o in outputs],
                                        null=float(null.get(m, 0.0)))
        out[name] = rec
    return out


def aligned_sets(test: pd.DataFrame, perturbed: pd.DataFrame, names: Sequence[str]
                 ) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """The captioner's test images that have a copy under every perturbation of ``names``,
    and each set's ``image_id, path`` in the same order.

    Args:
        test: ``image_id, path`` of the captioner's test images.
        perturbed: ``data/sensitivity/perturbed.parquet`` (``perturbation, image_id, path``).

    Returns:
        ``(kept test rows, {"none" | perturbation: table})``.

    Raises:
        ValueError: a name the sensitivity stage did not write, or no image in common.
    """
    have = set(perturbed["perturbation"].astype(str))
    missing = [n for n in names if n not in have]
    if missing:
        raise ValueError(f"perturbation(s) {missing} not written by stage sensitivity "
                         f"(it wrote {sorted(have)}): add them to sensitivity.perturbations")
    ids = set(test["image_id"].astype(int))
    for n in names:
        ids &= set(perturbed.loc[perturbed["perturbation"] == n, "image_id"].astype(int))
    if not ids:
        raise ValueError("no captioner test image has a perturbed copy")
    kept = test[test["image_id"].astype(int).isin(ids)].sort_values(
        "image_id", ignore_index=True)[["image_id", "path"]]
    sets = {NONE: kept}
    for n in names:
        t = perturbed[perturbed["perturbation"] == n].set_index("image_id")
        sets[n] = pd.DataFrame({"image_id": kept["image_id"].astype(int),
                                "path": [str(t.at[int(i), "path"]) for i in kept["image_id"]]})
    return kept, sets


def run_captioner_sensitivity(sens: SensitivitySettings, captioners: Table2Settings,
                              table: pd.DataFrame,
                              human: Mapping[int, list], genders: Mapping[int, str],
                              train_caps: Sequence[str], perturbed: pd.DataFrame,
                              captions_dir: str | None = None) -> tuple[dict, list[dict]]:
    """Every trained captioner on the unperturbed and perturbed test images.

    Args:
        sens: the perturbations and their statistics (params group ``sensitivity``).
        captioners: the trained captioners, their decoding and Table 2's metric settings
            (:class:`biaslab.captioning.table2.Table2Settings`).
        table, human, genders, train_caps: :func:`biaslab.captioning.table2.test_set` (the
            images of Table 2, their human captions and female/male labels, the training
            captions: BiasAmp's reference).
        perturbed: ``data/sensitivity/perturbed.parquet``.
        captions_dir: where each set's captions are written (``<set>/<model>-<seed>.json``,
            COCO results format), or None.

    Returns:
        ``(record, csv_rows)``; the record's ``available`` is False (with ``reason``) when
        ``sensitivity.captioner_perturbations`` is empty.

    Raises:
        ValueError: a perturbation stage ``sensitivity`` did not write, no labelled test
            image with a perturbed copy.
        InputError: a trained captioner missing.
    """
    from biaslab import captioning as K
    from biaslab.metrics.evaluate import evaluate_captions
    from biaslab.runtime.io import InputError, write_json
    from biaslab.runtime.parallel import map_jobs
    s, t = sens, captioners
    names = list(s.captioner_perturbations)
    metrics = list(s.captioner_metrics)
    if not names:
        return {"available": False, "reason": "sensitivity.captioner_perturbations is empty"}, []
    lp, e, words, cache = t.lic, t.eval, t.words, t.feature_cache
    labelled = table[table["image_id"].astype(int).map(
        lambda i: genders.get(int(i)) in ("female", "male"))]
    kept, sets = aligned_sets(labelled, perturbed, names)
    ids = kept["image_id"].astype(int).tolist()
    male = np.array([genders[i] == "male" for i in ids], bool)
    g = {i: genders[i] for i in ids}
    h = {i: list(human.get(i) or []) for i in ids}
    groups = tuple(x for x, m in (("biasamp", "BiasAmp"), ("lic", "LIC")) if m in metrics)
    archs, datasets, seeds = list(t.archs), list(t.datasets), list(t.seeds)
    missing = [f"{K.arch_name(d, a)}-{sd}" for a in archs for d in datasets for sd in seeds
               if not Path(K.arch_model_dir(d, sd, a), K.get_arch(a).config_file).exists()]
    if missing:
        raise InputError("data/models/captioner", f"no trained captioner for {missing} "
                                                  "(run train_captioner)")
    feats: dict = {}

    def feats_for(arch, model, key):
        k = (arch.feature_key(model.config), key)
        if k not in feats:
            feats[k] = arch.features(sets[key], cache, model.config,
                                     num_threads=model.config.num_threads, progress=True)
        return feats[k]
    # every set's features before the fork (the workers inherit them)
    for a in archs:
        arch = K.get_arch(a)
        m0 = arch.load(K.arch_model_dir(datasets[0], seeds[0], a))
        for key in sets:
            feats_for(arch, m0, key)

    def one(job: tuple[str, str, int]) -> dict:
        a, d, sd = job
        arch = K.get_arch(a)
        model = arch.load(K.arch_model_dir(d, sd, a))
        res = {"labels": {}, "values": {}, "null": None}
        for key in sets:
            preds = model.generate(feats_for(arch, model, key), beam=t.beam,
                                   max_len=t.max_len, batch_size=int(e.batch_size or 64),
                                   no_repeat_ngram=t.no_repeat_ngram)
            if captions_dir is not None:
                write_json(f"{captions_dir}/{key}/{K.arch_name(d, a)}-{sd}.json",
                           [{"image_id": int(i), "caption": c} for i, c in zip(ids, preds)])
            res["labels"][key] = caption_indicators(preds, words)
            vals: dict = {}
            if groups:
                det = evaluate_captions(
                    dict(zip(ids, preds)), g, h, groups, words, lp.classifier,
                    lp.preset, lp.seeds, lp.num_threads, False,
                    int(e.biasamp_min_count), None, list(train_caps),
                    max_human_captions=lp.max_human_captions)
                ba = det.get("BiasAmp") or {}
                vals = {"BiasAmp": ba.get("ba"), "LIC": det.get("LIC")}
                if key == NONE:
                    res["null"] = (ba.get("human_null") or {}).get("ba")
            res["values"][key] = vals
        return res

    jobs = [(a, d, sd) for a in archs for d in datasets for sd in seeds]
    results = dict(zip(jobs, map_jobs(one, jobs, s.workers)))
    ba_null = next((r["null"] for r in results.values() if r["null"] is not None), None)
    nulls = {"BiasAmp": float(ba_null)} if ba_null is not None else {"BiasAmp": 0.0}
    models, rows = {}, []
    for a in archs:
        for d in datasets:
            row = d if a == K.DEFAULT_ARCH else f"{a}/{d}"
            models[row] = summarize_captioner([results[(a, d, sd)] for sd in seeds], names,
                                              male, metrics, n_boot=s.n_boot,
                                              seed=s.seed, nulls=nulls)
            for pn, recs in models[row].items():
                for m, r in recs.items():
                    rows.append({"model": row, "perturbation": pn, "metric": m,
                                 **{k: r[k] for k in ("base", "perturbed", "delta", "lo",
                                                      "hi", "pct", "pct_lo", "pct_hi",
                                                      "n_seeds", "n_images", "ci_method")}})
    record = {
        "available": True, "perturbations": names, "metrics": metrics, "models": models,
        "test_set": {"n_images": len(ids), "n_male": int(male.sum()),
                     "n_female": int((~male).sum()),
                     "n_left_out": int(len(labelled) - len(ids)), "seeds": seeds},
        "nulls": {**NULL, **nulls}, "n_boot": s.n_boot, "seed": s.seed,
        "not_perturbed": "caption post-processors (+LIBRA rows): they rewrite captions, "
                         "not images"}
    return record, rows
