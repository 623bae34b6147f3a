"""Paper 000's Table 1 from the trained classifiers (sec. 3.1; the logic of
stage ``eval_classifier``, which only reads its inputs, writes the persons-masked test
images and the files). The record's layout is in ``stages/eval_classifier.py``'s docstring.

:func:`evaluate_classifiers` runs every (backbone, model, seed) through
:func:`biaslab.classify.evaluate` (mAP, Ratio, Ratio_E, Leakage, ...) and the real-vs-generated
domain check (:mod:`biaslab.classify.domain`) and summarises over seeds with
:mod:`biaslab.runtime.stats` (t 95 % CI; an infinite Ratio counted in n_inf, never dropped).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from biaslab.classify import (GenderObjectClassifier, attribute_leakage, classifier_backbones,
                              evaluate, json_record, model_features, object_matrix,
                              object_predictions)
from biaslab.classify import domain as DOM
from biaslab.runtime import stats
from biaslab.runtime.io import json_number, read_parquet
from biaslab.runtime.parallel import map_jobs
from biaslab.runtime.paths import model_dir, slug

TRAIN = "data/datasets/original.parquet"
SYNTHETIC = "data/datasets/synthetic.parquet"
DOMAIN_KEYS = ("mAP_real", "mAP_generated", "domain_gap", "gender_acc_real",
               "gender_acc_generated", "n_real", "n_generated")
KEYS = ("mAP", "Ratio", "ratio_raw", "Ratio_expected", "Leakage", "LK_M", "LK_D", "gender_acc",
        "masked_gender_acc", "masked_gender_auc", "Leakage_F1", "LK_D_F1", "F1")
#: stored key -> key of biaslab.classify.evaluate's result: metrics/ uses the tables' names
#: (Ratio, Leakage), as metrics/captioning.json does (one key style)
SOURCE = {"Ratio": "ratio", "Ratio_expected": "ratio_expected", "Leakage": "leakage",
          "Leakage_std": "leakage_std", "Leakage_F1": "leakage_F1"}
COUNTS = ("n_man", "n_woman", "n_both", "n_neither")
CSV_KEYS = ("mAP", "Ratio", "Ratio_expected", "Leakage", "LK_M", "LK_D")


def train_table(path: str = TRAIN) -> pd.DataFrame:
    """The training images T of the Leakage attackers: the ORIGINAL manifest's real rows with a
    female/male gender and at least one object (labelled), one per image_id.

    Raises:
        InputError: ``path`` missing or not a readable parquet file."""
    m = read_parquet(path)
    if "counterfactual" in m.columns:
        m = m[~m["counterfactual"].fillna(False).astype(bool)]
    m = m[m["gender"].isin(["female", "male"])].drop_duplicates("image_id")
    labelled = m["objects"].apply(lambda v: v is not None and len(v) > 0)
    return m[labelled.to_numpy()].reset_index(drop=True)


def table1_images(prep: str = "data/prepared") -> tuple[pd.DataFrame, pd.DataFrame,
                                                       pd.DataFrame, pd.DataFrame]:
    """``(test, train, persons, objects)``: Table 1's test images
    (:func:`biaslab.classify.test_table` of the split) and the Leakage attackers' labelled
    training images (:func:`train_table`), with the prepared persons and objects tables.

    Raises:
        InputError: no test image with a female/male label, or no labelled training image.
    """
    from biaslab.classify import test_table
    from biaslab.runtime.io import InputError
    persons = read_parquet(f"{prep}/persons.parquet")
    objects = read_parquet(f"{prep}/objects.parquet")
    test = test_table(read_parquet(f"{prep}/images.parquet"),
                      read_parquet("data/labels/images.parquet"),
                      read_parquet("data/split.parquet"), objects, persons)
    if test.empty:
        raise InputError("data/split.parquet", "no test image with a female/male label")
    train = train_table()
    if train.empty:
        raise InputError(TRAIN, "no labelled female/male training image for the Leakage "
                                "attackers")
    return test, train, persons, objects


def seed_value(r: dict, k: str):
    """A per-seed value for stats.record: Ratio keeps +inf (counted), 0/0 is missing."""
    v = r.get(SOURCE.get(k, k))
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def training_record(config: dict) -> dict:
    """What a row was trained with, for Table 1's baseline line: ``{"lr", "weight_decay",
    "tuning"}``, ``tuning`` None for the fixed settings, else ``{"n_trials", "seed",
    "criterion", "chosen"}`` of :mod:`biaslab.classify.tune` (the trials themselves stay in
    the model's config)."""
    t = config.get("tuning")
    return {"lr": config.get("lr"), "weight_decay": config.get("weight_decay"),
            "tuning": None if not t else {k: t.get(k) for k in
                                          ("n_trials", "seed", "criterion", "chosen")}}


def domain_row(per_seed: list[dict], seeds) -> dict:
    """One model's domain check: a record over seeds per ``DOMAIN_KEYS`` and ``per_seed``."""
    return {**{k: json_record([d.get(k) for d in per_seed]) for k in DOMAIN_KEYS},
            "per_seed": [{"seed": int(s), **{k: json_number(d.get(k)) for k in DOMAIN_KEYS}}
                         for s, d in zip(seeds, per_seed)]}


def backbone_rows(backbone: str, names, seeds, results: dict) -> tuple[dict, list[dict]]:
    """``({name: record per KEY, method, per_seed, ...}, csv rows)`` of one backbone's models
    from ``results[(backbone, name, seed)]``."""
    out, rows = {}, []
    for dataset in names:
        per_seed = [results[(backbone, dataset, int(s))] for s in seeds]
        out[dataset] = {k: json_record([seed_value(s["raw"], k) for s in per_seed]) for k in KEYS}
        out[dataset]["method"] = per_seed[0]["method"]
        out[dataset]["training"] = per_seed[0].get("training")
        na = {s["raw"]["ratio_na"] for s in per_seed if s["raw"].get("ratio_na")}
        if na:
            out[dataset]["ratio_na"] = sorted(na)[0]
        out[dataset]["per_seed"] = [
            # infinite values as "inf" (stats.to_json), so differences count them
            {"seed": s["seed"], **{k: stats.to_json(seed_value(s["raw"], k), 4) for k in
                                   (*KEYS, "Leakage_std")},
             "ratio_flag": s["raw"].get("ratio_flag"),
             "leakage_F1_clamped": s["raw"].get("leakage_F1_clamped"),
             **{k: s["raw"].get(k) for k in COUNTS},
             "n_labels": s["n_labels"], "n_map_labels": s["raw"].get("n_map_labels")}
            for s in per_seed]
        rows.append({"dataset": dataset,
                     **{f"{k}_{f}": out[dataset][k][f] for k in CSV_KEYS
                        for f in ("mean", "ci95", "std")},
                     "Ratio_n_inf": out[dataset]["Ratio"]["n_inf"],
                     "n_seeds": len(per_seed)})
    return out, rows


ATTRIBUTE_KEYS = (("Leakage", "leakage"), ("LK_M", "LK_M"), ("LK_D", "LK_D"),
                  ("Leakage_F1", "leakage_F1"), ("LK_D_F1", "LK_D_F1"), ("F1", "F1"))


def attribute_rows(attribute: str, group_names, names, seeds, per_job: list[dict],
                   test: pd.DataFrame, test_groups, train_groups) -> dict:
    """The ``attribute`` block of ``metrics/classification.json``: ``{"name",
    "groups", "n_test_labelled_by_group", "n_train_by_group", "rows": {model: {"Leakage",
    "LK_M", "LK_D", "Leakage_F1", "LK_D_F1", "F1": record over seeds, "per_seed"}}}`` (x100;
    Leakage = LK_M - LK_D, paper 000 Eq. 7; Leakage_F1 = LK_M - LK_D_F1, the accuracy-matched
    leakage of Wang et al. 2019, None without ``leakage.f1_flips``).

    Args:
        per_job: evaluate_one's results in ``names`` x ``seeds`` order (each with an
            ``"attribute"`` dict from :func:`biaslab.classify.attribute_leakage`)."""
    lab = test["labelled"].to_numpy(bool)
    count = {g: 0 for g in group_names}
    for g, ok in zip(test_groups, lab):
        if ok and g in count:
            count[g] += 1
    train_count = {g: sum(1 for x in train_groups if x == g) for g in group_names}
    out: dict = {"name": attribute, "groups": list(group_names),
                 "n_test_labelled_by_group": count, "n_train_by_group": train_count,
                 "rows": {}}
    k = 0
    for n in names:
        rows = []
        for s in seeds:
            rows.append((int(s), per_job[k]["attribute"] or {}))
            k += 1
        rec = {key: json_record([r.get(src) for _, r in rows]) for key, src in ATTRIBUTE_KEYS}
        rec["per_seed"] = [{"seed": s, **{key: json_number(r.get(src))
                                          for key, src in ATTRIBUTE_KEYS},
                            **({"leakage_error": r["leakage_error"]}
                               if r.get("leakage_error") else {})} for s, r in rows]
        out["rows"][n] = rec
    return out


@dataclass(frozen=True)
class ClassificationSettings:
    """Everything :func:`evaluate_classifiers` reads, built once by stage ``eval_classifier``
    (:meth:`from_params`).

    Attributes:
        datasets: the training sets (``classifier.datasets``); methods: the model-level
            methods (``classifier.methods``, trained on Original); seeds: ``classifier.seeds``.
        backbones: Table 1's backbones, the primary first
            (:func:`biaslab.classify.classifier_backbones`).
        base_backbone: the backbone of the cached base features (``features.backbone``);
            feature_batch_size: ``features.batch_size``; executor: ``executor``.
        workers: models evaluated at once (``classifier.workers``).
        leakage_rounds: Leakage's balanced rounds; leakage_f1_flips: the flip levels of the
            accuracy-matched LK_D (Wang et al. 2019; () = off).
        blackout, blackout_dilate_px, blackout_fill: the person masks of Ratio's test images
            (``classifier.blackout*``: the mask sources, their dilation in pixels, the fill).
        min_cooccur, cooccur_rule: the object-attribute rule of the label set (recorded).
    """
    datasets: tuple[str, ...]
    seeds: tuple[int, ...]
    backbones: tuple[str, ...]
    methods: tuple[str, ...] = ()
    base_backbone: str = "efficientnet_lite0"
    feature_batch_size: int = 32
    executor: Any = None
    workers: int | None = 1
    leakage_rounds: int = 5
    leakage_f1_flips: tuple[float, ...] = ()
    blackout: tuple[str, ...] = ("box",)
    blackout_dilate_px: int = 0
    blackout_fill: Any = 0
    min_cooccur: int = 0
    cooccur_rule: str = "each"

    @property
    def names(self) -> list[str]:
        """The evaluated rows: the training sets, then the methods not among them."""
        return list(self.datasets) + [m for m in self.methods if m not in self.datasets]

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "ClassificationSettings":
        """From the composed params (``classifier``, ``features``, ``executor``)."""
        p, fp = params["classifier"], params.get("features") or {}
        return cls(datasets=tuple(p["datasets"]), seeds=tuple(int(s) for s in p["seeds"]),
                   backbones=tuple(classifier_backbones(params)),
                   methods=tuple(p.get("methods") or ()),
                   base_backbone=fp.get("backbone", "efficientnet_lite0"),
                   # encoding batch (1: fastest on CPU, one thread)
                   feature_batch_size=int(fp.get("batch_size") or 32),
                   executor=params.get("executor"), workers=p.get("workers", 1),
                   leakage_rounds=int(p.get("leakage_rounds", 5)),
                   leakage_f1_flips=tuple(float(x) for x in (p.get("leakage_f1_flips") or ())),
                   blackout=tuple(p.get("blackout", ["box"])),
                   blackout_dilate_px=int(p.get("blackout_dilate_px", 0)),
                   blackout_fill=p.get("blackout_fill", 0),
                   min_cooccur=int(p["min_cooccur"]),
                   cooccur_rule=p.get("cooccur_rule", "each"))


def evaluate_classifiers(settings: ClassificationSettings, test: pd.DataFrame,
                         masked: pd.DataFrame, train: pd.DataFrame, original: pd.DataFrame,
                         generated: pd.DataFrame, manifests: dict, ids, base: np.ndarray,
                         cache: str, attribute: str = "gender",
                         groups: dict | None = None) -> tuple[dict, list[dict]]:
    """Every trained classifier of the settings' training sets and methods (each seed, each
    backbone) on the test split.

    Args:
        settings: :class:`ClassificationSettings` (the stage builds it from params.yaml).
        test: :func:`biaslab.classify.test_table` of the test split (non-empty).
        masked: the test images with every person blacked out
            (:func:`biaslab.classify.write_blackout_images`), for Ratio.
        train: :func:`train_table`, the Leakage attackers' training images (non-empty).
        original, generated: ``data/datasets/original.parquet`` and
            ``data/datasets/synthetic.parquet``.
        manifests: {dataset: ``data/datasets/<dataset>.parquet``} for every training set
            (a method trained on Original uses ``original``).
        ids, base: :func:`biaslab.models.features.load_features` (image ids, base features).
        cache: the feature cache directory.
        attribute, groups: the run's protected attribute (param ``attribute``) and
            ``{image_id: group}`` (:func:`biaslab.analysis.attribute_eval.group_labels`); for
            an attribute other than gender every model of the first backbone also gets that
            attribute's Leakage (:func:`biaslab.classify.attribute_leakage`, paper 000
            appendix B), in the record's ``attribute`` block. None / gender: nothing added.

    Returns:
        ``(record, csv_rows)``: the record of ``metrics/classification.json`` and the rows of
        ``plots/classification.csv``.
    """
    st = settings
    fbs, base_backbone = st.feature_batch_size, st.base_backbone
    backbones = list(st.backbones)
    seeds = list(st.seeds)
    lk = {"rounds": st.leakage_rounds, "seed": 0,
          # Wang et al. 2019's accuracy-matched LK_D; [] = off
          "f1_flips": st.leakage_f1_flips}
    names = st.names
    other = groups if attribute != "gender" and groups is not None else None
    if other is not None:
        from biaslab.analysis.attribute_eval import attribute_groups
        group_names = attribute_groups(attribute)
        test_g = [other.get(int(i)) for i in test["image_id"]]
        train_g = [other.get(int(i)) for i in train["image_id"]]

    def variant(b: str) -> str | None:
        return None if b == backbones[0] else b

    # the real-vs-generated domain check (biaslab.classify.domain): every
    # model on the real photos and the generated counterfactuals of the sources it never
    # trained on
    # the same-group counterfactuals only: the same scene and the same gender, only the person
    # re-generated, so a gap is the domain's and not the swapped gender's
    # (a skin-tone run: the same perceived group; an image without one has none)
    col = "group" if "group" in generated.columns and "group" in original.columns \
        else "gender"
    src_gender = dict(zip(original["image_id"].astype(np.int64), original[col]))
    generated = generated[[src_gender.get(int(i)) == g for i, g in
                           zip(generated["image_id"], generated[col])]] \
        .reset_index(drop=True)
    manifests = {n: manifests[n] if n in st.datasets else original for n in names}
    universe = original["image_id"].astype(np.int64).unique()
    # derived images encoded once per backbone, before the fork (workers then read the cache);
    # the first backbone's features of the counterfactuals also feed the domain probe
    gen_feats = None
    for b in backbones:
        if not len(masked) and not len(generated):
            break
        clf0 = GenderObjectClassifier.load(model_dir("classifier", names[0], seeds[0],
                                                     variant(b)))
        kw0 = dict(derived=True, batch_size=fbs, base_backbone=base_backbone,
                   executor=st.executor)
        if len(masked):
            model_features(clf0, masked, ids, base, cache, **kw0)
        if len(generated):
            f = model_features(clf0, generated, ids, base, cache, **kw0)
            gen_feats = f if b == backbones[0] else gen_feats

    def evaluate_one(job: tuple[str, str, int]) -> dict:
        backbone, dataset, seed = job
        clf = GenderObjectClassifier.load(model_dir("classifier", dataset, seed,
                                                    variant(backbone)))
        kw = dict(batch_size=fbs, base_backbone=base_backbone)
        feats = model_features(clf, test, ids, base, cache, **kw)
        mfeats = model_features(clf, masked, ids, base, cache, derived=True,
                                **kw) if len(masked) else None
        tfeats = model_features(clf, train, ids, base, cache, **kw)
        r = evaluate(clf, feats, object_matrix(test["objects"], clf.labels),
                     test["labelled"].to_numpy(), test["gender"].tolist(), mfeats,
                     masked_genders=masked["gender"].tolist(),
                     train_feats=tfeats, train_objects=object_matrix(train["objects"],
                                                                     clf.labels),
                     train_genders=train["gender"].tolist(), leakage_kwargs=lk)
        att = None
        if other is not None and backbone == backbones[0]:
            att = attribute_leakage(
                object_predictions(clf, clf.predict_proba(feats)),
                object_matrix(test["objects"], clf.labels), test["labelled"].to_numpy(), test_g,
                object_predictions(clf, clf.predict_proba(tfeats)),
                object_matrix(train["objects"], clf.labels), train_g, group_names, lk)
        dom = None
        if backbone == backbones[0] and len(generated):
            unseen = DOM.unseen_sources(manifests[dataset], universe,
                                        clf.config.get("val_fraction", 0.0), seed)
            sides = []
            for table, derived in ((original, False), (generated, True)):
                t = table[table["image_id"].astype(np.int64).isin(unseen)]
                q = clf.predict_proba(model_features(clf, t, ids, base, cache, derived=derived,
                                                     **kw)) if len(t) else \
                    np.zeros((0, len(clf.outputs)))
                sides.append(DOM.scores(q, t["objects"], t["gender"], clf.labels,
                                        clf.has_gender))
            dom = DOM.domain_gap(*sides)
        return {"seed": int(seed), "raw": r, "n_labels": len(clf.labels),
                "labels": list(clf.labels),
                "method": clf.config.get("method", "erm"), "domain": dom, "attribute": att,
                "training": training_record(clf.config)}

    # one job per (backbone, model, seed) on classifier.workers processes; results in job order
    jobs = [(b, d, int(s)) for b in backbones for d in names for s in seeds]
    results = dict(zip(jobs, map_jobs(evaluate_one, jobs, st.workers)))
    out, rows = backbone_rows(backbones[0], names, seeds, results)
    extra = {}
    for b in backbones[1:]:
        extra[slug(b)], more = backbone_rows(b, names, seeds, results)
        rows += [{"backbone": slug(b), **r} for r in more]
    if extra:
        rows = [r if "backbone" in r else {"backbone": slug(backbones[0]), **r} for r in rows]
        out["backbones"] = extra
    n_m = int((masked["gender"] == "male").sum()) if len(masked) else 0
    n_f = int((masked["gender"] == "female").sum()) if len(masked) else 0
    out["test_set"] = {"n_test": int(len(test)), "n_labelled": int(test["labelled"].sum()),
                       "n_masked": int(len(masked)), "n_male": n_m, "n_female": n_f,
                       "ratio_gt": round(n_m / n_f, 4) if n_f else None,
                       "mean_masked_fraction": json_number(float(masked["masked_fraction"].mean())
                                                           if len(masked) else None),
                       "blackout": list(st.blackout),
                       "backbone": backbones[0]}
    if len(generated):
        gen_ids = generated["image_id"].astype(np.int64).to_numpy()
        known = set(universe.tolist())
        real_rows = [k for k, i in enumerate(np.asarray(ids, np.int64)) if int(i) in known]
        out["domain"] = {
            "probe_auc": json_record(DOM.probe_auc(base[real_rows], np.asarray(ids)[real_rows],
                                                   gen_feats, gen_ids)),
            "n_real_images": len(real_rows), "n_generated_images": int(len(generated)),
            **{n: domain_row([results[(backbones[0], n, int(s))]["domain"] or {}
                               for s in seeds], seeds) for n in names}}
    if other is not None:
        out["attribute"] = attribute_rows(attribute, group_names, names, seeds,
                                          [results[(backbones[0], n, int(s))]
                                           for n in names for s in seeds], test,
                                          test_g, train_g)
    # paper 000 app. B.1: the attributes (objects co-occurring with woman / man) it lists
    first = results[(backbones[0], names[0], int(seeds[0]))]
    out["attributes"] = {"model": names[0], "n": len(first["labels"]),
                         "names": first["labels"], "min_cooccur": st.min_cooccur,
                         "cooccur_rule": st.cooccur_rule}
    out["leakage_train"] = {"n_images": int(len(train)),
                            "n_male": int((train["gender"] == "male").sum()),
                            "n_female": int((train["gender"] == "female").sum()),
                            "rounds": lk["rounds"]}
    return out, rows
