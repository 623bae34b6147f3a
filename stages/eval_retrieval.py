"""Stage `eval_retrieval`: gender bias of the trained CLIP-style scorer in text-to-image
retrieval with gender-neutral queries: Bias@K and MaxSkew@K (GenSynth, paper 001, sec. 3 and
5, appendix C, Eqs. 3-5), with a random-ranking reference row (paper 001 Table 1).

Protocol (paper 001 sec. 3.2 / 5.1, "caption-to-image retrieval of gender-neutralised
captions"):
* gallery = the test-split images (all of them; g(I) = the image gender label from the ONE
  source of eval_captioner.gender_source, anything else undefined -- undefined images are
  ranked but count for no gender, as appendix C);
* queries = every human caption of a test image that names one gender
  (``caption_gender`` female/male), gender-neutralised (``biaslab.gender.neutralise``: "a man
  with his dog" -> "a person with their dog"), so the query says nothing about gender;
* each query ranks the gallery by the scorer's cosine similarity; K in eval_retrieval.ks;
* MaxSkew's desired proportions = the gallery's female/male distribution (Eq. 4);
* 95 % CIs: percentile bootstrap over queries (biaslab.stats.bootstrap), one model.

params: eval_retrieval (ks, scorer, n_boot, seed), eval_captioner.gender_source, label.words,
        features.cache_dir
in:   data/scorer (stage train_scorer), data/split.parquet, data/prepared/{images,captions,
      perceived_gender}.parquet, data/labels/images.parquet
out:  metrics/retrieval.json::

    {"scorer": {"Bias@K": {"mean", "ci95", "lo", "hi", "n"},
                "MaxSkew@K": {"mean", "ci95", "lo", "hi", "n", "n_undefined"}, ...},
     "random": {same keys: a random ranking, the no-model reference},
     "setup": {"n_queries", "n_gallery", "n_female", "n_male", "n_undefined",
               "gender_source", "desired_female", "ks", "n_boot"}}
"""
import sys
from pathlib import Path

import numpy as np

from biaslab import captioner as C
from biaslab.gender import caption_gender, neutralise
from biaslab.io import InputError, load_params, read_parquet, skip_without_captions, write_json
from biaslab.metrics.retrieval import retrieval_bias

DEFAULTS = {"ks": [10, 50, 100], "scorer": "data/scorer", "n_boot": 2000, "seed": 0}


def main() -> None:
    params = load_params()
    if skip_without_captions("eval_retrieval", ["metrics/retrieval.json"]):
        return
    e = {**DEFAULTS, **(params.get("eval_retrieval") or {})}
    words = params.get("label", {}).get("words", "lic")
    source = (params.get("eval_captioner") or {}).get("gender_source", "auto")
    cache = params.get("features", {}).get("cache_dir", "data/cache/features")
    if not Path(e["scorer"]).exists():
        raise InputError(e["scorer"], "missing: no CLIP-style scorer there (run stage train_scorer)")
    per = Path("data/prepared/perceived_gender.parquet")
    lab = Path("data/labels/images.parquet")
    labels, used = C.gender_labels(source, read_parquet(per) if per.exists() else None,
                                   read_parquet(lab))  # label_gender always writes it
    split = read_parquet("data/split.parquet")
    test = set(split.loc[split["split"] == "test", "image_id"].astype(int))
    images = read_parquet("data/prepared/images.parquet")
    table = images[images["image_id"].isin(test)][["image_id", "path"]] \
        .sort_values("image_id", ignore_index=True)
    if table.empty:
        raise InputError("data/split.parquet", "no test images")
    ids = table["image_id"].astype(int).tolist()
    gallery = [labels.get(i, "undefined") for i in ids]
    caps = read_parquet("data/prepared/captions.parquet").sort_values(["image_id", "caption_id"])
    caps = caps[caps["image_id"].isin(test)]
    queries = [neutralise(c, words) for c in caps["caption"].astype(str)
               if caption_gender(c, words) in ("female", "male")]
    if not queries:
        raise InputError("data/prepared/captions.parquet", "no gendered test caption to "
                                                           "neutralise into a query")
    from biaslab.clipscorer import load_scorer
    scorer = load_scorer(e["scorer"])
    cfg = scorer.config
    feats = C.image_features(table, cache, cfg["image_encoder"], cfg.get("image_size"),
                             num_threads=(params.get("lic") or {}).get("num_threads"),
                             progress=True)
    img = scorer.encode_images(np.asarray(feats, np.float32))
    txt = scorer.encode_texts(queries)
    ks = [int(k) for k in e["ks"]]
    n_boot, seed = int(e["n_boot"]), int(e["seed"])
    rng = np.random.default_rng(seed)
    out = {"scorer": retrieval_bias(txt @ img.T, gallery, ks, n_boot=n_boot, seed=seed),
           "random": retrieval_bias(rng.random((len(queries), len(ids))), gallery, ks,
                                    n_boot=n_boot, seed=seed)}
    n_f, n_m = gallery.count("female"), gallery.count("male")
    out["setup"] = {"n_queries": len(queries), "n_gallery": len(ids), "n_female": n_f,
                    "n_male": n_m, "n_undefined": len(ids) - n_f - n_m, "gender_source": used,
                    "desired_female": n_f / (n_f + n_m) if n_f + n_m else None, "ks": ks,
                    "n_boot": n_boot}
    write_json("metrics/retrieval.json", out)
    for row in ("scorer", "random"):
        print(f"eval_retrieval {row}: " + ", ".join(
            f"{k}={v['mean']:.3f}±{v['ci95'] or 0:.3f}" for k, v in out[row].items()
            if v["mean"] is not None))
    if max(ks) >= len(ids):
        print(f"eval_retrieval: note: K={max(ks)} >= gallery size {len(ids)}: that K ranks "
              f"the whole gallery and reads only its balance")


if __name__ == "__main__":
    try:
        main()
    except InputError as e:
        sys.exit(f"eval_retrieval: {e}")
