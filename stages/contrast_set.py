"""Stage `contrast_set`: GenSynth's gender-balanced contrast set of the test split (paper 001
sec. 4): every test image whose persons can be masked is edited into one
version per group with the background fixed (the masks of stage `masks` and the backend of
`generate.backend`, through the same code: biaslab.counterfactual), each version is judged by
the KNN filter (paper 001 Eqs. 1-2: K, tau_R, tau_G of `filters.knn_*`; the real images R are
the test originals, embedded as stage `score` embeds them, with the CLIP-style scorer), and a
source image is kept only when both versions pass (sec. 4.2). The paper tier edits with
GenSynth's own editor, InstructPix2Pix on the person's box (``contrast.generate``,
conf/models/paper.yaml). Stage `eval_retrieval` ranks it beside the natural gallery.

params: contrast (splits, m, workers: forked processes that encode the versions for the KNN
        filter, generate: generate params overriding the training
        counterfactuals' for the contrast set, e.g. the paper tier's backend instruct_pix2pix
        with paper 001's steps and guidance scales), masks (shape, dilate_px, area_threshold_px, reference_long_side,
        crowd_min_inside, sam_model), generate (backend and its settings, guidance_scales,
        seed, shards), filters (clip, knn_k, knn_tau_r, knn_tau_g), features.cache_dir,
        label.words, data.root (render: the synthetic dataset), lic.num_threads
in:   data/prepared/{images,persons,captions,objects}.parquet, data/labels/images.parquet,
      data/split.parquet, data/scorer
out:  data/contrast/ (masks/png/*.png, images/*, shards/ (the generator's resume tables),
      candidates.parquet: every candidate with
      knn_P_R, knn_P_G, knn_accept; pairs.parquet: image_id, group, j, path, two rows per kept
      source image), metrics/contrast.json ({"backend", "splits", "m", "masks": counts,
      "work": counts, "knn": {"k", "tau_r", "tau_g"}, "source_images", "candidates",
      "accepted": {group: n}, "accept_fraction", "pairs", "pair_fraction"}). Data without
      captions (OpenImages) writes skip records, as the other retrieval stages.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from biaslab.counterfactual.contrast import ContrastSettings
from biaslab.runtime.io import (InputError, load_params, read_parquet, run_stage,
                                skip_without_captions, stage_parser, write_json, write_parquet)

OUT = Path("data/contrast")
METRICS = "metrics/contrast.json"


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()
    # params.yaml is validated by load_params (biaslab.runtime.validate.check_contrast)
    try:
        c = ContrastSettings.from_params(params)
    except ValueError as err:
        raise InputError("params.yaml", str(err)) from err
    # the directory out holds a skipped.json (biaslab.runtime.io.is_skipped reads it)
    if skip_without_captions("contrast_set", [METRICS, str(OUT)]):
        return 0
    from biaslab.captioning.data import image_features
    from biaslab.models.clipscorer import load_scorer
    from biaslab.counterfactual.contrast import contrast_counts, contrast_pairs
    from biaslab.counterfactual import generate as gen
    from biaslab.counterfactual.generate import stable_hash
    from biaslab.counterfactual.masks import build_masks_from_params
    from biaslab.counterfactual.filters import knn_filter
    from biaslab.data.labels import captions_or_label_texts

    # the editor: the training counterfactuals' backend unless contrast.generate overrides it
    # (the paper tier: GenSynth's InstructPix2Pix, paper 001 sec. 4.1)
    mp, gp, fp = params["masks"], {**params["generate"], **c.generate}, params["filters"]
    words = (params.get("label") or {}).get("words", "lic")
    scorer_dir = fp.get("clip") or "data/scorer"
    if not Path(scorer_dir).exists():
        raise InputError(scorer_dir, "missing: no CLIP-style scorer there (run stage "
                                     "train_scorer)")
    images = read_parquet("data/prepared/images.parquet")
    persons = read_parquet("data/prepared/persons.parquet")
    labels = read_parquet("data/labels/images.parquet")
    split = read_parquet("data/split.parquet")
    if mp.get("shape") == "sam":
        raise InputError("params.yaml", "contrast_set does not run SAM masks yet (masks.shape "
                                        "sam); use polygon or box")
    masks, mcounts = build_masks_from_params(mp, images, persons, labels, split,
                                             str(OUT / "masks" / "png"), splits=list(c.splits))
    if masks.empty:
        raise InputError("data/split.parquet", f"no maskable person in the {list(c.splits)} "
                                               f"split(s): no contrast set")
    caps, _ = captions_or_label_texts(read_parquet("data/prepared/captions.parquet"),
                                      "data/labels/images.parquet",
                                      "data/prepared/objects.parquet")
    prompts = gen.make_prompts(caps, masks["image_id"], words=words)
    work, wcounts = gen.build_work(masks, images, persons, prompts, shards=int(gp["shards"]))
    gp["m"] = c.m
    backend = gen.make_backend(gp, persons=persons, images=images, labels=labels, split=split,
                               data_root=(params.get("data") or {}).get("root"))
    cands, _ = gen.generate_candidates(work, backend, OUT, m=c.m,
                                       guidance_scales=gp["guidance_scales"],
                                       seed=int(gp["seed"]), shards=int(gp["shards"]))
    # the KNN filter (paper 001 Eqs. 1-2) in the scorer's space, as stage score runs it
    scorer = load_scorer(scorer_dir)
    threads = (params.get("lic") or {}).get("num_threads")
    cache = (params.get("features") or {}).get("cache_dir", "data/cache/features")

    def embed(table: pd.DataFrame) -> np.ndarray:
        """Scorer image embeddings of ``table`` (image_id, path): the offline LiT scorer takes
        the cached backbone features, a Hugging Face CLIP (paper tier) the paths."""
        if not getattr(scorer, "accepts_features", False):
            return np.asarray(scorer.encode_images(table["path"].astype(str).tolist()))
        cfg = scorer.config
        return scorer.encode_images(np.asarray(image_features(
            table, cache, cfg["image_encoder"], cfg.get("image_size"), num_threads=threads,
            progress=True, workers=c.workers), np.float32))
    ids = sorted(int(i) for i in cands["image_id"].unique())
    orig = images[images["image_id"].isin(ids)][["image_id", "path"]].sort_values(
        "image_id", ignore_index=True)
    cpaths = cands["path"].astype(str).tolist()
    synth = pd.DataFrame({"image_id": [stable_hash(p) >> 1 for p in cpaths], "path": cpaths})
    gender = labels.set_index("image_id")["gender"]
    knn = {"k": int(fp["knn_k"]), "tau_r": float(fp["knn_tau_r"]),
           "tau_g": float(fp["knn_tau_g"])}
    r = knn_filter(embed(orig), [str(gender.get(i, "undefined")) for i in ids], embed(synth),
                   cands["group"].tolist(), **knn)
    cands = cands.assign(knn_P_R=r["P_R"].to_numpy(), knn_P_G=r["P_G"].to_numpy(),
                         knn_accept=r["accept"].to_numpy().astype(bool))
    pairs = contrast_pairs(cands, cands["knn_accept"].to_numpy())
    write_parquet(OUT / "candidates.parquet", cands)
    write_parquet(OUT / "pairs.parquet", pairs)
    m = {"backend": backend.name, "splits": list(c.splits), "m": c.m, "masks": mcounts,
         "work": wcounts, "knn": knn, **contrast_counts(cands, cands["knn_accept"], pairs)}
    write_json(METRICS, m)
    print(f"contrast_set: {m['pairs']} of {m['source_images']} source images kept in both "
          f"groups' versions ({backend.name}, KNN accept {m['accept_fraction']:.2f})")
    return 0


if __name__ == "__main__":
    run_stage(main)
