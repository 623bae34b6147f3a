"""Stage `eval_classifier` (biaslab.analysis.classification_eval): mAP, Ratio and Leakage (paper 000 sec. 3.1, Table 1) of every
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
                (biaslab.classify.domain: every model on the real photos and
                the same-group generated counterfactuals of the train sources it never trained
                on; first backbone only),
        leakage_train: {n_images, n_labelled, n_male, n_female, rounds},
        [attribute: {name, groups, n_test_labelled_by_group, n_train_by_group,
                     rows: {<name>: {Leakage, LK_M, LK_D: record over seeds, per_seed}}} -- only
         when param `attribute` is skin or gender_skin: that attribute's Leakage
         (paper 000 appendix B: from the object predictions, a K-way attacker for K groups;
         groups from the perceived skin tone of data/prepared/perceived_gender.parquet and
         the caption-derived gender; first backbone)]}
     (per-seed values as biaslab.runtime.stats.to_json: an infinite Ratio / ratio_raw is "inf", 0/0
     is null; ratio_flag says why: "r=inf", "r=0" -- both an infinite Ratio -- or "0/0"),
     plots/classification.csv (one row per model name (and backbone, with several): mean,
     ci95, std of mAP, Ratio, Leakage)
"""

import numpy as np
import pandas as pd

from biaslab.analysis.classification_eval import (SYNTHETIC, TRAIN, ClassificationSettings,
                                                  evaluate_classifiers, table1_images)
from biaslab.classify import write_blackout_images
from biaslab.models.features import load_features, set_threads
from biaslab.runtime.io import (InputError, atomic_path, load_params, read_parquet, run_stage,
                                stage_parser, write_json)

PREP = "data/prepared"


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()
    p = params["classifier"]
    fp = params.get("features", {})
    cache = fp.get("cache_dir", "data/cache/features")
    set_threads(p.get("threads", 1))
    test, train, persons, _ = table1_images(PREP)
    masked = write_blackout_images(test, persons, "data/eval_classifier/masked",
                                   sources=tuple(p.get("blackout", ["box"])),
                                   dilate_px=int(p.get("blackout_dilate_px", 0)),
                                   fill=p.get("blackout_fill", 0), progress=True)
    attribute = params.get("attribute", "gender")
    groups = None
    if attribute != "gender":
        from biaslab.analysis.attribute_eval import PERCEIVED, group_labels
        lab = read_parquet("data/labels/images.parquet")
        groups = group_labels(attribute, dict(zip(lab["image_id"].astype(int), lab["gender"])),
                              read_parquet(PERCEIVED))
    out, rows = evaluate_classifiers(
        ClassificationSettings.from_params(params), test, masked, train, read_parquet(TRAIN), read_parquet(SYNTHETIC),
        {n: read_parquet(f"data/datasets/{n}.parquet") for n in p["datasets"]},
        *load_features(), cache, attribute=attribute, groups=groups)
    write_json("metrics/classification.json", out)
    with atomic_path("plots/classification.csv") as tmp:
        pd.DataFrame(rows).to_csv(tmp, index=False)
    for r in rows:
        print({k: (round(v, 2) if isinstance(v, float) and np.isfinite(v) else v)
               for k, v in r.items()})
    return 0


if __name__ == "__main__":
    run_stage(main)
