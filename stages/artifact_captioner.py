"""Stage `artifact_captioner`: the synthetic-artifact test of paper 000 sec. 3.3 / Table 3 for
the captioners (the ClipCap columns; stage `artifact_test` does the classifiers).

The captioners trained on `artifact.datasets` caption the real test images with a person and
the same images with a random body part inpainted (stage artifact_test, data/artifact/); the
caption-gender ratio r = #man / #woman captions (Burns et al.; `label.words`) is compared:
Delta = 100 |Ratio_orig - Ratio_inp| / Ratio_orig (biaslab.analysis.artifact.caption_artifact_scores). `flip_rate`: % of
images whose caption gender (man / woman / neutral) changes.

params: artifact.datasets, artifact.seed, captioner.seeds, captioner.beam, captioner.max_len,
        captioner.no_repeat_ngram, label.words, features.cache_dir, eval_captioner.workers
        (captioners run at once on forked workers; the output does not depend on it)
in:   data/artifact/parts.parquet + images (stage artifact_test), data/prepared/images.parquet,
      data/models/captioner/<dataset>/<dataset>-<seed>/
Over the captioner seeds (biaslab.analysis.artifact.table3_json): Delta from the SEED-MEAN ratios, with a
percentile bootstrap 95 % CI over test images, beside the per-seed ratios and Deltas.

out:  metrics/artifact_captioner.json ({dataset: {ratio_orig, ratio_inp: record, delta: {mean,
      ci95, lo, hi, n, n_boot, n_undefined}, delta_seeds: record, flip_rate: record,
      per_seed: [{seed, ratio_orig, ratio_inp, delta, flip_rate, n_man_orig, n_woman_orig,
      n_neutral_orig, ..._inp}]}, test_set: {n_images, n_male, n_female, ratio_gt}}; record
      = {mean, ci95, std, n, n_inf, n_missing, sign}),
      data/artifact_captions/<dataset>-<seed>.json ({image_id: {orig, inp}})
"""

import pandas as pd

from biaslab.captioning.clipcap import Captioner
from biaslab.captioning.data import image_features, path_id
from biaslab.analysis.artifact import caption_artifact_scores, caption_calls, table3_json
from biaslab.runtime.io import (InputError, json_number, load_params, read_parquet, run_stage,
                                stage_parser, write_json)
from biaslab.runtime.parallel import map_jobs
from biaslab.runtime.paths import model_dir
from biaslab.runtime.io import skip_without_captions


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()
    if skip_without_captions("artifact_captioner", ["data/artifact_captions",
                                                    "metrics/artifact_captioner.json"]):
        return 0
    a, p = params["artifact"], params["captioner"]
    words = params.get("label", {}).get("words", "lic")
    cache = params.get("features", {}).get("cache_dir", "data/cache/features")
    parts = read_parquet("data/artifact/parts.parquet")
    if parts.empty:
        raise InputError("data/artifact/parts.parquet", "no inpainted test image")
    images = read_parquet("data/prepared/images.parquet").set_index("image_id")
    ids = parts["image_id"].astype(int).tolist()
    orig = pd.DataFrame({"image_id": ids, "path": images.loc[ids, "path"].astype(str).tolist()})
    inp = pd.DataFrame({"image_id": [path_id(x) for x in parts["path"].astype(str)],
                        "path": parts["path"].astype(str).tolist()})
    genders = parts["gender"].astype(str).tolist()
    datasets = list(a.get("datasets", ["original", "augment", "synthetic"]))
    jobs = [(d, int(s)) for d in datasets for s in p["seeds"]]
    # features of every captioner's encoder are read before the fork (workers inherit them)
    feats: dict = {}
    for dataset, seed in jobs:
        cfg = Captioner.load(model_dir("captioner", dataset, seed)).config
        key = (cfg.image_encoder, cfg.image_size)
        if key not in feats:
            feats[key] = tuple(image_features(t, cache, *key, num_threads=cfg.num_threads,
                                                progress=True, executor=params.get("executor"))
                               for t in (orig, inp))
    kw = dict(beam=p.get("beam"), max_len=p.get("max_len"),
              no_repeat_ngram=p.get("no_repeat_ngram"))

    def caption(job: tuple[str, int]) -> tuple[list, list]:
        model = Captioner.load(model_dir("captioner", *job))
        f = feats[(model.config.image_encoder, model.config.image_size)]
        return model.generate(f[0], **kw), model.generate(f[1], **kw)

    # one job per (dataset, seed) on eval_captioner.workers forked processes: each caption is
    # a function of its model and image only, so the results equal a sequential run
    workers = int((params.get("eval_captioner") or {}).get("workers", 1) or 1)
    done = dict(zip(jobs, map_jobs(caption, jobs, workers)))
    out = {}
    for dataset in datasets:
        per_seed, calls = [], []
        for seed in p["seeds"]:
            c_o, c_i = done[(dataset, int(seed))]
            write_json(f"data/artifact_captions/{dataset}-{seed}.json",
                       {str(i): {"orig": o, "inp": n} for i, o, n in zip(ids, c_o, c_i)})
            s = caption_artifact_scores(c_o, c_i, genders, words)
            per_seed.append({"seed": int(seed), **{k: json_number(v) for k, v in s.items()}})
            calls.append((*caption_calls(c_o, genders, words),
                          *caption_calls(c_i, genders, words)))
        out[dataset] = table3_json(calls, per_seed, seed=int(a.get("seed", 0)))
        d = out[dataset]
        print(dataset, {"ratio_orig": d["ratio_orig"]["mean"], "ratio_inp": d["ratio_inp"]["mean"],
                        "delta": d["delta"]["mean"], "delta_ci95": d["delta"]["ci95"]})
    n_m, n_f = genders.count("male"), genders.count("female")
    out["test_set"] = {"n_images": len(ids), "n_male": n_m, "n_female": n_f,
                       "ratio_gt": json_number(n_m / n_f) if n_f else None}
    write_json("metrics/artifact_captioner.json", out)
    return 0



if __name__ == "__main__":
    run_stage(main)
