"""Stage `eval_captioner`: caption the real test images with every trained captioner and score
them as paper 000 Table 2 (METEOR, CLIPScore, Ratio, LIC) plus BLEU-4, CIDEr, Error, LIC_M,
LIC_D and BiasAmp (thesis Table 2.1); a "+LIBRA" row debiases the original-data captioner's
captions with the LIBRA DCG when one exists.

params: captioner.datasets, captioner.seeds, captioner.beam, captioner.max_len,
        captioner.no_repeat_ngram (decoding),
        eval_captioner (test_images, biasamp_min_count, batch_size, scorer, dcg), lic
        (classifier, preset, seeds, num_threads), label.words, features.cache_dir, libra.seed and
        libra.apply.num_beams (the +LIBRA row: DCG masking seed + captioner seed, beams; as
        stage dcg_apply)
in:   data/models/captioner/<dataset>-<seed>/ (stage train_captioner), data/split.parquet
      (split == test; test_images: gendered (default, paper 000: images labelled female/male)
      or all), data/prepared/{images,captions}.parquet (references = human captions),
      data/labels/images.parquet (female/male), <eval_captioner.scorer> (LiT CLIP scorer,
      optional: CLIPScore is skipped with a note when absent), <eval_captioner.dcg> (LIBRA DCG,
      optional: the +LIBRA row is skipped when absent)
out:  data/captions/<dataset>-<seed>.json (COCO results format), data/captions/
      original+LIBRA-<seed>.json, data/captions/eval.json (per-model metrics and details),
      metrics/captioning.json ({row: {metric: mean over seeds, metric_std, n_seeds}}),
      plots/captioning.csv (one row per training set, means)
"""
import csv
import sys
import time
from pathlib import Path

import numpy as np

from biaslab import captioner as C
from biaslab.cli import _jsonable
from biaslab.io import InputError, atomic_path, load_params, read_parquet, write_json

LIBRA = "original+LIBRA"
DEFAULTS = {"biasamp_min_count": 5, "batch_size": 64, "scorer": "data/scorer",
            "dcg": "data/libra/dcg", "test_images": "gendered"}


def _test_set(which: str):
    """Test images (``gendered``: labelled female/male, the paper 000 test set "retaining only
    images with gender-specific terms"; ``all``: every test image), their human captions and
    female/male labels."""
    if which not in ("gendered", "all"):
        raise InputError("params.yaml", f"eval_captioner.test_images must be 'gendered' or "
                                        f"'all', got {which!r}")
    split = read_parquet("data/split.parquet")
    images = read_parquet("data/prepared/images.parquet")
    lab = read_parquet("data/labels/images.parquet")
    test_ids = set(split.loc[split["split"] == "test", "image_id"].astype(int))
    if which == "gendered":
        test_ids &= set(lab.loc[lab["gender"].isin(["female", "male"]), "image_id"].astype(int))
    table = images[images["image_id"].isin(test_ids)][["image_id", "path"]] \
        .sort_values("image_id", ignore_index=True)
    if table.empty:
        raise InputError("data/split.parquet", "no test images")
    caps = read_parquet("data/prepared/captions.parquet")
    caps = caps[caps["image_id"].isin(test_ids)].sort_values(["image_id", "caption_id"])
    human = {int(i): list(g["caption"]) for i, g in caps.groupby("image_id")}
    genders = {int(i): g for i, g in zip(lab["image_id"], lab["gender"])
               if int(i) in test_ids and g in ("female", "male")}
    return table, human, genders


def _write_results(path: str, ids, captions) -> None:
    write_json(path, [{"image_id": int(i), "caption": c} for i, c in zip(ids, captions)])


def main() -> None:
    params = load_params()
    p, lp = params["captioner"], params["lic"]
    e = {**DEFAULTS, **(params.get("eval_captioner") or {})}
    words = params.get("label", {}).get("words", "lic")
    cache = params.get("features", {}).get("cache_dir", "data/cache/features")
    lib = params.get("libra") or {}
    libra_seed = int(lib.get("seed", 0))
    libra_beams = (lib.get("apply") or {}).get("num_beams")
    table, human, genders = _test_set(e["test_images"])
    ids = table["image_id"].astype(int).tolist()
    paths = dict(zip(ids, table["path"].astype(str)))

    scorer = None
    if Path(e["scorer"]).exists():
        from biaslab.clipscorer import load_scorer
        scorer = load_scorer(e["scorer"])
    else:
        print(f"eval_captioner: no CLIP scorer at {e['scorer']}: CLIPScore skipped")
    mkw = dict(scorer=scorer, image_paths=paths, words=words, classifier=lp["classifier"],
               preset=lp["preset"], seeds=lp["seeds"], num_threads=lp.get("num_threads"),
               biasamp_min_count=int(e["biasamp_min_count"]))
    feats_by_encoder: dict = {}

    def feats_for(model):
        key = (model.config.image_encoder, model.config.image_size)
        if key not in feats_by_encoder:
            feats_by_encoder[key] = C.image_features(
                table, cache, *key, num_threads=model.config.num_threads, progress=True)
        return feats_by_encoder[key]

    def scorer_feats():
        # the LiT scorer projects cached features of its own backbone (no re-encoding)
        cfg = getattr(scorer, "config", None)
        if not isinstance(cfg, dict) or "image_encoder" not in cfg:
            return None
        f = C.image_features(table, cache, cfg["image_encoder"], cfg.get("image_size"),
                             num_threads=lp.get("num_threads"))
        return dict(zip(ids, f))

    s_feats = scorer_feats() if scorer is not None else None
    datasets, seeds = list(p["datasets"]), [int(s) for s in p["seeds"]]
    missing = [f"{d}-{s}" for d in datasets for s in seeds
               if not Path(f"data/models/captioner/{d}-{s}/{C.CONFIG_FILE}").exists()]
    if missing:
        raise InputError("data/models/captioner", f"no trained captioner for {missing} "
                                                  f"(run train_captioner)")
    per_model, rows = {}, {}
    dcg_ok = Path(e["dcg"], "dcg.json").is_file()
    for d in datasets:
        for s in seeds:
            name = f"{d}-{s}"
            t0 = time.perf_counter()
            model = C.Captioner.load(f"data/models/captioner/{name}")
            preds = model.generate(feats_for(model), beam=p.get("beam"),
                                   max_len=p.get("max_len"), batch_size=e["batch_size"],
                                   no_repeat_ngram=p.get("no_repeat_ngram"))
            _write_results(f"data/captions/{name}.json", ids, preds)
            variants = [(d, name, preds)]
            if d == "original" and dcg_ok:
                deb = C.apply_libra(e["dcg"], preds, table, cache,
                                    seed=libra_seed + s, num_threads=lp.get("num_threads"),
                                    num_beams=libra_beams)
                _write_results(f"data/captions/{LIBRA}-{s}.json", ids, deb)
                variants.append((LIBRA, f"{LIBRA}-{s}", deb))
            for row, key, caps in variants:
                flat, det = C.caption_metrics(dict(zip(ids, caps)), genders, human,
                                              image_feats=s_feats, **mkw)
                flat["seconds"] = round(time.perf_counter() - t0, 1)
                per_model[key] = {"metrics": flat, "details": det,
                                  "examples": [{"image_id": i, "gender": genders.get(i),
                                                "caption": c, "human": human.get(i, [""])[0]}
                                               for i, c in list(zip(ids, caps))[:10]]}
                rows.setdefault(row, []).append(flat)
                print(f"eval_captioner {key}: " + ", ".join(
                    f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in flat.items()))
    if not dcg_ok:
        print(f"eval_captioner: no LIBRA DCG at {e['dcg']}: the +LIBRA row is skipped")
    order = ["original"] + ([LIBRA] if LIBRA in rows else []) + \
        [d for d in datasets if d != "original"]
    summary = {r: C.summarize_seeds(rows[r]) for r in order if r in rows}
    notes = {}
    if scorer is not None:  # reference: the first human caption of each test image
        hid = [i for i in ids if human.get(i)]
        notes["CLIPScore_human_first_caption"] = C.clip_score_for(
            scorer, [human[i][0] for i in hid], [paths[i] for i in hid],
            None if s_feats is None else np.stack([s_feats[i] for i in hid]))
    if scorer is None:
        notes["CLIPScore"] = f"skipped: no scorer at {e['scorer']}"
    if not dcg_ok:
        notes[LIBRA] = f"skipped: no DCG at {e['dcg']}"
    write_json("data/captions/eval.json", _jsonable({"models": per_model, "notes": notes,
                                                     "n_test_images": len(ids),
                                                     "n_test_gendered": len(genders)}))
    write_json("metrics/captioning.json", summary)
    with atomic_path("plots/captioning.csv") as tmp, open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["dataset", *C.METRICS])
        for r, m in summary.items():
            w.writerow([r, *["" if m[k] is None else m[k] for k in C.METRICS]])
    print(f"eval_captioner: {len(per_model)} result sets on {len(ids)} test images "
          f"({len(genders)} female/male)")


if __name__ == "__main__":
    try:
        main()
    except InputError as e:
        sys.exit(f"eval_captioner: {e}")
