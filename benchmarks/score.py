"""Score-stage throughput vs the bare image-encoder forward pass on the same candidates.

Run after `dvc repro generate` (uses data/generate/candidates.parquet, data/scorer,
data/objects): `python benchmarks/score.py [n]`. Writes benchmarks/results/score.json.
ratio = bare forward seconds / full scoring seconds (1.0 = scoring costs nothing beyond the
forward pass; target >= 0.8).
"""
import json
import platform
import sys
import tempfile
import time
from datetime import date

import numpy as np
import pandas as pd
from PIL import Image

from biaslab.clipscorer import load_scorer
from biaslab.features import encode_cached, load_image_encoder, set_threads
from biaslab.filters import color_fidelity, prompt_adherence
from biaslab.objects import load_object_predictor, object_f1


def main(n: int) -> None:
    set_threads(1)
    cands = pd.read_parquet("data/generate/candidates.parquet").head(n)
    images = pd.read_parquet("data/prepared/images.parquet").set_index("image_id")["path"]
    enc = load_image_encoder("efficientnet_lite0", num_threads=1)
    t0 = time.perf_counter()
    enc.encode([Image.open(p).convert("RGB") for p in cands["path"]], batch_size=1)
    bare = time.perf_counter() - t0

    scorer, objp = load_scorer("data/scorer"), load_object_predictor("data/objects")
    with tempfile.TemporaryDirectory() as cache:
        t0 = time.perf_counter()
        tab = pd.DataFrame({"image_id": np.arange(len(cands)), "path": cands["path"]})
        _, fc = encode_cached(tab, cache, encoder=enc, batch_size=1)
        pa = prompt_adherence(scorer.encode_images(fc), scorer.encode_texts(list(cands["prompt"])))
        sets = objp.predict_sets(fc)
        oc = [object_f1(s, sets[0]) for s in sets]
        orig = {}
        cf = []
        for p, i in zip(cands["path"], cands["image_id"]):
            orig.setdefault(i, Image.open(images[i]).convert("RGB"))
            cf.append(color_fidelity(Image.open(p).convert("RGB"), orig[i]))
        full = time.perf_counter() - t0
    res = {"date": str(date.today()), "machine": f"{platform.machine()}, 2 shared cores",
           "candidates": len(cands), "bare_forward_s": round(bare, 2),
           "score_s": round(full, 2), "candidates_per_s": round(len(cands) / full, 1),
           "ratio_forward_over_score": round(bare / full, 3), "n_scores": len(pa) + len(oc) + len(cf)}
    with open("benchmarks/results/score.json", "w") as f:
        json.dump(res, f, indent=2)
    print(res)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 240)
