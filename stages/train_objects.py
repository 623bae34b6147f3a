"""Stage `train_objects`: offline object predictor eta for object consistency (paper 000 Eq. 5;
params `objects`, plus `features.backbone` / `features.image_size` recorded in the model).

in:  data/features/images.npy, data/features/images_ids.npy, data/prepared/objects.parquet,
     data/split.parquet
out: data/objects/ (objects_config.json + objects_head.safetensors;
     biaslab.models.objects.load_object_predictor), metrics/objects.json (test macro mAP, F1 of the
     predicted vs labelled object sets, counts)
"""

import numpy as np

from biaslab.models.features import load_features, set_threads, split_rows
from biaslab.runtime.io import (InputError, load_params, read_parquet, run_stage, stage_parser,
                                write_json)
from biaslab.models.objects import (frequent_categories, mean_average_precision, object_f1,
                                    object_label_matrix, train_object_predictor)
from biaslab.models.settings import ObjectsSettings
from biaslab.runtime.settings import from_params


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()
    p = params["objects"]
    # the group also holds threads (checked at the stage's start)
    s = from_params(ObjectsSettings, p, "objects", unknown="ignore")
    fp = params.get("features", {})
    set_threads(p.get("threads", 1))  # tiny matmuls: 1 thread is fastest on shared CPUs
    ids, feats = load_features()
    objects = read_parquet("data/prepared/objects.parquet")
    split = read_parquet("data/split.parquet")
    if s.labelled_only:  # images whose object set is known (see biaslab.models.objects)
        keep = np.isin(ids, objects["image_id"].unique())
        ids, feats = ids[keep], feats[keep]
    train, val, test = (split_rows(split, ids, s) for s in ("train", "val", "test"))
    cats = frequent_categories(objects, ids[train], s.min_count)
    if not cats:
        raise InputError("data/prepared/objects.parquet",
                         f"no category has >= {s.min_count} positive training images "
                         f"(lower objects.min_count)")
    y, cats = object_label_matrix(objects, ids, cats)
    pred, hist = train_object_predictor(
        feats, y, cats, train, val, settings=s,
        image_encoder=fp.get("backbone", "efficientnet_lite0"),
        image_size=fp.get("image_size", 224))
    pred.save("data/objects")

    prob = pred.predict_proba(feats[test])
    m, ap = mean_average_precision(y[test], prob)
    sets = pred.predict_sets(feats[test])
    truth = [{c for c, v in zip(cats, r) if v} for r in y[test]]
    f1 = [object_f1(s, t) for s, t in zip(sets, truth)]
    write_json("metrics/objects.json", {
        "test_mAP": round(m, 4), "test_classes_with_positives": int(np.isfinite(ap).sum()),
        "chance_mAP": round(float(np.nanmean(np.where(np.isfinite(ap),
                                                      y[test].mean(0), np.nan))), 4),
        "test_set_F1": round(float(np.mean(f1)), 4),
        "mean_predicted_objects": round(float(np.mean([len(s) for s in sets])), 3),
        "mean_true_objects": round(float(np.mean([len(t) for t in truth])), 3),
        "n_categories": len(cats), "n_train": int(len(train)), "n_val": int(len(val)),
        "n_test": int(len(test)), "final_loss": round(hist[-1]["loss"], 4)})
    print(f"objects: {len(cats)} categories, test mAP {m:.3f}, set F1 {np.mean(f1):.3f}")
    return 0


if __name__ == "__main__":
    run_stage(main)
