"""Feature sensitivity of every trained classifier (the logic of stage ``sensitivity``, which
only reads its inputs and writes its files; the record's layout is in
``stages/sensitivity.py``'s docstring). Definitions: :mod:`biaslab.analysis.sensitivity`;
the perturbed images: :mod:`biaslab.analysis.perturb`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from tqdm import tqdm

from biaslab.analysis import controls as K
from biaslab.analysis import perturb as PT
from biaslab.analysis import sensitivity as SE
from biaslab.classify import (GenderObjectClassifier, evaluate_outputs, gender_thresholds,
                              model_features, object_matrix, object_predictions)
from biaslab.runtime.parallel import map_jobs
from biaslab.runtime.io import write_parquet
from biaslab.runtime.paths import model_dir

if TYPE_CHECKING:
    from biaslab.analysis.classification_eval import ClassificationSettings
    from biaslab.analysis.sensitivity_settings import SensitivitySettings

NONE = "none"

def subset(test: pd.DataFrame, max_images: int | None, seed: int) -> pd.DataFrame:
    """The evaluated test images: all of ``test``, or a seeded draw of ``max_images`` of them
    stratified by gender (each gender's share kept), sorted by image_id."""
    if max_images is None or len(test) <= int(max_images):
        return test.reset_index(drop=True)
    frac = int(max_images) / len(test)
    parts = [g.sample(n=max(1, int(round(frac * len(g)))), random_state=int(seed))
             for _, g in test.groupby("gender", sort=True)]
    return pd.concat(parts).sort_values("image_id", ignore_index=True)


def perturbed_truth(test: pd.DataFrame, perturbed: pd.DataFrame, objects: pd.DataFrame,
                    chosen: Mapping[float, set], name: str) -> pd.DataFrame:
    """What the planted truth of each image says after perturbation ``name`` (for the truth-
    reading controls): ``objects@f`` drops a category whose every instance in the image was
    filled; ``swap`` takes the donor's scene, cast and objects (its background); ``blur``
    keeps everything (a blur leaves the planted scene, cast and objects in the image, only
    softer: the annotations a truth reader reads do not change). Returns a copy of ``test``."""
    kind, level = PT.parse_name(name)
    out = test.copy()
    if kind == "objects":
        gone = chosen[float(level)]
        kept = objects[~objects.index.isin(list(gone))]
        still = kept.groupby("image_id")["category"].apply(lambda v: set(map(str, v)))
        out["objects"] = [[o for o in objs if o in still.get(int(i), set())]
                          for i, objs in zip(out["image_id"], out["objects"])]
    elif kind == "swap":
        rows = perturbed[perturbed["perturbation"] == name].set_index("image_id")["donor"]
        src = test.set_index("image_id")
        for col in ("scene", "cast", "objects"):
            out[col] = [src.at[int(rows.get(int(i), -1)), col]
                        if int(rows.get(int(i), -1)) in src.index else v
                        for i, v in zip(out["image_id"], out[col])]
    return out


def control_expectation(kind: str, perturbation: str, changed: bool, metric: str
                        ) -> str | None:
    """The known answer of a truth-reading control's change (``"0"``, ``"<0"``, ``"!=0"``) or
    None where none is known:

    * the person oracle reads only the person: ``"0"`` for every perturbation and metric;
    * the context reader, where what it reads did not change (a blur; an object mask that
      removed no whole category): ``"0"``;
    * the context reader on a swap (it reads the other gender's background): masked AUC
      ``"<0"`` (its calls now point at the other gender); Ratio_E unknown (the folded ratio of
      a mirrored set can stay where it was);
    * the context reader on an object mask that removed evidence: masked AUC ``"!=0"``
      (less evidence moves calls to ties, and which way the AUC goes depends on what was
      left); Ratio_E unknown.
    """
    if kind == "person_oracle" or not changed:
        return "0"
    if metric != "masked_AUC":
        return None
    return "<0" if perturbation == "swap" else "!=0"


def control_sensitivity(test: pd.DataFrame, perturbed: pd.DataFrame, objects: pd.DataFrame,
                        chosen: Mapping[float, set], names: Sequence[str], labels: Sequence[str],
                        bias: float, n_boot: int, seed: int) -> dict:
    """The truth-reading controls' sensitivity against its known answer
    (:func:`control_expectation`, :func:`biaslab.analysis.sensitivity.control_check`). They
    read the annotations, not the pixels: a blur changes nothing they read, so the planted
    truth answers the object masks and the swap, and the pixels' own answer for a blur is
    the trained models' (Original reads the context: the probe). Controls are deterministic:
    one "seed", the bootstrap is over images."""
    male = (test["gender"] == "male").to_numpy()
    out = {}
    for kind in ("person_oracle", "context_reader"):
        name = K.control_name(kind, None, K.ATTRIBUTES)

        def masked(t):
            o = K.classifier_outputs(kind, t, labels, bias=bias)["probs_masked"]
            return o[:, -2], o[:, -1]
        base = masked(test)
        rec = {}
        for pn in names:
            t = perturbed_truth(test, perturbed, objects, chosen, pn)
            pert = masked(t)
            changed = any(a != b for a, b in zip(
                map(tuple, test[["scene", "cast"]].astype(str).to_numpy()),
                map(tuple, t[["scene", "cast"]].astype(str).to_numpy()))) or \
                any(list(a) != list(b) for a, b in zip(test["objects"], t["objects"]))
            rec[pn] = {}
            for m in ("Ratio_E", "masked_AUC"):
                expected = control_expectation(kind, pn, changed, m)
                if expected is None:
                    continue

                def fn(arrs, m=m):
                    return lambda idx: SE.metric_rows(m, arrs, male, idx)
                ch = SE.paired_change([fn(base)], [fn(pert)], len(test), null=SE.NULL[m],
                                      n_boot=n_boot, seed=seed)
                rec[pn][m] = SE.control_check(ch, expected)
        out[name] = rec
    return out


PIXEL_CONTROLS = ("person_oracle_pixels", "context_reader_pixels")


def pixel_expectation(kind: str, perturbation: str, changed: bool, planted: bool
                      ) -> str | None:
    """The known answer of a pixel-reading control's change in AUC (``"0"``, ``"<0"``,
    ``"!=0"``) or None where none is known:

    * ``person_oracle_pixels`` sees only the persons (everything else a constant): every
      perturbation restores the persons to the pixel, so its input, its scores and its AUC
      are unchanged: ``"0"`` exactly, on any data (a check of the whole chain: perturbation,
      pairing, encoding, bootstrap);
    * ``context_reader_pixels`` sees only what is not a person (Table 1's blackout): ``"0"``
      where its input did not change; where a context cue is planted (``planted``): ``"<0"``
      on a swap (it reads the other gender's background), ``"!=0"`` on a blur or an object
      mask (the cue it learnt is degraded; which way the AUC goes depends on what is left);
      on data without a planted cue no answer is known.
    """
    if kind == "person_oracle_pixels" or not changed:
        return "0"
    if not planted:
        return None
    return "<0" if perturbation == "swap" else "!=0"


def fit_reader(features: np.ndarray, male: np.ndarray, seed: int):
    """A gender reader: sklearn's standardised L2 logistic regression (C = 1) fitted on
    ``features`` (float (n, d)) to ``male`` (bool (n,)). Raises ValueError with one class."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    male = np.asarray(male, bool)
    if male.all() or not male.any():
        raise ValueError("the readers' training images hold one gender only")
    return make_pipeline(StandardScaler(), LogisticRegression(
        C=1.0, max_iter=5000, random_state=int(seed))).fit(features, male)


def pixel_controls(train_feats: Mapping[str, tuple[np.ndarray, np.ndarray]],
                   test_feats: Mapping[str, Mapping[str, np.ndarray]], male: np.ndarray,
                   names: Sequence[str], planted: bool, n_boot: int, seed: int) -> dict:
    """The pixel-reading controls' sensitivity against its known answer
    (:func:`pixel_expectation`): each control is a gender reader (:func:`fit_reader`) trained
    on the training images as it sees them and scored by the AUC x100 of P(man) on the test
    set as it sees it, unperturbed and perturbed; the change and its CI are
    :func:`biaslab.analysis.sensitivity.paired_change` (bootstrap over images, one fit).

    Args:
        train_feats: ``{control: (features (n, d), male bool (n,))}`` of the training images
            (persons only for the oracle, persons blacked out for the context reader).
        test_feats: ``{control: {set: features (m, d)}}``, ``set`` ``"none"`` or a perturbation,
            every set the same ``m`` test images in the order of ``male`` (bool (m,)).
        names: the perturbations.
        planted: whether the data plant a context cue (a biaslab synthetic set).

    Returns:
        ``{control: {perturbation: {"AUC": {"expected", "measured", "verdict"}}}}`` (the
        check of :func:`biaslab.analysis.sensitivity.control_check`; ``expected`` None and no
        verdict where no answer is known).
    """
    out = {}
    for kind in PIXEL_CONTROLS:
        reader = fit_reader(*train_feats[kind], seed)
        sets = test_feats[kind]
        p = {k: reader.predict_proba(f)[:, 1].astype(np.float64) for k, f in sets.items()}

        def fn(k):
            return lambda idx: SE.auc_rows(1.0 - p[k], p[k], male, idx)
        rec = {}
        for pn in names:
            ch = SE.paired_change([fn(NONE)], [fn(pn)], len(male), null=SE.NULL["masked_AUC"],
                                  n_boot=n_boot, seed=seed)
            changed = not np.array_equal(sets[NONE], sets[pn])
            expected = pixel_expectation(kind, pn, changed, planted)
            rec[pn] = {"AUC": SE.control_check(ch, expected) if expected is not None
                       else {"expected": None, "measured": ch}}
        out[kind] = rec
    return out


def run_sensitivity(sens: SensitivitySettings, clf_settings: ClassificationSettings,
                    test: pd.DataFrame, train: pd.DataFrame,
                    persons: pd.DataFrame, objects: pd.DataFrame, ids, base: np.ndarray,
                    cache: str, out_dir: Path, truth: dict | None = None,
                    bias: float | None = None) -> tuple[dict, list[dict]]:
    """Every classifier of ``classifier.datasets`` + ``classifier.methods`` (each seed) on the
    unperturbed and perturbed test images.

    Args:
        sens: the perturbations and their statistics (params group ``sensitivity``).
        clf_settings: the trained classifiers, their person masks and feature batch
            (:class:`biaslab.analysis.classification_eval.ClassificationSettings`).
        test: :func:`biaslab.classify.test_table` of the test split with the planted
            ``scene`` / ``cast`` (:func:`biaslab.analysis.controls_eval.with_truth`).
        train: the Leakage attackers' labelled training images (``eval_classifier``'s).
        persons, objects: ``data/prepared/{persons,objects}.parquet``.
        ids, base: :func:`biaslab.models.features.load_features`.
        cache: the feature cache directory.
        out_dir: where the perturbed and masked images are written.
        truth, bias: the planted truth and bias (controls), or None on other data.

    Returns:
        ``(record, csv_rows)``.

    Raises:
        ValueError: a perturbed set whose images differ from the test images.
    """
    s, c = sens, clf_settings
    names = list(s.perturbations)
    test = subset(test, s.max_images, s.seed)
    test = test[test["n_persons"] > 0].reset_index(drop=True)   # nothing to keep intact
    objs = PT.located(objects[objects["image_id"].astype(int).isin(
        set(test["image_id"].astype(int)))])
    chosen = PT.choose_objects(objs, [lv for n in names for k, lv in [PT.parse_name(n)]
                                      if k == "objects"], s.seed)
    pert = PT.write_perturbed(test, persons, objs, names, out_dir / "images",
                              seed=s.seed, fill=s.fill, chosen=chosen,
                              progress=True)
    # the perturbed images' manifest: stage sensitivity_captioner captions the same files
    write_parquet(out_dir / "perturbed.parquet", pert)
    bkw = dict(sources=tuple(c.blackout), dilate_px=c.blackout_dilate_px,
               fill=c.blackout_fill)
    tables = {NONE: test[["image_id", "gender", "path"]]}
    for n in names:
        tables[n] = pert[pert["perturbation"] == n][["image_id", "gender", "path"]] \
            .reset_index(drop=True)
    masked = {k: PT.write_masked(t, persons, out_dir / "masked" / k.replace("@", "_"), **bkw)
              for k, t in tqdm(tables.items(), desc="mask persons", unit="set")}
    for k, t in tables.items():   # every set holds the same images in the same order
        if list(t["image_id"]) != list(test["image_id"]) or \
                list(masked[k]["image_id"]) != list(test["image_id"]):
            raise ValueError(f"perturbation {k}: its images differ from the test images")
    # the pixel controls' inputs: persons only (the oracle), persons blacked out (the
    # context reader), for the test sets and the training images they learn from
    person_only = {k: PT.write_person_only(t, persons, out_dir / "person" / k.replace("@", "_"))
                   for k, t in tables.items()}
    train_sets = {"person_oracle_pixels": PT.write_person_only(train, persons,
                                                               out_dir / "train" / "person"),
                  "context_reader_pixels": PT.write_masked(train, persons,
                                                           out_dir / "train" / "masked", **bkw)}
    for k, t in person_only.items():
        if list(t["image_id"]) != list(test["image_id"]):
            raise ValueError(f"perturbation {k}: its person-only images differ from the test "
                             "images")
    model_names = c.names
    seeds = list(c.seeds)
    kw = dict(batch_size=c.feature_batch_size, base_backbone=c.base_backbone)
    # derived images encoded once, one set per worker (distinct files, distinct cache
    # entries), before the model jobs (which then read the cache)
    clf0 = GenderObjectClassifier.load(model_dir("classifier", model_names[0], seeds[0]))
    sets = [(k, t) for k in tables for t in ((tables[k], masked[k]) if k != NONE
                                             else (masked[k],))]
    sets += [(k, t) for k, t in person_only.items()] + list(train_sets.items())
    map_jobs(lambda kt: model_features(clf0, kt[1], ids, base, cache, derived=True, **kw)
             .shape, sets, s.workers)
    # the attackers re-train on every set: fewer rounds than Table 1's; the change is paired
    # (same rounds, same rows on both sides), so rounds move only its noise
    lk = {"rounds": s.leakage_rounds, "seed": 0}
    male = (test["gender"] == "male").to_numpy()

    def one(job: tuple[str, int]) -> dict:
        d, seed = job
        clf = GenderObjectClassifier.load(model_dir("classifier", d, seed))
        y_test = object_matrix(test["objects"], clf.labels)
        y_train = object_matrix(train["objects"], clf.labels)
        tp = clf.predict_proba(model_features(clf, train, ids, base, cache, **kw))
        res = {"thresholds": gender_thresholds(clf) if clf.has_gender else (0.5, 0.5),
               "masked": {}, "leakage": {}}
        for k in tables:
            probs = clf.predict_proba(model_features(clf, tables[k], ids, base, cache,
                                                     derived=k != NONE, **kw))
            r = evaluate_outputs(probs, y_test, test["labelled"].to_numpy(),
                                 test["gender"].tolist(), None, n_objects=len(clf.labels),
                                 has_gender=clf.has_gender,
                                 object_pred=lambda p: object_predictions(clf, p),
                                 train_probs=tp, train_objects=y_train,
                                 train_genders=train["gender"].tolist(), leakage_kwargs=lk)
            res["leakage"][k] = r.get("leakage")
            if clf.has_gender:
                pm = clf.predict_proba(model_features(clf, masked[k], ids, base, cache,
                                                      derived=True, **kw))
                res["masked"][k] = (pm[:, -2].astype(np.float64), pm[:, -1].astype(np.float64))
        return res

    jobs = [(d, sd) for d in model_names for sd in seeds]
    results = dict(zip(jobs, map_jobs(one, jobs, s.workers)))
    models, rows = {}, []
    for d in model_names:
        models[d] = SE.summarize_model([results[(d, sd)] for sd in seeds], names, male,
                                       n_boot=s.n_boot, seed=s.seed)
        for pn, recs in models[d].items():
            for m, r in recs.items():
                rows.append({"model": d, "perturbation": pn, "metric": m,
                             **{k: r[k] for k in ("base", "perturbed", "delta", "lo", "hi",
                                                  "pct", "pct_lo", "pct_hi", "n_seeds",
                                                  "n_images", "ci_method")}})
    per_set = pert.groupby("perturbation").agg(
        changed_fraction=("changed_fraction", "mean"), n_masked=("n_masked", "sum"),
        n_objects=("n_objects", "sum"), n_swapped=("donor", lambda v: int((v >= 0).sum())))
    record = {
        "available": True, "perturbations": names, "metrics": list(SE.METRICS),
        "models": models,
        "test_set": {"n_images": int(len(test)), "n_male": int(male.sum()),
                     "n_female": int((~male).sum()), "n_object_instances": int(len(objs)),
                     "seeds": seeds},
        "perturbed": {n: {"mean_changed_fraction": float(per_set.at[n, "changed_fraction"]),
                          "n_objects_masked": int(per_set.at[n, "n_masked"]),
                          "n_swapped": int(per_set.at[n, "n_swapped"])} for n in names},
        "fill": s.fill, "seed": s.seed, "n_boot": s.n_boot,
    }
    def feats(t):
        return model_features(clf0, t, ids, base, cache, derived=True, **kw)
    one_gender = [k for k, t in train_sets.items() if t["gender"].nunique() < 2]
    pixels = {} if one_gender else pixel_controls(
        {k: (feats(t), (t["gender"] == "male").to_numpy()) for k, t in train_sets.items()},
        {"person_oracle_pixels": {k: feats(t) for k, t in person_only.items()},
         "context_reader_pixels": {k: feats(t) for k, t in masked.items()}},
        male, names, truth is not None and bias is not None and float(bias) > 0,
        s.n_boot, s.seed)
    record["pixel_controls_training"] = {k: {"n_images": int(len(t)),
                                             "n_male": int((t["gender"] == "male").sum())}
                                         for k, t in train_sets.items()}
    if truth is not None and bias is not None:
        record["controls"] = control_sensitivity(test, pert, objs, chosen, names, clf0.labels,
                                                 bias, s.n_boot, s.seed)
    else:
        record["controls"] = {}
        record["controls_note"] = ("no planted truth: the truth-reading controls need it; the "
                                   "pixel-reading ones run")
    record["controls"].update(pixels)
    if one_gender:
        record["pixel_controls_note"] = ("not run: the training images with persons hold one "
                                         "gender only")
    vs = [m["verdict"] for ctl in record["controls"].values() for p in ctl.values()
          for m in p.values() if "verdict" in m]
    record["controls_summary"] = {v: vs.count(v) for v in sorted(set(vs))}
    return record, rows
