"""Benchmark: the per-seed training stages (`train_captioner`, `train_classifier`) with 1, 2 and
3 worker processes (biaslab.runtime.parallel; one torch thread each) in the same run.

Each stage trains ``captioner.seeds`` / ``classifier.seeds`` (3 at the default) models. With 2
workers the third seed trains alone while one core idles; with 3 workers the three seeds share
the two cores. The stage script runs unchanged, as DVC runs it, in a scratch workspace whose
``data/`` entries (all but ``data/models``) are symlinks to this checkout's (run ``dvc repro`` first) and whose outputs
(``data/models``, ``dvclive``) are its own, so the checkout is not touched. Recorded: wall
seconds per worker count, the ratio against 2 workers (the previous default) and whether every
model file is byte-identical across worker counts (each seed is fully determined by itself).

Run: ``.venv/bin/python benchmarks/train_workers.py`` (a few minutes); writes
``benchmarks/results/train_workers.json``. On a shared machine compare the ratios, not the
seconds.
"""
from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from biaslab.runtime.io import write_json  # noqa: E402

#: (stage script, dataset, outputs the stage writes)
RUNS = {"train_captioner": ("stages/train_captioner.py", "original", "data/models/captioner"),
        "train_classifier": ("stages/train_classifier.py", "original",
                             "data/models/classifier")}


def _tree(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(q for q in root.rglob("*") if q.is_file()):
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def _workspace(tmp: Path) -> Path:
    ws = tmp / "ws"
    (ws / "data").mkdir(parents=True)
    if not (REPO / "data" / "datasets").is_dir():
        raise SystemExit("benchmarks/train_workers.py: data/datasets is missing: run dvc repro "
                         "first")
    for src in (REPO / "data").iterdir():        # every input; the models are written here
        if src.name != "models":
            (ws / "data" / src.name).symlink_to(src)
    shutil.copy(REPO / "params.yaml", ws / "params.yaml")
    return ws


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--stages", nargs="+", default=list(RUNS), choices=list(RUNS))
    ap.add_argument("--out", default=str(REPO / "benchmarks/results/train_workers.json"))
    args = ap.parse_args(argv)
    res: dict = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                 "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                             "load_1min_before": round(os.getloadavg()[0], 2)},
                 "note": "shared 2-core machine: compare the ratios, not the seconds",
                 "command": "python benchmarks/train_workers.py"}
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory() as d:
        ws = _workspace(Path(d))
        for stage in args.stages:
            script, dataset, out = RUNS[stage]
            r: dict = {"dataset": dataset, "seconds": {}, "identical_models": True}
            ref = None
            for w in args.workers:
                shutil.rmtree(ws / out, ignore_errors=True)
                shutil.rmtree(ws / "dvclive", ignore_errors=True)
                t0 = time.perf_counter()
                subprocess.run([sys.executable, str(REPO / script), "--dataset", dataset,
                                "--workers", str(w)], cwd=ws, env=env, check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                r["seconds"][str(w)] = round(time.perf_counter() - t0, 2)
                digest = _tree(ws / out)
                ref = ref or digest
                r["identical_models"] &= digest == ref
                print(stage, w, "workers", r["seconds"][str(w)], "s", flush=True)
            base = r["seconds"].get("2")
            if base:
                r["ratio_vs_2_workers"] = {k: round(base / v, 3) for k, v in r["seconds"].items()}
            res[stage] = r
    res["machine"]["load_1min_after"] = round(os.getloadavg()[0], 2)
    write_json(args.out, res)
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
