"""Stage `controls_attribute`: the protected attribute's Leakage and LIC fed control models
whose bias is known by construction (biaslab.analysis.controls_attribute):
oracle (Leakage = 0 exactly), amplifier@q (Leakage > 0, LIC > 0), blind (LK_M < 100 / K),
human (LIC ≈ 0), through the code that evaluates the trained models
(biaslab.classify.attribute_leakage, biaslab.metrics.evaluate.evaluate_captions).

params: attribute (gender: a skip record, the gender controls are stage `controls`'),
        controls.q, controls.seeds, controls.workers, classifier.min_cooccur,
        classifier.cooccur_rule, classifier.leakage_rounds, lic, label.words
in:   data/prepared/{images,objects,persons,captions,perceived_gender}.parquet,
      data/labels/images.parquet, data/split.parquet
out:  metrics/controls_attribute.json:
        {"attribute", "groups", "stereotypes": {group: object}, "labels", "replicates", "q",
         "test_set": {...: {"n_..._by_group"}},
         "classifier": {control: {metric: {"expected", "measured" (stats.record over the
                        replicates), "verdict"} | {"measured"}}},
         "captioner": {...the same...} | {"skipped": why}, "summary"}
        or {"attribute": "gender", "skipped": why}
"""
from pathlib import Path

from biaslab.analysis.controls_attribute import run
from biaslab.analysis.controls_eval import ControlsSettings
from biaslab.runtime.io import load_params, read_parquet, run_stage, stage_parser, write_json

PREP = "data/prepared"
OUT = "metrics/controls_attribute.json"


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    settings = ControlsSettings.from_params(load_params())
    per = Path(f"{PREP}/perceived_gender.parquet")
    cap = Path(f"{PREP}/captions.parquet")
    out = run(settings, read_parquet(f"{PREP}/images.parquet"),
              read_parquet(f"{PREP}/objects.parquet"), read_parquet(f"{PREP}/persons.parquet"),
              read_parquet("data/labels/images.parquet"), read_parquet("data/split.parquet"),
              read_parquet(cap), read_parquet(per) if per.exists() else None)
    write_json(OUT, out)
    if "skipped" in out:
        print(f"controls_attribute: {out['skipped']}")
        return 0
    for task in ("classifier", "captioner"):
        for name, ms in out[task].items():
            if isinstance(ms, dict) and name != "skipped":
                print(f"controls_attribute {task}/{name}: " + ", ".join(
                    f"{m}={v['measured'].get('mean')}({v.get('verdict', '-')})"
                    for m, v in ms.items()))
    print(f"controls_attribute: {out['summary']}")
    return 0


if __name__ == "__main__":
    run_stage(main)
