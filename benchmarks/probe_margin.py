"""Cost of the continuous captioner probe against the probe's own baseline,
caption generation, on the same images in the same run.

usage (after `dvc repro probe`, from the repository root):
    python benchmarks/probe_margin.py     # -> benchmarks/results/probe_margin.json

For one trained captioner (original, seed 0) on the persons-masked probe images: wall time of
`Captioner.generate` (beam `captioner.beam`) and of `biaslab.analysis.probe.caption_margin_output` (two
teacher-forced scorings per image), and their ratio.
"""
import glob
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from biaslab.captioning.clipcap import Captioner  # noqa: E402
from biaslab.analysis import probe as P  # noqa: E402
from biaslab.classify import encode_files  # noqa: E402
from biaslab.runtime.io import load_params, write_json  # noqa: E402
from biaslab.runtime.paths import model_dir  # noqa: E402


def main() -> int:
    params = load_params()
    cap = params["captioner"]
    paths = sorted(glob.glob("data/probe/masked/*.png"))
    if not paths:
        sys.exit("probe_margin: no data/probe/masked/*.png (run `dvc repro probe` first)")
    model = Captioner.load(model_dir("captioner", "original", int(cap["seeds"][0])))
    feats = encode_files(paths, params["features"]["cache_dir"], model.config.image_encoder,
                         image_size=model.config.image_size, batch_size=1, num_threads=1)
    t = time.perf_counter()
    caps = model.generate(feats, beam=cap.get("beam"), max_len=cap.get("max_len"))
    t_gen = time.perf_counter() - t
    texts = [P.gendered_versions(c) for c in caps]
    t = time.perf_counter()
    P.caption_margin_output(model, feats, texts)
    t_margin = time.perf_counter() - t
    out = {"images": len(paths), "generate_s": round(t_gen, 3), "margin_s": round(t_margin, 3),
           "margin_over_generate": round(t_margin / t_gen, 3),
           "captioners_in_default": len(cap["datasets"]) * len(cap["seeds"]),
           "note": "per captioner, one process, one thread"}
    write_json(ROOT / "benchmarks/results/probe_margin.json", out)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
