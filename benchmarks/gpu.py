"""SD inpainting throughput on a GPU: images/s for batch size x dtype x steps,
through the repository's backend (``biaslab.counterfactual.sd_inpaint.SDInpaintBackend.generate``,
the call stage generate makes: one pipeline call per batch of candidates of one image, group and
guidance scale, CPU-seeded generators, composite back into the original).

    python benchmarks/gpu.py                        # the paper's SD-2 inpainting (hub or HF cache)
    python benchmarks/gpu.py --model /path/to/dir   # a local diffusers checkpoint
    python benchmarks/gpu.py --tiny                 # tiny random pipeline (smoke test, offline)

Without CUDA it prints ``skipped: no GPU`` and exits 0 (nothing written). With CUDA it writes
``benchmarks/results/gpu_sd_inpaint.json``: ``{"gpu_name", "model", "resolution", "date",
"torch", "diffusers", "results": [{"batch_size", "dtype", "steps", "images", "seconds",
"images_per_s"}, ...]}``; ``biaslab plan`` uses its fp16 rows for the same GPU kind instead of
the paper-000 derivation. Units: seconds of wall time (after one warm-up call per setting,
CUDA synchronised), images/s = candidates inpainted per second on one GPU.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "gpu_sd_inpaint.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="stabilityai/stable-diffusion-2-inpainting",
                    help="hub name or local diffusers directory (default: paper 000's SD-2)")
    ap.add_argument("--tiny", action="store_true", help="use a tiny random pipeline instead "
                    "(code-path smoke test; its rates mean nothing)")
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--dtypes", nargs="+", default=["float16", "float32"],
                    choices=["float16", "float32"])
    ap.add_argument("--steps", type=int, nargs="+", default=[25, 50])
    ap.add_argument("--resolution", type=int, default=512)
    ap.add_argument("--calls", type=int, default=2, help="timed pipeline calls per setting")
    ap.add_argument("--out", default=None, help=f"default {OUT.name} ({OUT.stem}_tiny.json "
                    "with --tiny, which biaslab plan never reads)")
    a = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("skipped: no GPU (torch not installed)")
        return 0
    if not torch.cuda.is_available():
        print("skipped: no GPU (torch.cuda.is_available() is False); nothing written")
        return 0
    import diffusers
    out = a.out or str(OUT.with_name(OUT.stem + "_tiny.json") if a.tiny else OUT)

    sys.path.insert(0, str(ROOT))
    from biaslab.counterfactual.sd_inpaint import SDInpaintBackend, save_tiny_pipeline
    from biaslab.runtime.io import write_json

    tmp = tempfile.TemporaryDirectory()
    model = str(save_tiny_pipeline(Path(tmp.name) / "tiny")) if a.tiny else a.model
    rng = np.random.default_rng(0)
    image = (rng.random((480, 640, 3)) * 255).astype(np.uint8)   # a COCO-sized image
    mask = np.zeros((480, 640), np.uint8)
    mask[100:400, 200:420] = 1
    results = []
    for dtype in a.dtypes:
        backend = None
        for steps in a.steps:
            for bs in a.batch_sizes:
                if backend is None:
                    backend = SDInpaintBackend(model, steps=steps, resolution=a.resolution,
                                               batch_size=bs, device="cuda")
                    backend.dtype = dtype        # the backend picks fp16 on CUDA; fp32 too
                backend.steps, backend.batch_size = steps, bs
                js = list(range(bs))
                call = lambda: backend.generate(None, image, mask, "female",  # noqa: E731
                                                "A woman riding a horse.", js,
                                                [11 + j for j in js], [7.5] * bs)
                call()                                           # warm-up (load, kernels)
                torch.cuda.synchronize()
                t = time.perf_counter()
                for _ in range(a.calls):
                    call()
                torch.cuda.synchronize()
                s = time.perf_counter() - t
                n = bs * a.calls
                results.append({"batch_size": bs, "dtype": dtype, "steps": steps, "images": n,
                                "seconds": round(s, 3), "images_per_s": round(n / s, 4)})
                print(results[-1], flush=True)
        del backend
        torch.cuda.empty_cache()
    write_json(out, {"gpu_name": torch.cuda.get_device_name(0), "model": a.model if not
                       a.tiny else "tiny random (save_tiny_pipeline)",
                       "resolution": a.resolution, "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
                       "torch": torch.__version__, "diffusers": diffusers.__version__,
                       "results": results})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
