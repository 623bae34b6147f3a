"""Stage `eval_retrieval` (biaslab.analysis.retrieval_eval): gender bias in text-to-image
retrieval with gender-neutral queries,
Bias@K and MaxSkew@K (GenSynth, paper 001, sec. 3 and 5, appendix C, Eqs. 3-5), for the
models of paper 001's Tables 1 and 2: the trained CLIP-style scorer, its CLIP-clip variant
(the m dimensions of highest mutual information with gender dropped; Table 2), a
gender-agnostic TF-IDF model on gender-neutralised captions and a random ranking (Table 1),
on the natural test gallery and on its balanced resamples (Table 1 "COCO Val (Balanced)"),
with Recall@K of each query's own image (what debiasing costs), and on paper 001's contrast
set (GenSynth: both groups' versions of each kept test image, stage contrast_set).

Protocol (paper 001 sec. 3.2 / 5.1, "caption-to-image retrieval of gender-neutralised
captions"):
* gallery = the test-split images (all of them; g(I) = the image gender label from the ONE
  source of eval_captioner.gender_source, anything else undefined -- undefined images are
  ranked but count for no gender, as appendix C);
* queries = every human caption of a test image that names one gender
  (``caption_gender`` female/male), gender-neutralised (``biaslab.data.gender.neutralise``: "a man
  with his dog" -> "a person with their dog"), so the query says nothing about gender;
* each query ranks the gallery by the model's score; K in eval_retrieval.ks;
* TF-IDF: each gallery image's document is its own neutralised captions joined
  (``biaslab.metrics.retrieval.tfidf_scores``);
* CLIP-clip: mutual information of each scorer image-embedding dimension with gender on the
  training split's images (``clip_clip_keep``), the top ``clip_m`` dropped from image and
  text embeddings, both re-normalised;
* balanced: the larger gender group sampled down to the smaller, ``n_balanced`` resamples
  (``balanced_gallery``), undefined images kept; the kept images' captions are the queries;
  mean, std and t-based 95 % CI over resamples;
* MaxSkew's desired proportions = the (resampled) gallery's female/male distribution (Eq. 4);
* contrast set: both versions of every pair of ``data/contrast/pairs.parquet`` in a seeded
  random order, g(I) = the version's group, the kept images' queries
  (``biaslab.analysis.retrieval_eval.contrast_retrieval``);
* 95 % CIs on the natural gallery and the contrast set: percentile bootstrap over queries
  (biaslab.runtime.stats.bootstrap).

params: eval_retrieval (ks, scorer, n_boot, seed, clip_m, n_balanced, recall_ks),
        eval_captioner.gender_source, label.words, features.cache_dir, lic.num_threads
in:   data/scorer (stage train_scorer), data/contrast (stage contrast_set), data/split.parquet,
      data/prepared/{images,captions,perceived_gender}.parquet, data/labels/images.parquet
out:  metrics/retrieval.json::

    {"scorer" | "clip_clip" | "tfidf" | "random":
         {"Bias@K": {"mean", "ci95", "lo", "hi", "n"},
          "MaxSkew@K": {"mean", "ci95", "lo", "hi", "n", "n_undefined"}, ...},
     "balanced": {model: {"Bias@K" | "MaxSkew@K": {"mean", "ci95", "std", "n"}}},
     "recall": {"scorer" | "clip_clip" | "tfidf": {"R@K": {"mean", "ci95", "lo", "hi", "n"}}},
     "differences": {"tfidf-random" | "clip_clip-scorer": {"Bias@K" | "MaxSkew@K":
                     {"mean", "ci95", "lo", "hi", "n"}}} (paired bootstrap over queries),
     "contrast": {the four models' keys, "differences" (also "scorer-random"), "setup",
                  "set": biaslab.counterfactual.contrast.contrast_counts} or {"note": why there is none},
     "setup": {"n_queries", "n_gallery", "n_female", "n_male", "n_undefined",
               "gender_source", "desired_female", "ks", "n_boot", "clip_m", "embedding_dim",
               "clip_mi_images", "clip_mi_top", "n_balanced", "recall_ks"}}
"""
from pathlib import Path

from biaslab.captioning.data import image_features
from biaslab.captioning.evaluation import read_gender_labels
from biaslab.analysis.retrieval_eval import (RetrievalSettings, evaluate_retrieval,
                                             neutral_queries)
from biaslab.runtime.io import (InputError, load_params, read_parquet, run_stage,
                                skip_without_captions, stage_parser, write_json)


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()
    # params.yaml is validated by load_params (biaslab.runtime.validate.check_eval_retrieval)
    try:
        e = RetrievalSettings.from_params(params)
    except ValueError as err:
        raise InputError("params.yaml", str(err)) from None
    if skip_without_captions("eval_retrieval", ["metrics/retrieval.json"]):
        return 0
    words = params.get("label", {}).get("words", "lic")
    source = (params.get("eval_captioner") or {}).get("gender_source", "auto")
    cache = params.get("features", {}).get("cache_dir", "data/cache/features")
    if not Path(e.scorer).exists():
        raise InputError(e.scorer,
                         "missing: no CLIP-style scorer there (run stage train_scorer)")
    labels, used = read_gender_labels(source)
    split = read_parquet("data/split.parquet")
    test = set(split.loc[split["split"] == "test", "image_id"].astype(int))
    images = read_parquet("data/prepared/images.parquet")
    table = images[images["image_id"].isin(test)][["image_id", "path"]] \
        .sort_values("image_id", ignore_index=True)
    if table.empty:
        raise InputError("data/split.parquet", "no test images")
    ids = table["image_id"].astype(int).tolist()
    caps = read_parquet("data/prepared/captions.parquet").sort_values(["image_id", "caption_id"])
    try:
        queries, targets, docs = neutral_queries(caps[caps["image_id"].isin(test)], ids, words)
    except ValueError as err:
        raise InputError("data/prepared/captions.parquet", str(err)) from None
    train = images[images["image_id"].isin(
        set(split.loc[split["split"] == "train", "image_id"].astype(int)))][
        ["image_id", "path"]].sort_values("image_id", ignore_index=True)
    from biaslab.models.clipscorer import load_scorer
    scorer = load_scorer(e.scorer)
    cfg = scorer.config
    threads = (params.get("lic") or {}).get("num_threads")

    def encode(t):
        return image_features(t, cache, cfg["image_encoder"], cfg.get("image_size"),
                                num_threads=threads, progress=True)
    pairs = Path("data/contrast/pairs.parquet")
    stored = read_parquet(pairs) if pairs.exists() else None
    cands = (read_parquet("data/contrast/candidates.parquet")
             if stored is not None and not stored.empty else None)
    try:
        out = evaluate_retrieval(e, scorer, encode, table, train, labels, used, queries,
                                 targets, docs, stored, cands)
    except ValueError as err:
        raise InputError("data/split.parquet", f"CLIP-clip: {err}") from None
    write_json("metrics/retrieval.json", out)
    ks = out["setup"]["ks"]
    for row in ("scorer", "clip_clip", "tfidf", "random"):
        print(f"eval_retrieval {row}: " + ", ".join(
            f"{k}={v['mean']:.3f}±{v['ci95'] or 0:.3f}" for k, v in out[row].items()
            if v["mean"] is not None))
    if max(ks) >= len(ids):
        print(f"eval_retrieval: note: K={max(ks)} >= gallery size {len(ids)}: that K ranks "
              f"the whole gallery and reads only its balance")
    return 0


if __name__ == "__main__":
    run_stage(main)
