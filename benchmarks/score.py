"""Score-stage throughput against the bare model forward passes on the same candidates.

Run after `dvc repro score` (uses data/generate/candidates.parquet, data/scorer, data/objects):
`python benchmarks/score.py [n [rounds]]`. Writes benchmarks/results/score.json.

Both sides run in this process with every model already loaded (loading is a one-off cost of
the stage, not of throughput):

* bare: the forward passes no scorer can avoid on this batch -- the image backbone on the n
  candidate images (decoded from disk, `features.batch_size`) and the text tower on the
  batch's distinct prompts t^(g');
* full: ``biaslab.counterfactual.filters.score_candidates``, exactly what stage `score` runs: feature cache
  (a fresh one, pre-filled with the originals as stage `features` leaves it), prompt
  adherence, object consistency, color fidelity and the KNN filter.

ratio = bare seconds / full seconds (1.0 = scoring costs nothing beyond the forward passes;
target >= 0.8). The machine is shared, so after a warm-up both sides run ``rounds`` times,
alternating, and the minimum of each is kept (as ``timeit`` advises). Peak RSS is the process
maximum (``resource.getrusage``), in MiB.
"""
import json
import platform
import resource
import sys
import tempfile
import time
from datetime import date

import pandas as pd
import yaml

from biaslab.models.clipscorer import load_scorer
from biaslab.models.features import encode_cached, load_image_encoder, set_threads
from biaslab.counterfactual.filters import score_candidates
from biaslab.models.objects import load_object_predictor


def main(n: int = 240, rounds: int = 3) -> None:
    params = yaml.safe_load(open("params.yaml"))
    fp, p = params["features"], params["filters"]
    set_threads(fp.get("threads"))
    cands = pd.read_parquet("data/generate/candidates.parquet").head(n)
    images = pd.read_parquet("data/prepared/images.parquet").set_index("image_id")["path"]
    labels = pd.read_parquet("data/labels/images.parquet").set_index("image_id")["gender"]
    enc = load_image_encoder(fp["backbone"], image_size=fp.get("image_size"),
                             num_threads=fp.get("threads"))
    scorer, objp = load_scorer("data/scorer"), load_object_predictor("data/objects")
    text_tower = scorer.text_encoder()   # load outside the timings
    bs = int(fp["batch_size"])
    import sklearn.neighbors  # noqa: F401  (import once, like the models)
    enc.encode(list(cands["path"][:4]), batch_size=bs)  # warm-up
    ids = sorted(int(i) for i in cands["image_id"].unique())

    bare_image = bare_text = full = float("inf")
    parts: dict = {}
    for _ in range(rounds):
        t0 = time.perf_counter()
        enc.encode(list(cands["path"]), batch_size=bs)
        bare_image = min(bare_image, time.perf_counter() - t0)
        t0 = time.perf_counter()
        text_tower.encode(sorted(set(cands["prompt"])))
        bare_text = min(bare_text, time.perf_counter() - t0)

        with tempfile.TemporaryDirectory() as cache:
            def encode(table):
                return encode_cached(table, cache, encoder=enc, batch_size=bs)[1]
            encode(pd.DataFrame({"image_id": ids, "path": [images[i] for i in ids]}))
            t_parts: dict = {}
            t0 = time.perf_counter()
            out = score_candidates(cands, images.to_dict(), scorer, objp, encode=encode,
                                   real_groups=labels.to_dict(),
                                   knn={"k": p["knn_k"], "tau_r": p["knn_tau_r"],
                                        "tau_g": p["knn_tau_g"]}, timings=t_parts)
            secs = time.perf_counter() - t0
        if secs < full:
            full, parts = secs, t_parts
    bare = bare_image + bare_text
    res = {"date": str(date.today()), "machine": f"{platform.machine()}, 2 shared cores",
           "source": params["data"]["source"], "candidates": len(cands), "rounds": rounds,
           "distinct_prompts": int(cands["prompt"].nunique()), "batch_size": bs,
           "bare_image_forward_s": round(bare_image, 2), "bare_text_forward_s": round(bare_text, 2),
           "score_s": round(full, 2), "score_parts_s": {k: round(v, 2) for k, v in parts.items()},
           "candidates_per_s": round(len(cands) / full, 1),
           "ratio_forward_over_score": round(bare / full, 3),
           "n_scores": int(out[["prompt_adherence", "object_consistency",
                                "color_fidelity"]].notna().to_numpy().sum()),
           "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    with open("benchmarks/results/score.json", "w") as f:
        json.dump(res, f, indent=2)
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
