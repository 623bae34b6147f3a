"""Stage `sensitivity_captioner` (biaslab.analysis.sensitivity_captioner.run_captioner_sensitivity):
the feature sensitivity of every trained captioner's Table 2 bias metrics -- how much Ratio,
Error, BiasAmp (and LIC, when asked) move when the captioners caption the perturbed copies of
the test images that stage sensitivity wrote (the person kept to the pixel; Hirota et al.,
ICCV 2025, arXiv 2509.07596).

params: sensitivity.captioner_perturbations (which of sensitivity.perturbations are
        captioned), sensitivity.captioner_metrics (of Ratio, Error, BiasAmp, LIC),
        sensitivity.n_boot, sensitivity.seed, sensitivity.workers, captioner.archs,
        captioner.datasets, captioner.seeds, captioner.beam, captioner.max_len,
        captioner.no_repeat_ngram (decoding, as eval_captioner), eval_captioner.test_images,
        eval_captioner.gender_source, eval_captioner.biasamp_min_count,
        eval_captioner.batch_size, lic (LIC's classifier, when asked), label.words;
        features.cache_dir only locates the feature cache
in:   data/sensitivity (perturbed.parquet and the perturbed images), data/models/captioner/,
      data/split.parquet, data/prepared/{images,captions,perceived_gender}.parquet,
      data/labels/images.parquet
out:  data/sensitivity_captioner/<set>/<model>-<seed>.json (each set's captions, COCO results
      format; set "none" = the unperturbed images),
      metrics/sensitivity_captioner.json:
        {available, perturbations, metrics, nulls, n_boot, seed, not_perturbed,
         models: {<row>: {<perturbation>: {<metric>: {base, perturbed, delta, lo, hi, pct,
                  pct_lo, pct_hi, n_seeds, n_images, n_boot, n_undefined, ci_method}}}}
                  (row: the training set, "<arch>/<set>" for archs other than ClipCap;
                  delta = perturbed - base, means over seeds; lo/hi the 95 % CI: bootstrap
                  over images and seeds for Ratio and Error, t over seeds for BiasAmp and LIC),
         test_set: {n_images, n_male, n_female, n_left_out, seeds}}
        ({available: false, reason} when captioner_perturbations is empty; on data without
        captions every out is a skip record),
      plots/sensitivity_captioner.csv (one row per model x perturbation x metric)
"""
from pathlib import Path

import pandas as pd

from biaslab.analysis.sensitivity_captioner import run_captioner_sensitivity
from biaslab.captioning import evaluation as C
from biaslab.analysis.sensitivity_settings import SensitivitySettings
from biaslab.captioning.table2 import Table2Settings, test_set
from biaslab.runtime.io import (InputError, atomic_path, load_params, read_parquet, run_stage,
                                skip_without_captions, stage_parser, write_json)

OUT = "data/sensitivity_captioner"
METRICS = "metrics/sensitivity_captioner.json"
CSV = "plots/sensitivity_captioner.csv"


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()
    if skip_without_captions("sensitivity_captioner", [OUT, METRICS, CSV]):
        return 0
    try:    # before any input is read
        sens = SensitivitySettings.from_params(params)
    except ValueError as err:
        raise InputError("params.yaml", f"sensitivity: {err}") from err
    captioners = Table2Settings.from_params(params)
    captions = read_parquet("data/prepared/captions.parquet")
    labels, used = C.read_gender_labels(captioners.eval.gender_source)
    table, human, genders, train_caps = test_set(
        captioners.eval.test_images, read_parquet("data/split.parquet"),
        read_parquet("data/prepared/images.parquet"), captions, labels, used)
    try:
        out, rows = run_captioner_sensitivity(
            sens, captioners, table, human, genders, train_caps,
            read_parquet("data/sensitivity/perturbed.parquet"), OUT)
    except ValueError as err:
        raise InputError("params.yaml", f"sensitivity: {err}") from err
    if out.get("available"):
        out["test_set"]["gender_source"] = used
    Path(OUT).mkdir(parents=True, exist_ok=True)   # a DVC out even when nothing is captioned
    write_json(METRICS, out)
    with atomic_path(CSV) as tmp:
        pd.DataFrame(rows, columns=["model", "perturbation", "metric", "base", "perturbed",
                                    "delta", "lo", "hi", "pct", "pct_lo", "pct_hi", "n_seeds",
                                    "n_images", "ci_method"]).to_csv(tmp, index=False)
    for d, by_p in (out.get("models") or {}).items():
        for pn, recs in by_p.items():
            print(f"sensitivity_captioner {d} {pn}: " + ", ".join(
                f"{m} {r['delta']:+.2f} [{r['lo']:+.2f}, {r['hi']:+.2f}]"
                if r["delta"] is not None and r["lo"] is not None else f"{m} n/a"
                for m, r in recs.items()))
    if not out.get("available"):
        print(f"sensitivity_captioner: not run: {out.get('reason')}")
    return 0


if __name__ == "__main__":
    run_stage(main)
