"""Stage `score`: every filter on every candidate (paper 000 Eqs. 4-6; GenSynth KNN filter,
paper 001 Eqs. 1-2) -> data/score/scores.parquet, metrics/score.json.

The work is ``biaslab.counterfactual.filters.score_candidates``. Backbone features of candidates and
originals come from the persistent feature cache (biaslab.models.features), so each image is decoded
and encoded once (the originals were encoded by stage `features`). Params `executor`
(biaslab.runtime.executor): Ray encodes the candidates missing from the cache on worker actors (the
unit of work: a few whole batches); the cheap heads, colour fidelity and KNN run here, so the
output does not depend on the executor. `filters.clip` /
`filters.detector` name a Hugging Face CLIP / object detector (paper tier); null means the
models trained here (data/scorer, data/objects). `filters.names` picks the filters (registered
in biaslab.registry.FILTERS: the paper's three, or a plug-in's); `filters.weights` is not a
parameter here, so a weights-only experiment never re-runs this stage. The KNN filter's real
images are labelled with their group of the param `attribute` (gender from the captions; skin
tone from the perceived bb_skin of data/prepared/perceived_gender.parquet).
"""
import time

import numpy as np

from biaslab.runtime import executor
from biaslab.models.clipscorer import load_scorer
from biaslab.models.features import encode_cached, set_threads
from biaslab import registry
from biaslab.counterfactual.filters import score_candidates
from biaslab.runtime.io import (load_params, read_parquet, run_stage, stage_parser, write_json,
                                write_parquet)
from biaslab.models.objects import load_object_predictor


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()
    fp, p = params["features"], params["filters"]
    set_threads(fp.get("threads"))
    cands = read_parquet("data/generate/candidates.parquet").reset_index(drop=True)
    images = read_parquet("data/prepared/images.parquet").set_index("image_id")
    labels = read_parquet("data/labels/images.parquet").set_index("image_id")["gender"]
    attribute = params.get("attribute", "gender")
    if attribute != "gender":   # the KNN filter's real images carry the attribute's group
        from biaslab.analysis.attribute_eval import PERCEIVED, group_labels
        labels = group_labels(attribute, labels.to_dict(), read_parquet(PERCEIVED))
    enc = dict(cache_dir=fp.get("cache_dir", "data/cache/features"), name=fp["backbone"],
               image_size=fp.get("image_size"), batch_size=fp["batch_size"],
               num_threads=fp.get("threads"), progress=True)
    scorer = load_scorer(p.get("clip") or "data/scorer")
    objp = load_object_predictor(p.get("detector") or "data/objects")
    t0 = time.perf_counter()
    timings: dict = {}
    with executor.session(params.get("executor")) as ex:   # one Ray cluster for both encodings
        scores = score_candidates(
            cands, images["path"].to_dict(), scorer, objp,
            encode=lambda table: encode_cached(table, **enc, executor=ex)[1],
            real_groups={int(k): v for k, v in dict(labels).items()},
            knn={"k": p["knn_k"], "tau_r": p["knn_tau_r"], "tau_g": p["knn_tau_g"]},
            progress=True, timings=timings, names=list(p["names"]),
            settings=registry.FILTERS.settings_for(p["names"], params))
    write_parquet("data/score/scores.parquet", scores)
    secs = time.perf_counter() - t0
    m = {"candidates": len(scores), "knn_accept_fraction": float(scores["knn_accept"].mean())}
    for f in p["names"]:
        v = scores[f].replace([np.inf], np.nan)
        m[f"{f}/mean"], m[f"{f}/std"] = float(v.mean()), float(v.std())
    write_json("metrics/score.json", m)
    print(m, {k: round(v, 1) for k, v in timings.items()}, f"total {secs:.1f}s")
    return 0


if __name__ == "__main__":
    run_stage(main)
