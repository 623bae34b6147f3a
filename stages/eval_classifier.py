"""Stage `eval_classifier`: mAP, Ratio and Leakage (paper 000 sec. 3.1, Table 1) of every
trained classifier on the real test split (biaslab.classify; params `classifier.datasets`,
`classifier.seeds`, `classifier.blackout`, `classifier.blackout_dilate_px`,
`classifier.blackout_fill`, `classifier.leakage_rounds`; `features.cache_dir` only locates
the cache).

in:  data/models/classifier/<dataset>-<seed>/ for every dataset x seed, data/prepared/
     {images,objects,persons}.parquet, data/labels/images.parquet, data/split.parquet,
     data/features/images*.npy
out: data/eval_classifier/masked/ (test images with every person blacked out, for Ratio),
     metrics/classification.json ({dataset: {mAP_mean, mAP_std, ratio_mean, ratio_std,
     leakage_mean, leakage_std, ..., ratio_undefined, per_seed: [...]}, test_set: {...}};
     ratio_mean/std over the seeds with a finite Ratio),
     plots/classification.csv (one row per dataset: means and stds, for bar plots)
"""
import sys
import time

import pandas as pd

from biaslab.classify import (GenderObjectClassifier, evaluate, model_features, object_matrix,
                              summarize, test_table, write_blackout_images)
from biaslab.features import load_features, set_threads
from biaslab.io import InputError, json_number, atomic_path, load_params, read_parquet, write_json

PREP = "data/prepared"
KEYS = ("mAP", "ratio", "leakage", "LK_M", "LK_D", "gender_acc", "masked_gender_acc",
        "masked_gender_auc")


def main() -> None:
    params = load_params()
    p = params["classifier"]
    fp = params.get("features", {})
    cache = fp.get("cache_dir", "data/cache/features")
    set_threads(p.get("threads", 1))
    persons = read_parquet(f"{PREP}/persons.parquet")
    test = test_table(read_parquet(f"{PREP}/images.parquet"),
                      read_parquet("data/labels/images.parquet"),
                      read_parquet("data/split.parquet"), read_parquet(f"{PREP}/objects.parquet"),
                      persons)
    if test.empty:
        raise InputError("data/split.parquet", "no test image with a female/male label")
    masked = write_blackout_images(test, persons, "data/eval_classifier/masked",
                                   sources=tuple(p.get("blackout", ["box"])),
                                   dilate_px=int(p.get("blackout_dilate_px", 0)),
                                   fill=p.get("blackout_fill", 0), progress=True)
    ids, base = load_features()
    lk = {"rounds": int(p.get("leakage_rounds", 5)), "seed": 0}
    out, rows = {}, []
    for dataset in p["datasets"]:
        per_seed = []
        for seed in p["seeds"]:
            t0 = time.perf_counter()
            clf = GenderObjectClassifier.load(f"data/models/classifier/{dataset}-{seed}")
            feats = model_features(clf, test, ids, base, cache)
            mfeats = model_features(clf, masked, ids, base, cache, derived=True) \
                if len(masked) else None
            y = object_matrix(test["objects"], clf.labels)
            r = evaluate(clf, feats, y, test["labelled"].to_numpy(), test["gender"].tolist(),
                         mfeats, masked_genders=masked["gender"].tolist(), leakage_kwargs=lk)
            rec = {"seed": int(seed), **{k: json_number(r.get(k)) for k in
                                         (*KEYS, "ratio_raw", "leakage_std")},
                   "n_man": r.get("n_man"), "n_woman": r.get("n_woman"),
                   "n_labels": len(clf.labels), "n_map_labels": r.get("n_map_labels"),
                   "seconds": round(time.perf_counter() - t0, 2)}
            per_seed.append(rec)
        out[dataset] = {**{k: json_number(v) for k, v in summarize(per_seed, KEYS).items()},
                        # seeds whose masked predictions are all one gender: r = 0 or inf
                        "ratio_undefined": sum(r["ratio"] is None for r in per_seed),
                        "per_seed": per_seed}
        rows.append({"dataset": dataset, **{k: out[dataset][k] for k in
                                            ("mAP_mean", "mAP_std", "ratio_mean", "ratio_std",
                                             "leakage_mean", "leakage_std")}})
    n_m = int((masked["gender"] == "male").sum()) if len(masked) else 0
    n_f = int((masked["gender"] == "female").sum()) if len(masked) else 0
    out["test_set"] = {"n_test": int(len(test)), "n_labelled": int(test["labelled"].sum()),
                       "n_masked": int(len(masked)), "n_male": n_m, "n_female": n_f,
                       "ratio_gt": round(n_m / n_f, 4) if n_f else None,
                       "mean_masked_fraction": json_number(float(masked["masked_fraction"].mean())
                                                  if len(masked) else None),
                       "blackout": list(p.get("blackout", ["box"]))}
    write_json("metrics/classification.json", out)
    with atomic_path("plots/classification.csv") as tmp:
        pd.DataFrame(rows).to_csv(tmp, index=False)
    for r in rows:
        print(r)



if __name__ == "__main__":
    try:
        main()
    except InputError as e:
        sys.exit(f"eval_classifier: {e}")
