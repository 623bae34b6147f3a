"""Benchmark: frozen backbones and LiT scorer training on real coco-mini data.

Measured (wall clock, ``--threads`` torch threads, on whatever else the machine is running;
the 1-minute load average before and after is recorded because the CPU is shared):

* EfficientNet-Lite0 images/s (224 px, JPEG decode + resize included) at batch 1, 8 and 32
  with 1 and ``--threads`` torch threads over the same ``--images`` coco-mini images (after a
  warm-up pass), ``--repeats`` interleaved repeats, median and best, and the batch-32 / batch-1
  ratio;
* MiniLM captions/s over ``--captions`` real COCO captions (batch 128, length-sorted), median
  and best of ``--repeats``;
* LiT training time (``biaslab.models.clipscorer.train_lit`` with the default params) with 1 and
  ``--threads`` torch threads, on real features when the ``encode_cached`` cache of stage
  ``features`` (``--cache``) holds them, else on random features of the same shape (stated in
  the results). Caption embeddings come from ``--text-cache`` when present.

Run: ``.venv/bin/python benchmarks/features.py`` (a few minutes on 2 shared cores); writes
``benchmarks/results/features.json``.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from biaslab.models.clipscorer import retrieval_recall, train_lit  # noqa: E402
from biaslab.models.settings import ScorerSettings  # noqa: E402
from biaslab.data.coco import read_coco  # noqa: E402
from biaslab.models.features import (cache_key, encode_cached, encode_texts_cached,  # noqa: E402
                                     load_image_encoder, load_text_encoder, set_threads)
from biaslab.runtime.io import write_json  # noqa: E402

COCO_MINI = REPO.parent / "shared" / "coco-mini"


def rate(fn, n: int) -> tuple[float, float]:
    t = time.perf_counter()
    fn()
    s = time.perf_counter() - t
    return n / s, s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--coco", default=str(COCO_MINI))
    ap.add_argument("--images", type=int, default=32)
    ap.add_argument("--captions", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache", default=str(REPO / "data" / "cache" / "features"),
                    help="encode_cached directory with efficientnet_lite0 features")
    ap.add_argument("--text-cache", default=str(REPO / "data" / "cache" / "text"),
                    help="encode_texts_cached directory (MiniLM caption embeddings)")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "features.json"))
    a = ap.parse_args()
    set_threads(a.threads)
    load0 = os.getloadavg()[0]
    tables, _ = read_coco(a.coco)
    images = tables["images"].sort_values("image_id").reset_index(drop=True)
    paths = images["path"].head(a.images).tolist()
    res: dict = {"date": dt.datetime.now().isoformat(timespec="seconds"),
                 "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                             "torch_threads": a.threads, "loadavg_1m_start": round(load0, 2)},
                 "data": f"coco-mini ({a.coco})"}

    enc = load_image_encoder("efficientnet_lite0", num_threads=a.threads)
    enc.encode(paths, batch_size=8)                      # warm-up (and OS file cache)
    eff: dict = {"n_images": len(paths), "image_size": 224, "repeats": a.repeats}
    for threads in sorted({1, a.threads}):
        set_threads(threads)
        runs: dict = {bs: [] for bs in (1, 8, 32)}
        for _ in range(a.repeats):   # interleaved repeats: the CPU is shared, load drifts
            for bs in runs:
                runs[bs].append(rate(lambda: enc.encode(paths, batch_size=bs), len(paths))[0])
        for bs, r in runs.items():
            eff[f"threads{threads}_batch{bs}_images_per_s_median"] = round(float(np.median(r)), 2)
            eff[f"threads{threads}_batch{bs}_images_per_s_best"] = round(max(r), 2)
        eff[f"threads{threads}_ratio_batch32_over_batch1_median"] = round(
            float(np.median(runs[32]) / np.median(runs[1])), 3)
    set_threads(a.threads)
    res["efficientnet_lite0"] = eff
    print(eff, flush=True)

    caps = tables["captions"].sort_values("caption_id")
    texts = caps["caption"].head(a.captions).tolist()
    tenc = load_text_encoder("minilm", num_threads=a.threads)
    tenc.encode(texts[:64])                                                  # warm-up
    rt = [rate(lambda: tenc.encode(texts, batch_size=128), len(texts))[0]
          for _ in range(a.repeats)]
    res["minilm"] = {"n_captions": len(texts), "repeats": a.repeats,
                     "captions_per_s_median": round(float(np.median(rt)), 1),
                     "captions_per_s_best": round(max(rt), 1),
                     "all": [round(r, 1) for r in rt]}
    print(res["minilm"], flush=True)

    # LiT: real features if the cache holds every image, else random ones of the same shape
    real = (Path(a.cache) / cache_key("efficientnet_lite0", 224) / "feats.npy").exists()
    if real:
        ids, feats = encode_cached(images[["image_id", "path"]], a.cache, "efficientnet_lite0",
                                   image_size=224)
    else:
        ids = images["image_id"].to_numpy()
        feats = np.random.default_rng(0).normal(size=(len(ids), 1280)).astype(np.float32)
    row = {int(i): k for k, i in enumerate(ids)}
    caps = caps[caps["image_id"].isin(row)]
    t0 = time.perf_counter()
    tstats: dict = {}
    txt = encode_texts_cached(caps["caption"].tolist(), a.text_cache, encoder=tenc, stats=tstats)
    text_s = time.perf_counter() - t0
    ti = caps["image_id"].map(row).to_numpy()
    perm = np.random.default_rng(0).permutation(len(ids))
    n_tr, n_va = int(0.7 * len(ids)), int(0.1 * len(ids))
    tr, va, te = perm[:n_tr], perm[n_tr:n_tr + n_va], np.sort(perm[n_tr + n_va:])
    lit = {}
    for threads in sorted({1, a.threads}):   # tiny matmuls: 1 thread often wins on shared CPUs
        t0 = time.perf_counter()
        scorer, hist = train_lit(feats, txt, ti, tr, va, settings=ScorerSettings(),
                                 num_threads=threads)
        lit[threads] = (time.perf_counter() - t0, scorer, hist)
    set_threads(a.threads)
    lit_s, scorer, hist = lit[1]
    mask = np.isin(ti, te)
    pos = {int(r): k for k, r in enumerate(te)}
    m = retrieval_recall(scorer.encode_images(feats[te]), scorer.encode_texts(txt[mask]),
                         np.array([pos[int(r)] for r in ti[mask]]))
    res["lit"] = {"features": "real coco-mini" if real else "random (no feature cache)",
                  "n_train_images": len(tr), "n_captions_encoded": int(len(txt)),
                  "caption_encoding_seconds": round(text_s, 1),
                  "captions_from_cache": tstats["cached"],
                  "epochs_run": len(hist),
                  **{f"train_seconds_{t}_threads": round(v[0], 1) for t, v in lit.items()},
                  "seconds_per_epoch_1_thread": round(lit_s / len(hist), 2),
                  "test_t2i_R@1": round(m["t2i_R@1"], 4), "test_i2t_R@1": round(m["i2t_R@1"], 4),
                  "chance_t2i_R@1": round(m["chance_t2i_R@1"], 4),
                  "params": ScorerSettings().config()}
    print(res["lit"], flush=True)
    res["machine"]["loadavg_1m_end"] = round(os.getloadavg()[0], 2)
    write_json(a.out, res)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
