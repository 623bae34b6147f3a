"""Stage `human_bias`: bias of the dataset's own (human) captions against the image gender
labels: Ratio and Error of every human caption (Burns et al. 2018) and LIC_D (thesis Eq. 2.9)
-> metrics/human_bias.json.

Gender labels: ONE source, chosen by the same param as stage eval_captioner
(``eval_captioner.gender_source``: auto = perceived labels where the data has them, else
caption-derived; ``biaslab.captioning.evaluation.gender_labels``), so both stages judge captions against
the same labels. Params: ``lic`` (classifier, preset, seeds, num_threads, workers), ``label.words``,
``eval_captioner.gender_source``.

metrics/human_bias.json::

    {"gender_source", "gender_source_param", "n_images", "n_female", "n_male", "n_captions",
     "Ratio", "ratio_raw", "Error",
     "LIC_D", "LIC_M", "LIC": stats.record over the LIC classifier seeds,
     "lic_classifier"}

(``Error``, not ``error``: DVC reads a metrics key named ``error`` as a load error.)
"""

import numpy as np

from biaslab.runtime import stats
from biaslab.captioning.evaluation import read_gender_labels
from biaslab.runtime.io import (load_params, read_parquet, run_stage, skip_without_captions,
                                stage_parser, write_json)
from biaslab.metrics.captions import error, ratio_details
from biaslab.metrics.lic import lic_details
from biaslab.models.textclf import default_config


def _finite(v):
    return None if isinstance(v, float) and not np.isfinite(v) else v


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()
    if skip_without_captions("human_bias", ["metrics/human_bias.json"]):
        return 0
    p, words = params["lic"], params["label"]["words"]
    source = (params.get("eval_captioner") or {}).get("gender_source", "auto")
    genders, used = read_gender_labels(source)
    caps = read_parquet("data/prepared/captions.parquet").sort_values("caption_id")
    caps = caps[caps["image_id"].isin(genders)]
    human = caps.groupby("image_id")["caption"].apply(list).to_dict()
    every = caps["caption"].tolist()
    every_g = [genders[i] for i in caps["image_id"]]
    r = ratio_details(every, every_g, words=words)
    out = {"gender_source": used, "gender_source_param": source, "n_images": len(human),
           "n_female": sum(1 for i in human if genders[i] == "female"),
           "n_male": sum(1 for i in human if genders[i] == "male"), "n_captions": len(every),
           "Ratio": _finite(r["ratio_max"]), "ratio_raw": _finite(r["ratio"]),
           "Error": _finite(error(every, every_g, words))}
    # LIC_D of the human captions; the "model" captions are each image's first human caption,
    # so LIC = LIC_M - LIC_D is a sanity value expected near 0. That caption is held out of
    # LIC_D's references (as the controls' human control does): with lic.max_human_captions 1
    # LIC_D would otherwise score the very captions LIC_M scores
    cfg = default_config(p["classifier"], p["preset"], progress=False,
                         **({"num_threads": p["num_threads"]} if p.get("num_threads") else {}))
    refs = {i: c[1:] for i, c in human.items() if len(c) > 1}
    res = lic_details({i: human[i][0] for i in refs}, refs, genders, classifier=p["classifier"],
                      seeds=p["seeds"], config=cfg, words=words, workers=p.get("workers", 1),
                      max_human_captions=p.get("max_human_captions"),
                      progress=True)   # a tqdm bar over the LIC classifiers (lic.seeds)
    for k in ("LIC_D", "LIC_M", "LIC"):
        out[k] = stats.record([s[k] for s in res["per_seed"]])
    out["lic_classifier"] = f"{p['classifier']}/{p['preset']}"
    write_json("metrics/human_bias.json", out)
    print(out)
    return 0


if __name__ == "__main__":
    run_stage(main)
