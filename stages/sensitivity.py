"""Stage `sensitivity` (biaslab.analysis.sensitivity_eval.run_sensitivity): the feature
sensitivity of every trained classifier's Table 1 bias metrics -- how much Ratio, Ratio_E,
masked AUC and Leakage move when only the non-person features of the test images are
perturbed (Hirota et al., ICCV 2025, arXiv 2509.07596: a bias score is reported beside its
feature sensitivity) -- and the controls' sensitivity against its known answer: two pixel
readers on any data (logistic regressions on the image features: one sees only the persons,
one only what is not a person) and, on data with a planted truth, the truth readers.

params: sensitivity (perturbations: names of biaslab.analysis.perturb, objects@<fraction>,
        blur@<% of the long side>, swap; max_images: a gender-stratified seeded subset of the
        test images or null for all; fill: what masks an object, mean or a grey level; seed;
        n_boot; leakage_rounds: Leakage's attacker rounds here; workers), classifier.datasets, classifier.methods, classifier.seeds,
        classifier.blackout, classifier.blackout_dilate_px, classifier.blackout_fill (the
        masked images of Ratio and masked AUC, as Table 1), features.backbone; features.cache_dir only locates the feature cache; data.root (the
        planted truth, when there is one)
in:   data/models/classifier/, data/prepared/{images,objects,persons}.parquet,
      data/labels/images.parquet, data/split.parquet, data/datasets/original.parquet (the
      Leakage attackers' training images), data/features/images*.npy
out:  data/sensitivity/images/<perturbation>/<image_id>.png (the perturbed test images,
      person intact), data/sensitivity/person/<set>/ (the same with only the persons kept),
      data/sensitivity/train/{person,masked}/ (the pixel readers' training images),
      data/sensitivity/perturbed.parquet (one row per perturbation x image: perturbation,
      image_id, gender, path, changed_fraction, n_objects, n_masked, donor),
      data/sensitivity/masked/<set>/ (the test sets with the persons blacked out;
      PNG, lossless: on JPEG sources the unperturbed masked copies are not Table 1's JPEG
      ones, so the unperturbed values can differ from Table 1's in the last digits),
      metrics/sensitivity.json:
        {available, perturbations, metrics, fill, seed, n_boot,
         models: {<model>: {<perturbation>: {<metric>: {base, perturbed, delta, lo, hi, pct,
                  pct_lo, pct_hi, n_seeds, n_images, n_boot, n_undefined, ci_method}}}}
                  (delta = perturbed - base in the metric's points, pct = 100 delta / |base|,
                  means over seeds; lo/hi the 95 % CI: bootstrap over images and seeds, or t
                  over seeds for Leakage),
         test_set: {n_images, n_male, n_female, n_object_instances, seeds},
         perturbed: {<perturbation>: {mean_changed_fraction, n_objects_masked, n_swapped}},
         controls: {<control>: {<perturbation>: {Ratio_E|masked_AUC|AUC: {expected ("0",
                    "<0", "!=0" or null where no answer is known), measured, verdict}}}}
                    (the truth readers person_oracle, context_reader only with a planted
                    truth, else controls_note; the pixel readers person_oracle_pixels,
                    context_reader_pixels: AUC of P(man) on their own input),
         pixel_controls_training: {<control>: {n_images, n_male}},
         controls_summary: {verdict: count}},
      plots/sensitivity.csv (one row per model x perturbation x metric)
"""
from pathlib import Path

import pandas as pd

from biaslab.analysis.classification_eval import ClassificationSettings, table1_images
from biaslab.analysis.controls_eval import read_truth, with_truth
from biaslab.analysis.sensitivity_eval import run_sensitivity
from biaslab.analysis.sensitivity_settings import SensitivitySettings
from biaslab.models.features import load_features, set_threads
from biaslab.runtime.io import (InputError, atomic_path, load_params, run_stage,
                                stage_parser, write_json)

PREP = "data/prepared"
OUT = Path("data/sensitivity")
METRICS = "metrics/sensitivity.json"


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()
    c = params["classifier"]
    set_threads(c.get("threads", 1))
    try:    # before any input is read
        sens = SensitivitySettings.from_params(params)
    except ValueError as e:
        raise InputError("params.yaml", f"sensitivity: {e}") from e
    test, train, persons, objects = table1_images(PREP)
    truth, bias = read_truth(params["data"]["root"])
    try:
        out, rows = run_sensitivity(sens, ClassificationSettings.from_params(params),
                                    with_truth(test, truth), train, persons, objects,
                                    *load_features(),
                                    params.get("features", {}).get("cache_dir",
                                                                   "data/cache/features"),
                                    OUT, truth, bias)
    except ValueError as e:
        raise InputError("params.yaml", f"sensitivity: {e}") from e
    write_json(METRICS, out)
    with atomic_path("plots/sensitivity.csv") as tmp:
        pd.DataFrame(rows).to_csv(tmp, index=False)
    for d, by_p in out["models"].items():
        for pn, recs in by_p.items():
            print(f"sensitivity {d} {pn}: " + ", ".join(
                f"{m} {r['delta']:+.2f} [{r['lo']:+.2f}, {r['hi']:+.2f}]"
                if r["delta"] is not None and r["lo"] is not None else f"{m} n/a"
                for m, r in recs.items()))
    if out.get("controls_summary"):
        print(f"sensitivity controls: {out['controls_summary']}")
    return 0


if __name__ == "__main__":
    run_stage(main)
