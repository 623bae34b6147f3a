"""Stage `controls`: every bias metric fed control models whose bias is known by construction
(biaslab.analysis.controls; run by biaslab.analysis.controls_eval.run_controls),
with the same code that evaluates the trained models:
biaslab.classify.evaluate_outputs (mAP, Ratio, Ratio_E, Error = 100 - gender accuracy,
Leakage) plus BiasAmp / DBA_O on the classifier's objects (biaslab.metrics.biasamp), the
captioning metrics of biaslab.captioning.evaluation.caption_metrics (Ratio, Error, LIC, BiasAmp,
DBA_O; no quality metric: the controls' captions are not meant to be good), and the causal
probe's pair sensitivities (biaslab.analysis.probe) on the synthetic probe pairs.

params: controls (q: the amplifier's rates, seeds: replicates, n_boot, seed), data.root (the
        planted truth and bias: annotations/synth_truth.csv, synth_params.json; absent on real
        data, where the context reader and the probe are skipped), classifier.min_cooccur,
        classifier.cooccur_rule, classifier.leakage_rounds, label.words, lic (classifier,
        preset, num_threads), eval_captioner.gender_source, eval_captioner.biasamp_min_count,
        controls.workers, controls.attackers (extra attacker encoders: LIC and DBAC again per
        encoder, keys "<metric>@<encoder>", for the spread across encoders)
in:   data/prepared/{images,objects,persons,captions,perceived_gender}.parquet,
      data/labels/images.parquet, data/split.parquet, <data.root>/annotations, <data.root>/probe
      metrics/sensitivity.json (its controls, checked against their known answers there)
out:  metrics/controls.json:
        {"available": {...}, "bias", "test_set": {counts},
         "classifier": {control: {metric: {"expected", "measured" (stats.record over the
                        replicates), "verdict"}}},
         "captioner": {...the same...}, "probe": {control: {attribute: {...}}},
         "sensitivity": {control: {perturbation: {metric: {"expected", "measured",
                         "verdict"}}}} (stage sensitivity's controls, copied),
         "power": {task: {metric: {"mde", "s", "n", "source"}}},
         "summary": {matches, does_not_match, inconclusive, n} (every verdict above)}

Replicates: each control runs once per seed of ``controls.seeds``; the seed drives the
control's own draws (amplifier, caption grammar), the Leakage attackers' seed and the LIC
classifier's seed (one LIC seed per replicate), so the record over replicates is the
measurement noise of the metric on this test set, as a trained row's record is over seeds.

Leakage attackers are trained on the training split's labelled female / male images (the real
rows of Original: stage build_datasets keeps every training image), with the controls' outputs
for them (LK_M) and their true objects (LK_D), as for the trained classifiers.
"""
import sys
from pathlib import Path

from biaslab.analysis.controls_eval import (ControlsSettings, check_attackers, run_controls,
                                            with_sensitivity)
from biaslab.runtime.io import (ParamsError, load_params, read_json, read_parquet, run_stage,
                                stage_parser, write_json)

PREP = "data/prepared"
OUT = "metrics/controls.json"
SENSITIVITY = "metrics/sensitivity.json"


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()
    try:    # before any input is read
        settings = ControlsSettings.from_params(params)
        attackers = check_attackers(list(settings.attackers), str(settings.lic.classifier))
    except ValueError as err:
        name, _, problem = str(err).partition(": ")
        print(f"controls: {ParamsError('params.yaml', name, problem)}", file=sys.stderr)
        raise SystemExit(2) from err
    per = Path(f"{PREP}/perceived_gender.parquet")
    out, clf, cap = run_controls(
        settings, read_parquet(f"{PREP}/images.parquet"), read_parquet(f"{PREP}/objects.parquet"),
        read_parquet(f"{PREP}/persons.parquet"), read_parquet("data/labels/images.parquet"),
        read_parquet("data/split.parquet"), read_parquet(f"{PREP}/captions.parquet"),
        read_parquet(per) if per.exists() else None, attackers)
    # the feature-sensitivity controls (stage sensitivity) are control checks too: one record
    sens = Path(SENSITIVITY)
    out = with_sensitivity(out, read_json(sens) if sens.exists() else None)
    write_json(OUT, out)
    for task, res in (("classifier", clf), ("captioner", cap)):
        for name, ms in res.items():
            print(f"controls {task}/{name}: " + ", ".join(
                f"{m}={v['measured'].get('mean')}({v.get('verdict', '-')})" for m, v in ms.items()))
    print(f"controls: {out['summary']}")
    return 0


if __name__ == "__main__":
    run_stage(main)
