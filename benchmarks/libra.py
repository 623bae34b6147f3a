"""Benchmark: LIBRA throughput and memory on real COCO captions (coco-mini, CPU).

Measured (1 torch thread, the setting of the ci pipeline on 2 shared cores, and 2 threads for
T5 training):

* T5 training: tiny T5 (ci settings of params: d_model 128, d_ff 256, 2+2 layers) for one
  epoch on ``--captions`` captions at mask rate 0.1, ``reconstruct`` format (the ci default)
  and ``sentinel`` format: target tokens/s and input tokens/s; 2 threads for comparison.
* synthesis: T5 filling (Eq. 5: 15% of content words, top-k sampling, content-only fills) on
  ``--fill`` gendered captions, batched (128) vs batch 1: captions/s and the ratio, per format;
  plus the whole ``bcs.synthesize`` on them with a stub f_g and f_a (captions/s of D_g).
* DCG: tiny DCG (hidden 128, 2 layers, 4 image tokens, 1280-d random features) training
  samples/s and target tokens/s for one epoch on ``--dcg`` pairs; inference captions/s greedy
  (batch 64) and beam 3, and greedy batch 1.
* peak memory: the process's peak RSS (``ru_maxrss``) after each phase, MiB.

The weights are random/undertrained: this measures speed, not quality. Timings on a shared
machine vary with the other load (the ``load_average`` is recorded).

Run: ``.venv/bin/python benchmarks/libra.py`` (about 3-5 minutes); writes
``benchmarks/results/libra.json``.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from biaslab.data.gender import caption_gender  # noqa: E402
from biaslab.runtime.io import write_json  # noqa: E402
from biaslab.libra import bcs, dcg, t5  # noqa: E402

CAPTIONS = REPO.parent / "shared" / "coco-mini" / "annotations" / "captions_val2017.json"


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def load_captions(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    return [a["caption"] for a in sorted(data["annotations"], key=lambda a: a["id"])]


def bench_t5_train(caps: list[str], threads: int, fmt: str = "reconstruct"
                   ) -> tuple[dict, t5.T5Model]:
    s = t5.T5Settings(d_model=128, d_ff=256, layers=2, heads=4, epochs=1, batch_size=32,
                      num_threads=threads, format=fmt)
    t0 = time.perf_counter()
    m = t5.finetune(caps, s, seed=0)
    total = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    srcs, _, _, _ = t5._sample_masks(caps, 0.1, rng)
    n_in = sum(len(x) for x in m.tokenizer(srcs)["input_ids"])
    sec = m.meta["train_seconds"]
    return {"threads": threads, "format": fmt, "captions": len(caps), "seconds": round(sec, 2),
            "seconds_with_tokenizer": round(total, 2),
            "target_tokens_per_s": round(m.meta["train_tokens_per_s"], 1),
            "input_tokens_per_s": round(n_in / sec, 1),
            "captions_per_s": round(len(caps) / sec, 1)}, m


def bench_fill(m: t5.T5Model, caps: list[str]) -> dict:
    rng = np.random.default_rng(0)
    keep, poss = [], []
    for c in caps:
        pos = t5.sample_positions(len(t5.word_spans(c)), 0.15, rng, bcs.content_positions(c))
        if pos:
            keep.append(c)
            poss.append(pos)
    from biaslab.data.gender import gender_words
    banned = bcs.STOP_WORDS | bcs.NUMBER_WORDS | gender_words("libra")
    out = {"format": m.settings.format}
    for bs in (128, 1):
        k = len(keep) if bs > 1 else min(len(keep), 100)
        t0 = time.perf_counter()
        t5.fill_words(m, keep[:k], poss[:k], batch_size=bs, sample=True, seed=0,
                      banned_words=banned)
        out[f"batch_{bs}"] = {"captions": k,
                              "captions_per_s": round(k / (time.perf_counter() - t0), 1)}
    out["batched_vs_batch1"] = round(out["batch_128"]["captions_per_s"]
                                     / out["batch_1"]["captions_per_s"], 1)
    return out


def bench_synthesize(m: t5.T5Model, caps: list[str]) -> dict:
    import pandas as pd
    d = pd.DataFrame({"caption_id": range(len(caps)), "image_id": range(len(caps)),
                      "caption": caps})
    rng = np.random.default_rng(0)

    def stub_proba(texts):
        p = rng.uniform(size=len(texts))
        return np.stack([p, 1 - p], axis=1)

    s = bcs.BCSSettings(samples_per_caption=2, pos="auto")
    t0 = time.perf_counter()
    _, cand, met = bcs.synthesize(d, stub_proba, m, s,
                                  auth_fn=lambda syn, auth: (rng.uniform(size=len(syn)), {}))
    sec = time.perf_counter() - t0
    return {"n_Dg": met["n_Dg"], "t5_samples": met["t5"]["n_samples"],
            "seconds": round(sec, 2), "Dg_captions_per_s": round(met["n_Dg"] / sec, 1),
            "t5_samples_per_s": round(met["t5"]["n_samples"] / sec, 1),
            "seconds_by_step": met["seconds"]}


def bench_dcg(caps: list[str]) -> dict:
    rng = np.random.default_rng(0)
    feats = rng.normal(size=(len(caps), 1280)).astype(np.float32)
    s = dcg.DCGSettings(epochs=1, num_threads=1)
    m = dcg.train_dcg(caps, caps, feats, s, seed=0)
    out = {"pairs": len(caps), "train_samples_per_s": round(m.meta["train_samples_per_s"], 1),
           "train_tokens_per_s": round(m.meta["train_tokens_per_s"], 1),
           "parameters": int(sum(p.numel() for p in m.parameters()))}
    k = min(len(caps), 256)
    for name, beams, bs in (("greedy_batch64", 1, 64), ("beam3_batch64", 3, 64)):
        t0 = time.perf_counter()
        dcg.debias(m, caps[:k], feats[:k], num_beams=beams, batch_size=bs, max_new_tokens=20)
        out[f"inference_{name}_captions_per_s"] = round(k / (time.perf_counter() - t0), 1)
    k1 = min(k, 32)
    t0 = time.perf_counter()
    dcg.debias(m, caps[:k1], feats[:k1], num_beams=1, batch_size=1, max_new_tokens=20)
    out["inference_greedy_batch1_captions_per_s"] = round(k1 / (time.perf_counter() - t0), 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--captions-file", type=Path, default=CAPTIONS)
    ap.add_argument("--captions", type=int, default=3000, help="T5 training captions")
    ap.add_argument("--fill", type=int, default=1000, help="gendered captions to fill")
    ap.add_argument("--dcg", type=int, default=1500, help="DCG training pairs")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "libra.json")
    a = ap.parse_args()
    caps = load_captions(a.captions_file)
    rng = np.random.default_rng(0)
    caps = [caps[i] for i in rng.permutation(len(caps))]
    gendered = [c for c in caps if caption_gender(c, "libra") in ("female", "male")]
    res: dict = {"date": dt.datetime.now().isoformat(timespec="seconds"),
                 "machine": {"python": platform.python_version(), "torch": torch.__version__,
                             "cpus": os.cpu_count(), "load_average": os.getloadavg()},
                 "data": str(a.captions_file), "peak_rss_mib": {}}
    res["peak_rss_mib"]["start"] = round(peak_mib(), 1)
    res["t5_train_1_thread"], model = bench_t5_train(caps[:a.captions], 1)
    res["peak_rss_mib"]["after_t5_train"] = round(peak_mib(), 1)
    res["t5_train_sentinel_1_thread"], sent = bench_t5_train(caps[:a.captions], 1, "sentinel")
    res["t5_train_2_threads"], _ = bench_t5_train(caps[:min(a.captions, 1000)], 2)
    res["t5_fill"] = bench_fill(model, gendered[:a.fill])
    res["t5_fill_sentinel"] = bench_fill(sent, gendered[:a.fill])
    res["synthesize_stub_classifiers"] = bench_synthesize(model, gendered[:a.fill])
    res["peak_rss_mib"]["after_synthesis"] = round(peak_mib(), 1)
    torch.set_num_threads(1)
    res["dcg"] = bench_dcg(caps[:a.dcg])
    res["peak_rss_mib"]["after_dcg"] = round(peak_mib(), 1)
    res["machine"]["load_average_end"] = os.getloadavg()
    write_json(a.out, res)
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
