"""Stage `eval_retrieval`: gender bias in text-to-image retrieval with gender-neutral queries,
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
  random order, g(I) = the version's group, the kept images' queries (``_contrast``);
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
import sys
from pathlib import Path

import numpy as np

from biaslab import captioner as C
from biaslab.models.clipscorer import _l2  # the scorer's own re-normalisation
from biaslab.data.gender import caption_gender, neutralise
from biaslab.runtime.io import (InputError, load_params, read_parquet, skip_without_captions,
                                write_json)
from biaslab.metrics.retrieval import (balanced_gallery, clip_clip_keep, recall_at_k,
                                       retrieval_bias, retrieval_difference, tfidf_scores)

DEFAULTS = {"ks": [10, 25, 50, 100], "scorer": "data/scorer", "n_boot": 2000, "seed": 0,
            "clip_m": 50, "n_balanced": 5, "recall_ks": [1, 5, 10]}


def main() -> None:
    params = load_params()
    # params.yaml is validated by load_params (biaslab.runtime.validate.check_eval_retrieval)
    e = {**DEFAULTS, **(params.get("eval_retrieval") or {})}
    if skip_without_captions("eval_retrieval", ["metrics/retrieval.json"]):
        return
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
    pos = {i: j for j, i in enumerate(ids)}
    queries, targets, docs = [], [], {i: [] for i in ids}
    for iid, c in zip(caps["image_id"].astype(int), caps["caption"].astype(str)):
        docs[iid].append(neutralise(c, words))
        if caption_gender(c, words) in ("female", "male"):
            queries.append(neutralise(c, words))
            targets.append(pos[iid])
    if not queries:
        raise InputError("data/prepared/captions.parquet", "no gendered test caption to "
                                                           "neutralise into a query")
    from biaslab.models.clipscorer import load_scorer
    scorer = load_scorer(e["scorer"])
    cfg = scorer.config
    threads = (params.get("lic") or {}).get("num_threads")
    feats = C.image_features(table, cache, cfg["image_encoder"], cfg.get("image_size"),
                             num_threads=threads, progress=True)
    img = scorer.encode_images(np.asarray(feats, np.float32))
    txt = scorer.encode_texts(queries)
    # CLIP-clip: the m dimensions most informative of gender on the training images
    train = images[images["image_id"].isin(
        set(split.loc[split["split"] == "train", "image_id"].astype(int)))][
        ["image_id", "path"]].sort_values("image_id", ignore_index=True)
    train_g = [labels.get(int(i), "undefined") for i in train["image_id"]]
    train_img = scorer.encode_images(np.asarray(C.image_features(
        train, cache, cfg["image_encoder"], cfg.get("image_size"), num_threads=threads,
        progress=True), np.float32))
    m = int(e["clip_m"])
    try:
        keep, mi = clip_clip_keep(train_img, train_g, m, seed=int(e["seed"]))
    except ValueError as err:
        raise InputError("data/split.parquet", f"CLIP-clip: {err}") from None
    ks = [int(k) for k in e["ks"]]
    n_boot, seed = int(e["n_boot"]), int(e["seed"])
    rng = np.random.default_rng(seed)
    scores = {"scorer": txt @ img.T,
              "clip_clip": _l2(txt[:, keep]) @ _l2(img[:, keep]).T,
              "tfidf": tfidf_scores(queries, [" ".join(docs[i]) for i in ids]),
              "random": rng.random((len(queries), len(ids)))}
    out = {name: retrieval_bias(sc, gallery, ks, n_boot=n_boot, seed=seed)
           for name, sc in scores.items()}
    # paired by query: the claims of paper 001 (biaslab.analysis.validity.retrieval_checks)
    out["differences"] = {f"{x}-{y}": retrieval_difference(scores[x], scores[y], gallery, ks,
                                                         n_boot=n_boot, seed=seed)
                          for x, y in (("tfidf", "random"), ("clip_clip", "scorer"))}
    # paper 001 Table 1, "COCO Val (Balanced)": the majority group sampled down, 5 runs
    out["balanced"] = _balanced(scores, gallery, targets, ks, int(e["n_balanced"]), seed)
    out["recall"] = {name: recall_at_k(scores[name], targets, e["recall_ks"], n_boot=n_boot,
                                       seed=seed) for name in ("scorer", "clip_clip", "tfidf")}
    n_f, n_m = gallery.count("female"), gallery.count("male")
    out["setup"] = {"n_queries": len(queries), "n_gallery": len(ids), "n_female": n_f,
                    "n_male": n_m, "n_undefined": len(ids) - n_f - n_m, "gender_source": used,
                    "desired_female": n_f / (n_f + n_m) if n_f + n_m else None, "ks": ks,
                    "n_boot": n_boot, "clip_m": m, "embedding_dim": int(img.shape[1]),
                    "clip_mi_images": int(sum(g in ("female", "male") for g in train_g)),
                    "clip_mi_top": [float(x) for x in np.sort(mi)[::-1][:5]],
                    "n_balanced": int(e["n_balanced"]), "recall_ks": list(e["recall_ks"])}
    # paper 001's GenSynth: the contrast set of stage contrast_set (both groups' versions of
    # each kept test image, background fixed)
    out["contrast"] = _contrast(e, scorer, cfg, cache, threads, keep, docs, queries, targets,
                                ids, seed, n_boot)
    write_json("metrics/retrieval.json", out)
    for row in scores:
        print(f"eval_retrieval {row}: " + ", ".join(
            f"{k}={v['mean']:.3f}±{v['ci95'] or 0:.3f}" for k, v in out[row].items()
            if v["mean"] is not None))
    if max(ks) >= len(ids):
        print(f"eval_retrieval: note: K={max(ks)} >= gallery size {len(ids)}: that K ranks "
              f"the whole gallery and reads only its balance")


def _contrast(e: dict, scorer, cfg: dict, cache: str, threads, keep, docs: dict,
              queries: list, targets: list, ids: list, seed: int, n_boot: int) -> dict:
    """The four rankings on the contrast set (``data/contrast/pairs.parquet``): the gallery is
    both versions of every kept source image (g(I) = the version's group, so the gallery is
    balanced by construction), the queries are the kept images' queries of the natural set.
    Both versions of an image share its captions, so TF-IDF scores them equally: the gallery
    is put in a seeded random order first, so that ties fall to either version alike (a stable
    sort would always rank the first-listed group higher)."""
    import pandas as pd

    from biaslab import captioner as C
    from biaslab.counterfactual.generate import stable_hash
    path = Path("data/contrast/pairs.parquet")
    if not path.exists():
        return {"note": "no contrast set (stage contrast_set did not write one)"}
    stored = read_parquet(path)
    if stored.empty:
        return {"note": "the contrast set is empty: no test image kept both versions"}
    rng = np.random.default_rng(seed + 1)
    pairs = stored.iloc[rng.permutation(len(stored))].reset_index(drop=True)
    src = pairs["image_id"].astype(int).tolist()
    gallery = pairs["group"].astype(str).tolist()
    kept = set(src)
    rows = [q for q, t in enumerate(targets) if ids[t] in kept]
    if not rows:
        return {"note": "no gendered caption among the contrast set's source images"}
    paths = pairs["path"].astype(str).tolist()
    feats = C.image_features(pd.DataFrame({"image_id": [stable_hash(p) >> 1 for p in paths],
                                           "path": paths}), cache, cfg["image_encoder"],
                             cfg.get("image_size"), num_threads=threads, progress=True)
    img = scorer.encode_images(np.asarray(feats, np.float32))
    txt = scorer.encode_texts([queries[q] for q in rows])
    scores = {"scorer": txt @ img.T,
              "clip_clip": _l2(txt[:, keep]) @ _l2(img[:, keep]).T,
              "tfidf": tfidf_scores([queries[q] for q in rows], [" ".join(docs[i]) for i in src]),
              "random": rng.random((len(rows), len(src)))}
    ks = [int(k) for k in e["ks"] if int(k) < len(src)]
    out = {name: retrieval_bias(sc, gallery, ks, n_boot=n_boot, seed=seed)
           for name, sc in scores.items()}
    out["differences"] = {f"{x}-{y}": retrieval_difference(scores[x], scores[y], gallery, ks,
                                                         n_boot=n_boot, seed=seed)
                          for x, y in (("tfidf", "random"), ("scorer", "random"),
                                       ("clip_clip", "scorer"))}
    out["setup"] = {"n_queries": len(rows), "n_gallery": len(src),
                    "n_source_images": len(kept), "n_female": gallery.count("female"),
                    "n_male": gallery.count("male"), "n_undefined": 0, "ks": ks}
    cands = read_parquet("data/contrast/candidates.parquet")
    from biaslab.counterfactual.contrast import contrast_counts
    out["set"] = contrast_counts(cands, cands["knn_accept"].to_numpy(), stored)
    return out


def _balanced(scores: dict, gallery: list, targets: list, ks: list, n: int, seed: int) -> dict:
    """Bias@K / MaxSkew@K of each model on ``n`` balanced resamples of the test set
    (``balanced_gallery``, seeds ``seed`` ... ``seed + n - 1``): the kept images are the
    gallery and their captions the queries (a balanced data set, images and captions, as
    paper 001's "COCO Val (Balanced)"; queries of dropped images would keep the natural
    set's 2.3 : 1 mix of contexts). Mean over the resamples, their std and t-based 95 % CI
    (paper 001 Table 1 reports mean ± std over 5 runs)."""
    from biaslab.runtime import stats
    per = {name: {} for name in scores}
    t = np.asarray(targets)
    for r in range(n):
        idx = balanced_gallery(gallery, seed + r)
        g = [gallery[j] for j in idx]
        rows = np.flatnonzero(np.isin(t, idx))
        for name, sc in scores.items():
            res = retrieval_bias(sc[np.ix_(rows, idx)], g, [k for k in ks if k < len(idx)],
                                 n_boot=100, seed=seed)
            for key, v in res.items():
                per[name].setdefault(key, []).append(v["mean"])
    return {name: {key: {k: v for k, v in stats.summarize(vals).items()
                         if k in ("mean", "ci95", "std", "n")} for key, vals in d.items()}
            for name, d in per.items()}


if __name__ == "__main__":
    try:
        main()
    except InputError as e:
        sys.exit(f"eval_retrieval: {e}")
