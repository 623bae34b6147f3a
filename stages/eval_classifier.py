"""Stage `eval_classifier`: mAP, Ratio and Leakage (paper 000 sec. 3.1, Table 1) of every
trained classifier on the real test split (biaslab.classify; params `classifier.datasets`,
`classifier.methods` (the model-level baselines trained on Original, one row each after the
datasets), `classifier.seeds`, `classifier.blackout`, `classifier.blackout_dilate_px`,
`classifier.blackout_fill`, `classifier.leakage_rounds`, `classifier.leakage_f1_flips`, `classifier.backbones` (one Table 1
column group per backbone, paper 000 Table 1); `features.backbone` names the base features,
`features.cache_dir` only locates the cache).

Leakage attackers are trained on the ORIGINAL training images (data/datasets/original.parquet,
labelled rows: LK_D on their ground-truth objects, LK_M on each classifier's predictions for
them) and scored on the labelled test images (paper 000 Eq. 7; Wang et al. 2019).
Every metric is summarised over the classifier seeds with biaslab.runtime.stats (t 95 % CI, sample
std; a seed whose Ratio is infinite is counted in n_inf and kept, never dropped).

in:  data/models/classifier/<name>/<name>-<seed>/ for every name in datasets + methods and every
     seed, data/prepared/
     {images,objects,persons}.parquet, data/labels/images.parquet, data/split.parquet,
     data/datasets/ (original: the Leakage attackers' images; every variant: which sources a
     model trained on; synthetic: the generated counterfactuals), data/generate/ (their
     files), data/features/images*.npy
out: data/eval_classifier/masked/ (test images with every person blacked out, for Ratio),
     metrics/classification.json:
       {<name>: {mAP, Ratio, ratio_raw, Ratio_expected (threshold-free: sum P(man) / sum
                 P(woman), symmetrised; biaslab.classify.evaluate.expected_ratio), Leakage,
                 LK_M, LK_D, gender_acc, masked_gender_acc,
                 masked_gender_auc: record {mean, ci95, std, n, n_inf, n_missing, sign},
                 per_seed: [{seed, mAP, Ratio, ratio_raw, ratio_flag, n_man, n_woman,
                             n_both, n_neither, Leakage, LK_M, LK_D, Leakage_std, ...}],
                 method: "erm" | the method name,
                 [ratio_na: why -- only for a model without gender outputs (adversarial):
                  its ratio / gender values are null, counted as missing, ratio_flag "n/a"]},
        [backbones: {<slug of backbone 2..>: {<name>: ...the same...}} -- only when
         classifier.backbones lists more than one; the top-level rows are the first's],
        test_set: {n_test, n_labelled, n_masked, n_male, n_female, ratio_gt, ..., backbone},
        domain: {probe_auc: record over folds (real-vs-generated logistic regression on the
                 frozen features of the train sources, x100), n_real_images, n_generated_images,
                 <name>: {mAP_real, mAP_generated, domain_gap (generated - real), gender_acc_real,
                          gender_acc_generated, n_real, n_generated: record over seeds,
                          per_seed: [{seed, ...the same keys}]}}
                (biaslab.classify.domain, issue 31 item 4: every model on the real photos and
                the same-group generated counterfactuals of the train sources it never trained
                on; first backbone only),
        leakage_train: {n_images, n_labelled, n_male, n_female, rounds}}
     (per-seed values as biaslab.runtime.stats.to_json: an infinite Ratio / ratio_raw is "inf", 0/0
     is null; ratio_flag says why: "r=inf", "r=0" -- both an infinite Ratio -- or "0/0"),
     plots/classification.csv (one row per model name (and backbone, with several): mean,
     ci95, std of mAP, Ratio, Leakage)
"""
import math
import sys

import numpy as np
import pandas as pd

from biaslab.runtime import stats
from biaslab.classify import (GenderObjectClassifier, classifier_backbones, evaluate,
                              json_record, model_features, object_matrix, test_table,
                              write_blackout_images)
from biaslab.classify import domain as DOM
from biaslab.models.features import load_features, set_threads
from biaslab.runtime.io import (InputError, atomic_path, json_number, load_params, read_parquet,
                                write_json)
from biaslab.runtime.parallel import map_jobs
from biaslab.runtime.paths import model_dir, slug

PREP = "data/prepared"
TRAIN = "data/datasets/original.parquet"
SYNTHETIC = "data/datasets/synthetic.parquet"
DOMAIN_KEYS = ("mAP_real", "mAP_generated", "domain_gap", "gender_acc_real",
               "gender_acc_generated", "n_real", "n_generated")
KEYS = ("mAP", "Ratio", "ratio_raw", "Ratio_expected", "Leakage", "LK_M", "LK_D", "gender_acc",
        "masked_gender_acc", "masked_gender_auc", "Leakage_F1", "LK_D_F1", "F1")
#: stored key -> key of biaslab.classify.evaluate's result: metrics/ uses the tables' names
#: (Ratio, Leakage), as metrics/captioning.json does (issue 14: one key style)
SOURCE = {"Ratio": "ratio", "Ratio_expected": "ratio_expected", "Leakage": "leakage",
          "Leakage_std": "leakage_std", "Leakage_F1": "leakage_F1"}
COUNTS = ("n_man", "n_woman", "n_both", "n_neither")
CSV_KEYS = ("mAP", "Ratio", "Ratio_expected", "Leakage", "LK_M", "LK_D")


def train_table(path: str = TRAIN) -> pd.DataFrame:
    """The training images T of the Leakage attackers: the ORIGINAL manifest's real rows with a
    female/male gender and at least one object (labelled), one per image_id."""
    m = read_parquet(path)
    if "counterfactual" in m.columns:
        m = m[~m["counterfactual"].fillna(False).astype(bool)]
    m = m[m["gender"].isin(["female", "male"])].drop_duplicates("image_id")
    labelled = m["objects"].apply(lambda v: v is not None and len(v) > 0)
    return m[labelled.to_numpy()].reset_index(drop=True)


def _value(r: dict, k: str):
    """A per-seed value for stats.record: Ratio keeps +inf (counted), 0/0 is missing."""
    v = r.get(SOURCE.get(k, k))
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def _domain_row(per_seed: list[dict], seeds) -> dict:
    """One model's domain check: a record over seeds per ``DOMAIN_KEYS`` and ``per_seed``."""
    return {**{k: json_record([d.get(k) for d in per_seed]) for k in DOMAIN_KEYS},
            "per_seed": [{"seed": int(s), **{k: json_number(d.get(k)) for k in DOMAIN_KEYS}}
                         for s, d in zip(seeds, per_seed)]}


def _rows(backbone: str, names, seeds, results: dict) -> tuple[dict, list[dict]]:
    """``({name: record per KEY, method, per_seed, ...}, csv rows)`` of one backbone's models
    from ``results[(backbone, name, seed)]``."""
    out, rows = {}, []
    for dataset in names:
        per_seed = [results[(backbone, dataset, int(s))] for s in seeds]
        out[dataset] = {k: json_record([_value(s["raw"], k) for s in per_seed]) for k in KEYS}
        out[dataset]["method"] = per_seed[0]["method"]
        na = {s["raw"]["ratio_na"] for s in per_seed if s["raw"].get("ratio_na")}
        if na:
            out[dataset]["ratio_na"] = sorted(na)[0]
        out[dataset]["per_seed"] = [
            # infinite values as "inf" (stats.to_json), so differences count them
            {"seed": s["seed"], **{k: stats.to_json(_value(s["raw"], k), 4) for k in
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


def main() -> None:
    params = load_params()
    p = params["classifier"]
    fp = params.get("features", {})
    cache = fp.get("cache_dir", "data/cache/features")
    fbs = int(fp.get("batch_size") or 32)   # encoding batch (1: fastest on CPU, one thread)
    set_threads(p.get("threads", 1))
    persons = read_parquet(f"{PREP}/persons.parquet")
    test = test_table(read_parquet(f"{PREP}/images.parquet"),
                      read_parquet("data/labels/images.parquet"),
                      read_parquet("data/split.parquet"), read_parquet(f"{PREP}/objects.parquet"),
                      persons)
    if test.empty:
        raise InputError("data/split.parquet", "no test image with a female/male label")
    train = train_table()
    if train.empty:
        raise InputError(TRAIN, "no labelled female/male training image for the Leakage "
                                "attackers")
    masked = write_blackout_images(test, persons, "data/eval_classifier/masked",
                                   sources=tuple(p.get("blackout", ["box"])),
                                   dilate_px=int(p.get("blackout_dilate_px", 0)),
                                   fill=p.get("blackout_fill", 0), progress=True)
    ids, base = load_features()
    base_backbone = fp.get("backbone", "efficientnet_lite0")
    backbones = classifier_backbones(params)
    lk = {"rounds": int(p.get("leakage_rounds", 5)), "seed": 0,
          # Wang et al. 2019's accuracy-matched LK_D (issue 31 item 4); [] = off
          "f1_flips": tuple(float(x) for x in (p.get("leakage_f1_flips") or ()))}
    names = list(p["datasets"]) + [m for m in (p.get("methods") or [])
                                   if m not in p["datasets"]]

    def variant(b: str) -> str | None:
        return None if b == backbones[0] else b

    # the real-vs-generated domain check (issue 31 item 4; biaslab.classify.domain): every
    # model on the real photos and the generated counterfactuals of the sources it never
    # trained on
    original = read_parquet(TRAIN)
    generated = read_parquet(SYNTHETIC)
    # the same-group counterfactuals only: the same scene and the same gender, only the person
    # re-generated, so a gap is the domain's and not the swapped gender's
    src_gender = dict(zip(original["image_id"].astype(np.int64), original["gender"]))
    generated = generated[[src_gender.get(int(i)) == g for i, g in
                           zip(generated["image_id"], generated["gender"])]] \
        .reset_index(drop=True)
    manifests = {n: read_parquet(f"data/datasets/{n}.parquet") if n in p["datasets"]
                 else original for n in names}
    universe = original["image_id"].astype(np.int64).unique()
    # derived images encoded once per backbone, before the fork (workers then read the cache);
    # the first backbone's features of the counterfactuals also feed the domain probe
    gen_feats = None
    for b in backbones:
        if not len(masked) and not len(generated):
            break
        clf0 = GenderObjectClassifier.load(model_dir("classifier", names[0], p["seeds"][0],
                                                     variant(b)))
        kw0 = dict(derived=True, batch_size=fbs, base_backbone=base_backbone,
                   executor=params.get("executor"))
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
                "method": clf.config.get("method", "erm"), "domain": dom}

    # one job per (backbone, model, seed) on classifier.workers processes; results in job order
    jobs = [(b, d, int(s)) for b in backbones for d in names for s in p["seeds"]]
    results = dict(zip(jobs, map_jobs(evaluate_one, jobs, p.get("workers", 1))))
    out, rows = _rows(backbones[0], names, p["seeds"], results)
    extra = {}
    for b in backbones[1:]:
        extra[slug(b)], more = _rows(b, names, p["seeds"], results)
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
                       "blackout": list(p.get("blackout", ["box"])),
                       "backbone": backbones[0]}
    if len(generated):
        gen_ids = generated["image_id"].astype(np.int64).to_numpy()
        known = set(universe.tolist())
        real_rows = [k for k, i in enumerate(np.asarray(ids, np.int64)) if int(i) in known]
        out["domain"] = {
            "probe_auc": json_record(DOM.probe_auc(base[real_rows], np.asarray(ids)[real_rows],
                                                   gen_feats, gen_ids)),
            "n_real_images": len(real_rows), "n_generated_images": int(len(generated)),
            **{n: _domain_row([results[(backbones[0], n, int(s))]["domain"] or {}
                               for s in p["seeds"]], p["seeds"]) for n in names}}
    # paper 000 app. B.1: the attributes (objects co-occurring with woman / man) it lists
    first = results[(backbones[0], names[0], int(p["seeds"][0]))]
    out["attributes"] = {"model": names[0], "n": len(first["labels"]),
                         "names": first["labels"], "min_cooccur": int(p["min_cooccur"]),
                         "cooccur_rule": p.get("cooccur_rule", "each")}
    out["leakage_train"] = {"n_images": int(len(train)),
                            "n_male": int((train["gender"] == "male").sum()),
                            "n_female": int((train["gender"] == "female").sum()),
                            "rounds": lk["rounds"]}
    write_json("metrics/classification.json", out)
    with atomic_path("plots/classification.csv") as tmp:
        pd.DataFrame(rows).to_csv(tmp, index=False)
    for r in rows:
        print({k: (round(v, 2) if isinstance(v, float) and np.isfinite(v) else v)
               for k, v in r.items()})


if __name__ == "__main__":
    try:
        main()
    except InputError as e:
        sys.exit(f"eval_classifier: {e}")
