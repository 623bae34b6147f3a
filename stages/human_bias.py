"""Stage `human_bias`: bias of the dataset's own (human) captions against perceived gender
(crowd labels when the source has them, else caption-derived labels): Ratio and Error of every
human caption (Burns et al. 2018) and LIC_D (thesis Eq. 2.9) -> metrics/human_bias.json.
Params: `lic` (classifier, preset, seeds, words), `label.words`."""
import numpy as np

from biaslab.io import load_params, read_parquet, write_json
from biaslab.metrics.captions import error, ratio
from biaslab.metrics.lic import lic
from biaslab.textclf import default_config


def main() -> None:
    params = load_params()
    p, words = params["lic"], params["label"]["words"]
    perceived = read_parquet("data/prepared/perceived_gender.parquet")
    perceived = perceived[perceived["perceived_gender"].isin(["female", "male"])]
    if len(perceived):
        genders, source = dict(zip(perceived.image_id, perceived.perceived_gender)), "perceived"
    else:
        lab = read_parquet("data/labels/images.parquet")
        lab = lab[lab["gender"].isin(["female", "male"])]
        genders, source = dict(zip(lab.image_id, lab.gender)), "captions"
    caps = read_parquet("data/prepared/captions.parquet").sort_values("caption_id")
    caps = caps[caps["image_id"].isin(genders)]
    human = caps.groupby("image_id")["caption"].apply(list).to_dict()
    every = caps["caption"].tolist()
    every_g = [genders[i] for i in caps["image_id"]]
    r = ratio(every, every_g, words=words)
    out = {"gender_source": source, "n_images": len(human), "n_captions": len(every),
           "ratio": r["ratio"], "ratio_max": r["ratio_max"], "error": error(every, every_g, words)}
    # LIC_D of the human captions; the "model" captions are each image's first human caption,
    # so LIC = LIC_M - LIC_D is a sanity value expected near 0.
    cfg = default_config(p["classifier"], p["preset"], progress=False,
                         **({"num_threads": p["num_threads"]} if p.get("num_threads") else {}))
    res = lic({i: c[0] for i, c in human.items()}, human, genders, classifier=p["classifier"],
              seeds=p["seeds"], config=cfg, words=words)
    out.update({k: res[k] for k in ("LIC_D", "LIC_D_std", "LIC_M", "LIC_M_std", "LIC", "LIC_std")})
    out["lic_classifier"] = f"{p['classifier']}/{p['preset']}"
    write_json("metrics/human_bias.json", {k: (None if isinstance(v, float) and not np.isfinite(v)
                                               else v) for k, v in out.items()})
    print(out)


if __name__ == "__main__":
    main()
