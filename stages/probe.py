"""Stage `probe` (biaslab.analysis.probe_eval.run_probe): causal attribute sensitivity of every trained classifier and captioner on the
synthetic probe pairs (biaslab.analysis.probe; paper 000 sec. 2.1: does a model still use a planted
context attribute -- labeled objects, scene, the unlabeled colour cast -- once the person is
masked?).

params: data.root (the synthetic dataset with probe/pairs.csv), classifier.datasets,
        classifier.methods (the model-level baselines, after the datasets), classifier.seeds, classifier.blackout, classifier.blackout_dilate_px,
        classifier.blackout_fill (the Ratio protocol's person masking), captioner.datasets,
        captioner.seeds, captioner.beam, captioner.max_len, captioner.no_repeat_ngram,
        label.words, generate.backend (recorded: which counterfactuals the models saw), probe
        (min_seeds_t, n_boot, seed, flip_images), attribute (the person attributes the
        attribute-flip probe flips: biaslab.analysis.probe.FLIP_DIMS); features.cache_dir only
        locates the feature cache
in:   <data.root>/probe/ (written by stage synthesize), data/models/classifier/<dataset>/<dataset>-<seed>/,
      data/models/captioner/<dataset>/<dataset>-<seed>/, data/features/images*.npy
out:  data/probe/masked/*.png (person-blacked-out probe images), data/probe/neutral/*.png (the
      masked context-free images), data/probe/empty/*.png (both drawn without their person:
      the reference of the mask-neutrality test), data/probe/pairs.parquet (one
      row per model x pair: model, dataset, seed, attribute, pair, out_female, out_male,
      sensitivity, and the caption of each image for captioners), metrics/probe.json
      ({"available", "backend", "n_pairs": {attribute: n}, "classifier": {dataset:
      {attribute: record}} (output P(man) - P(woman)), "classifier_logit": {...} (the same
      pairs on the logit margin logit P(man) - logit P(woman), which does not saturate:
      biaslab.analysis.probe.classifier_logit_output), "captioner": {...} (the sampled gender word,
      -1 / 0 / +1), "captioner_margin": {...} (the teacher-forced margin log P(male version)
      - log P(female version) of one caption pair per probe pair, scored under both images:
      biaslab.analysis.probe.caption_margin_output), "ci_rule", "blackout", and
      "classifier_na": {name: why} for models without gender outputs (adversarial), which
      the probe's output P(man) - P(woman) does not exist for}, "mask_neutral": {dataset:
      biaslab.analysis.probe.mask_neutral_record on the context-free images, with "context": the same
      on the probe pairs}; record: see
      biaslab.analysis.probe.summarize_sensitivity), "flip": the attribute-flip probe
      ({"available", "attribute", "dims", "n_pairs": {dim: n}, "objects": {dim: {value:
      [associated objects]}}, "reference": biaslab.analysis.probe.flip_reference (the
      training images' own association), "classifier" / "captioner": {dataset:
      biaslab.analysis.probe.summarize_flip}}, or {"available": false, "reason"});
      data/probe/flip/*.png (the test images drawn with each value) and data/probe/flip.parquet
      (one row per model x seed x pair: out_a, out_b, sensitivity, the pair's gender and
      skin). Without probe pairs (real data) metrics/probe.json
      says "not available (no planted truth)" and the stage exits 0.
"""
from pathlib import Path

import numpy as np
import pandas as pd

from biaslab.analysis import probe as P
from biaslab.analysis.probe_eval import ProbeSettings, run_probe
from biaslab.data.synthetic import read_neutral, read_probe
from biaslab.runtime.io import (InputError, load_params, run_stage, stage_parser, write_json,
                                write_parquet)

OUT = Path("data/probe")
METRICS = "metrics/probe.json"
CI_RULE = (f"ci95/lo/hi: t interval over training seeds when there are >= "
           f"{P.MIN_SEEDS_T} seeds, else percentile bootstrap over probe pairs of the "
           f"seed-averaged pair sensitivities (ci_method says which); 'seeds' and 'pooled' "
           f"hold both")


FLIP_COLUMNS = ["model", "dataset", "seed", "attribute", "pair", "out_a", "out_b",
                "sensitivity", "gender", "skin"]


def _not_available(root: str, backend: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    write_parquet(OUT / "flip.parquet", pd.DataFrame(columns=FLIP_COLUMNS))
    write_parquet(OUT / "pairs.parquet", pd.DataFrame(
        columns=["model", "dataset", "seed", "attribute", "pair", "out_female", "out_male",
                 "sensitivity"]))
    write_json(METRICS, {"available": False,
                         "reason": f"not available (no planted truth): {root} has no probe "
                                   f"pairs (only the synthetic dataset has them)",
                         "backend": backend, "n_pairs": {}, "classifier": {}, "classifier_logit": {},
                         "captioner": {}})
    print(f"probe: no probe pairs under {root}: not available (no planted truth)")


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()
    root = params["data"]["root"]
    if not Path(root).is_dir():
        raise InputError(root, "missing: data.root is not a directory")
    backend = params.get("generate", {}).get("backend")
    pairs = read_probe(root)
    if pairs is None or pairs.empty:
        _not_available(root, backend)
        return 0
    c = params["classifier"]
    out, rows, masked = run_probe(ProbeSettings.from_params(params), root, pairs,
                                  read_neutral(root), OUT)
    for d, r in (out.get("mask_neutral") or {}).items():
        print(f"mask neutrality {d}: Ratio_E masked {r['ratio_expected']}, person-free "
              f"{r['ratio_expected_empty']}, mask effect {r['mask_effect']} on "
              f"{r['n_images']} context-free images; in context mask effect "
              f"{r['context']['mask_effect']} on {r['context']['n_images']} images")
    n_pairs = {a: int(n) for a, n in
               pairs.drop_duplicates(["attribute", "pair"])["attribute"].value_counts()
               .sort_index().items()}
    is_flip = [str(r["model"].iloc[0]).endswith("_flip") if len(r) else False for r in rows]
    write_parquet(OUT / "pairs.parquet",
                  pd.concat([r for r, f in zip(rows, is_flip) if not f], ignore_index=True))
    flips = [r for r, f in zip(rows, is_flip) if f]
    write_parquet(OUT / "flip.parquet", pd.concat(flips, ignore_index=True) if flips else
                  pd.DataFrame(columns=FLIP_COLUMNS))
    write_json(METRICS, {"available": True, "backend": backend, "n_pairs": n_pairs,
                         **out, "ci_rule": CI_RULE,
                         "blackout": list(c.get("blackout", ["box"])),
                         "mean_masked_fraction": float(np.mean(masked["masked_fraction"]))})
    for model, by_d in ((k, v) for k, v in out.items()
                        if k not in ("classifier_na", "mask_neutral", "flip")):
        for d, recs in by_d.items():
            print(f"probe {model} {d}: " + ", ".join(
                f"{a}={r['mean']:+.3f}±{r['ci95'] if r['ci95'] is not None else float('nan'):.3f}"
                for a, r in recs.items()))
    fl = out.get("flip") or {}
    for model in ("classifier", "captioner"):
        for d, recs in (fl.get(model) or {}).items():
            print(f"flip probe {model} {d}: " + ", ".join(
                f"{a}={r['mean']:+.3f}±{r['ci95'] if r['ci95'] is not None else float('nan'):.3f}"
                for a, r in recs.items() if "mean" in r))
    for d, r in (fl.get("reference") or {}).items():
        print(f"flip probe reference (training images' association) {d}: {r['mean']:+.3f} "
              f"[{r['lo']}, {r['hi']}], n = {r['n']}")
    return 0


if __name__ == "__main__":
    run_stage(main)
