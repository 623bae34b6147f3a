"""Benchmark: executor=ray with 1 vs 2 worker actors, and the local executor with 1 vs 2 forked
workers, in the same run, for
``generate`` (the ``render`` backend, the synthetic default's, on a small synthetic dataset)
and ``features`` (``encode_cached`` with efficientnet_lite0 into an empty cache).

Measured (wall clock of the library call the stage makes, on a private local Ray cluster with
``--cpus`` CPUs started once; actor start-up and the per-actor model/backend load are inside
the timing, cluster start-up is not): seconds for local, ray x1 and ray x2 at two sizes (n and
2n images), the ratio ``speedup_2v1 = seconds(ray x1) / seconds(ray x2)`` at 2n (target >=
1.6; ``local_speedup_2v1`` likewise for the local executor), the same ratio of the extra time the second n images cost (``marginal_speedup_2v1``:
fixed costs -- actor start-up, torch import, model load -- cancel out) and whether every Ray
output is byte-identical to the local one. The 1-minute load average before and after is
recorded: on a shared 2-core machine the ratio, not the absolute time, is the result.

Run: ``.venv/bin/python benchmarks/ray_speedup.py --images 300`` (needs the ray extra; about
6 minutes; the recorded result: 300 and 600 images, 30-36 s per 1-worker run, long enough that
start-up costs no longer decide the ratio); writes ``benchmarks/results/ray_speedup.json``.
"""
from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from biaslab.runtime import executor as X  # noqa: E402
from biaslab.runtime.io import write_json  # noqa: E402


def _tree(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(q for q in root.rglob("*") if q.is_file()):
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def _generate_inputs(tmp: Path, n_images: int, image_size: int, shards: int):
    from biaslab.data.coco import read_coco
    from biaslab.counterfactual.generate import build_work, make_prompts
    from biaslab.counterfactual.masks import build_masks
    from biaslab.data.labels import label_captions, label_images
    from biaslab.data.synthetic import generate as make_synthetic
    make_synthetic(tmp / "raw", n_images=n_images, image_size=image_size, seed=0)
    tables, _ = read_coco(tmp / "raw", progress=False)
    labels = label_images(label_captions(tables["captions"]))
    masks, _ = build_masks(tables["images"], tables["persons"], labels, None, tmp / "masks",
                           splits=None, dilate_px=2, progress=False)
    prompts = make_prompts(tables["captions"], masks["image_id"])
    work = build_work(masks, tables["images"], tables["persons"], prompts, shards=shards)[0]
    return tables, work


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=32, help="n (the runs use n and 2n)")
    ap.add_argument("--image-size", type=int, default=160)
    ap.add_argument("--m", type=int, default=4)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--out", default=str(REPO / "benchmarks/results/ray_speedup.json"))
    args = ap.parse_args(argv)
    import ray
    from biaslab.counterfactual.generate import generate_candidates
    from biaslab.counterfactual.render import RenderBackend
    from biaslab.models.features import encode_cached

    load0 = os.getloadavg()[0]
    res: dict = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                 "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                             "ray": ray.__version__, "load_1min_before": round(load0, 2)},
                 "note": "shared 2-core machine (another CI job may run): compare the ratio, "
                         "not the seconds"}
    runs = {"local": {"name": "local", "workers": 1},
            "local_x2": {"name": "local", "workers": 2},
            "ray_x1": {"name": "ray", "workers": 1}, "ray_x2": {"name": "ray", "workers": 2}}
    sizes = (args.images, 2 * args.images)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        tables, work_all = _generate_inputs(tmp, sizes[1], args.image_size, args.shards)
        t0 = time.perf_counter()
        X.connect({"address": None, "num_cpus": args.cpus})
        res["cluster_start_s"] = round(time.perf_counter() - t0, 2)
        cwd = os.getcwd()
        gen: dict = {"backend": "render", "m": args.m, "shards": args.shards,
                     "image_size": args.image_size, "images": list(sizes)}
        feat: dict = {"backbone": "efficientnet_lite0", "batch_size": 1, "threads": 1,
                      "images": list(sizes)}
        same = {"generate": True, "features": True}
        for n in sizes:
            work = work_all[work_all["image_id"].isin(sorted(work_all["image_id"])[:n])]
            digests = {}
            for name, ex in runs.items():
                where = tmp / f"{name}_{n}"
                where.mkdir()
                os.chdir(where)
                try:
                    t0 = time.perf_counter()
                    table, _ = generate_candidates(work, RenderBackend(tmp / "raw"), "gen",
                                                   m=args.m, guidance_scales=[7.5], seed=0,
                                                   shards=args.shards, progress=False,
                                                   executor=ex)
                    gen.setdefault(f"{name}_s", []).append(round(time.perf_counter() - t0, 2))
                finally:
                    os.chdir(cwd)
                digests[name] = _tree(where / "gen")
                print("generate", n, name, gen[f"{name}_s"][-1], "s", len(table), flush=True)
            same["generate"] &= all(v == digests["local"] for v in digests.values())
            gen.setdefault("candidates", []).append(int(len(table)))
            imgs = tables["images"][["image_id", "path"]].head(n)
            outs = {}
            for name, ex in runs.items():
                t0 = time.perf_counter()
                _, f = encode_cached(imgs, tmp / f"cache_{name}_{n}", batch_size=1,
                                     num_threads=1, executor=ex)
                feat.setdefault(f"{name}_s", []).append(round(time.perf_counter() - t0, 2))
                outs[name] = f.tobytes()
                print("features", n, name, feat[f"{name}_s"][-1], "s", flush=True)
            same["features"] &= all(v == outs["local"] for v in outs.values())
        for part, r in (("generate", gen), ("features", feat)):
            r["speedup_2v1"] = round(r["ray_x1_s"][1] / r["ray_x2_s"][1], 3)
            r["local_speedup_2v1"] = round(r["local_s"][1] / r["local_x2_s"][1], 3)
            # the second half of the work alone: actor start-up and model loads cancel out
            d1 = r["ray_x1_s"][1] - r["ray_x1_s"][0]
            d2 = r["ray_x2_s"][1] - r["ray_x2_s"][0]
            r["marginal_speedup_2v1"] = round(d1 / d2, 3) if d2 > 0 else None
            r["byte_identical_to_local"] = same[part]
            res[part] = r
        ray.shutdown()
    res["machine"]["load_1min_after"] = round(os.getloadavg()[0], 2)
    write_json(args.out, res)
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
