"""Benchmark: counterfactual candidate generation (paper 000 Eq. 1) on real coco-mini images.

Measured (wall clock on a shared CPU; the 1-minute load average before and after is recorded):

* ``copy_paste``: candidates/s through ``generate_candidates`` (image + mask loading, person
  removal once per image, donor ranking, paste, JPEG write, shard table) for ``--images``
  coco-mini train images of defined gender with ``--m`` candidates per group; the masks and
  the labels/split are built first and not timed. Falls back to the synthetic dataset when
  ../shared/coco-mini is missing (stated in the results).
* ``sd_inpaint`` with the tiny random pipeline of ``save_tiny_pipeline`` (``--sd-resolution``
  px, ``--sd-steps`` steps, batch ``--sd-batch``): pipeline load time, the first run's time
  (includes the CPU's per-tensor-shape warm-up) and candidates/s of a second run over the
  same images. This measures the code path, not Stable Diffusion: a
  real checkpoint is ~1000x larger and needs a GPU.
  Run with ``--threads 1`` (default): on this shared 2-core machine two spinning OpenMP
  threads made the tiny pipeline's calls 4-9 s instead of 0.1 s (measured at load ~5).
* peak resident memory (``resource.getrusage(RUSAGE_SELF).ru_maxrss``) after each part.

Run: ``.venv/bin/python benchmarks/generate.py`` (about a minute on 2 shared cores); writes
``benchmarks/results/generate.json``.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from biaslab.data.coco import read_coco  # noqa: E402
from biaslab.counterfactual.copy_paste import CopyPasteBackend, donor_pool  # noqa: E402
from biaslab.counterfactual.generate import (build_work, generate_candidates,  # noqa: E402
                                             make_prompts)
from biaslab.counterfactual.masks import build_masks  # noqa: E402
from biaslab.data.labels import label_captions, label_images, stratified_split  # noqa: E402

COCO_MINI = REPO.parent / "shared" / "coco-mini"


def _peak_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _data(tmp: Path):
    if COCO_MINI.is_dir():
        source, root = "coco-mini", COCO_MINI
    else:
        from biaslab.data.synthetic import generate
        source, root = "synthetic", tmp / "synthetic"
        generate(root, n_images=200)
    tables, _ = read_coco(root, progress=False)
    labels = label_images(label_captions(tables["captions"]))
    split = stratified_split(labels, {"train": 0.7, "val": 0.1, "test": 0.2}, 0)
    return source, tables, labels, split


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=40)
    ap.add_argument("--m", type=int, default=4)
    ap.add_argument("--sd-images", type=int, default=3)
    ap.add_argument("--sd-m", type=int, default=2)
    ap.add_argument("--sd-resolution", type=int, default=64)
    ap.add_argument("--sd-steps", type=int, default=4)
    ap.add_argument("--sd-batch", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads for sd_inpaint (1: see module docstring)")
    ap.add_argument("--out", default=str(REPO / "benchmarks/results/generate.json"))
    args = ap.parse_args(argv)
    res = {"date": dt.datetime.now().isoformat(timespec="seconds"),
           "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                       "load_avg_1min_before": round(os.getloadavg()[0], 2)}}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        source, tables, labels, split = _data(tmp)
        train_ids = labels[labels["gender"] != "undefined"].merge(split)
        train_ids = train_ids[train_ids["split"] == "train"]["image_id"]
        ims = tables["images"][tables["images"]["image_id"].isin(set(train_ids))]
        ims = ims[ims["image_id"].isin(set(tables["persons"]["image_id"]))]
        ims = ims.sort_values("image_id").head(args.images)
        masks, _ = build_masks(ims, tables["persons"], labels, split, tmp / "png",
                               dilate_px=8, progress=False)
        prompts = make_prompts(tables["captions"], masks["image_id"])
        work, _ = build_work(masks, tables["images"], tables["persons"], prompts, shards=4)
        donors = donor_pool(tables["persons"], tables["images"], labels, split)
        t0 = time.perf_counter()
        backend = CopyPasteBackend(donors)
        table, stats = generate_candidates(work, backend, tmp / "cp", m=args.m,
                                           guidance_scales=[7.5, 9.5, 15.0], seed=0,
                                           shards=4, progress=False)
        wall = time.perf_counter() - t0
        res["copy_paste"] = {
            "source": source, "images": int(len(work)), "m": args.m,
            "candidates": int(len(table)), "donors": int(len(donors)),
            "seconds_total": round(wall, 2),
            "candidates_per_s": round(len(table) / wall, 2),
            "mask_sources": masks["mask_source"].value_counts().to_dict(),
            "peak_rss_mib_after": _peak_mib()}
        print("copy_paste", res["copy_paste"], flush=True)

        try:
            import diffusers  # noqa: F401
        except ImportError:
            res["sd_inpaint_tiny"] = "skipped: diffusers not installed"
        else:
            import torch

            from biaslab.counterfactual.sd_inpaint import SDInpaintBackend, save_tiny_pipeline
            torch.set_num_threads(args.threads)
            model = save_tiny_pipeline(tmp / "tiny-sd")
            sd = SDInpaintBackend(str(model), steps=args.sd_steps,
                                  resolution=args.sd_resolution, batch_size=args.sd_batch)
            t0 = time.perf_counter()
            sd.pipe
            load = time.perf_counter() - t0
            w = work.iloc[:args.sd_images]
            t0 = time.perf_counter()  # first run: includes the per-shape CPU warm-up
            generate_candidates(w, sd, tmp / "warm", m=args.sd_m,
                                guidance_scales=[7.5], seed=0, shards=1, progress=False)
            warm = time.perf_counter() - t0
            t0 = time.perf_counter()
            table, _ = generate_candidates(w, sd, tmp / "sd", m=args.sd_m,
                                           guidance_scales=[7.5], seed=0, shards=1,
                                           progress=False)
            wall = time.perf_counter() - t0
            res["sd_inpaint_tiny"] = {
                "device": sd.device, "dtype": sd.dtype, "torch_threads": args.threads, "resolution": args.sd_resolution,
                "steps": args.sd_steps, "batch_size": args.sd_batch,
                "images": int(len(w)), "m": args.sd_m, "candidates": int(len(table)),
                "load_s": round(load, 2), "first_run_s": round(warm, 2),
                "seconds_total": round(wall, 2),
                "candidates_per_s": round(len(table) / wall, 2),
                "peak_rss_mib_after": _peak_mib()}
            print("sd_inpaint_tiny", res["sd_inpaint_tiny"], flush=True)
    res["machine"]["load_avg_1min_after"] = round(os.getloadavg()[0], 2)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2, sort_keys=True) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
