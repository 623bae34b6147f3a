"""Stage `score`: every filter on every candidate (paper 000 Eqs. 4-6; GenSynth KNN filter,
paper 001 Eqs. 1-2) -> data/score/scores.parquet, metrics/score.json.

Candidate and original features come from the persistent feature cache (biaslab.features), so
each image is encoded once; `filters.weights` is not a parameter here, so a weights-only
experiment never re-runs this stage.
"""
import time

import numpy as np
import pandas as pd
from PIL import Image
from tqdm import tqdm

from biaslab.clipscorer import load_scorer
from biaslab.counterfactual.generate import stable_hash
from biaslab.features import encode_cached, set_threads
from biaslab.filters import FILTERS, color_fidelity, knn_filter, prompt_adherence
from biaslab.io import load_params, read_parquet, write_json, write_parquet
from biaslab.objects import load_object_predictor, object_f1


def main() -> None:
    params = load_params()
    fp, p = params["features"], params["filters"]
    set_threads(fp.get("threads"))
    cands = read_parquet("data/generate/candidates.parquet").reset_index(drop=True)
    images = read_parquet("data/prepared/images.parquet").set_index("image_id")
    t0 = time.perf_counter()
    enc = dict(cache_dir=fp.get("cache_dir", "data/cache/features"), name=fp["backbone"],
               image_size=fp.get("image_size"), batch_size=fp["batch_size"],
               num_threads=fp.get("threads"), progress=True)
    # Candidates have no image id of their own: key the cache by a stable hash of the path.
    ctab = pd.DataFrame({"image_id": [stable_hash(x) >> 1 for x in cands["path"]],
                         "path": cands["path"]})
    _, fc = encode_cached(ctab, **enc)
    src = pd.DataFrame({"image_id": sorted(cands["image_id"].unique())})
    src["path"] = src["image_id"].map(images["path"])
    oid, fo = encode_cached(src, **enc)
    orow = {int(i): k for k, i in enumerate(oid)}
    t_feat = time.perf_counter() - t0

    scorer = load_scorer("data/scorer")
    cands["prompt_adherence"] = prompt_adherence(scorer.encode_images(fc),
                                                 scorer.encode_texts(cands["prompt"].tolist()))
    objp = load_object_predictor("data/objects")
    sets_c = objp.predict_sets(fc)
    sets_o = objp.predict_sets(fo)
    cands["object_consistency"] = [object_f1(sc, sets_o[orow[int(i)]])
                                   for sc, i in zip(sets_c, cands["image_id"])]
    color, cache = [], {}
    for path, iid in tqdm(zip(cands["path"], cands["image_id"]), total=len(cands),
                          desc="color fidelity"):
        if iid not in cache:
            cache = {iid: Image.open(images.loc[iid, "path"]).convert("RGB")}
        color.append(color_fidelity(Image.open(path).convert("RGB"), cache[iid]))
    cands["color_fidelity"] = color

    # GenSynth KNN filter on scorer image embeddings (GenSynth embeds person crops with CLIP;
    # we embed whole images with the offline scorer: documented deviation).
    labels = read_parquet("data/labels/images.parquet").set_index("image_id")["gender"]
    real_g = [labels.get(int(i), "undefined") for i in oid]
    knn = knn_filter(scorer.encode_images(fo), real_g, scorer.encode_images(fc),
                     cands["group"].tolist(), k=p["knn_k"], tau_r=p["knn_tau_r"],
                     tau_g=p["knn_tau_g"])
    cands["knn_P_R"], cands["knn_P_G"] = knn["P_R"].to_numpy(), knn["P_G"].to_numpy()
    cands["knn_accept"] = knn["accept"].to_numpy()
    write_parquet("data/score/scores.parquet", cands)
    secs = time.perf_counter() - t0
    m = {"candidates": len(cands), "knn_accept_fraction": float(cands["knn_accept"].mean())}
    for f in FILTERS:
        v = cands[f].replace([np.inf], np.nan)
        m[f"{f}/mean"], m[f"{f}/std"] = float(v.mean()), float(v.std())
    write_json("metrics/score.json", m)
    print(m, f"features {t_feat:.1f}s, total {secs:.1f}s")


if __name__ == "__main__":
    main()
