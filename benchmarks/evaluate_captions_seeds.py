"""How long `biaslab evaluate-captions` takes per LIC seed on a published captioner's file, and
so which default seed count finishes in under a minute on 10,000 captions.

    python benchmarks/evaluate_captions_seeds.py [--pred ../shared/published-captions/nic.gender.jsonl.gz]
        [--seeds 1 2 3] [--threads 1 2]

Runs the installed console script (as a user would: a fresh process per run, imports
included) with the default metrics but LIC's seeds and threads varied, and writes
benchmarks/results/evaluate_captions_seeds.json: wall seconds per (seeds, threads), the
per-seed slope, the number of captions, and the machine. Ratios between runs of the same
call are what to compare; the absolute seconds are this machine's.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks/results/evaluate_captions_seeds.json"


def run(pred: str, seeds: int, threads: int) -> float:
    exe = Path(sys.executable).with_name("biaslab")
    cmd = [str(exe), "evaluate-captions", "--pred", pred, "--gender", pred, "--metrics",
           "ratio", "error", "lic", "--seeds", str(seeds), "--num-threads", str(threads),
           "--no-progress"]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return time.perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pred", default=str(ROOT.parent / "shared/published-captions/"
                                                        "nic.gender.jsonl.gz"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    a = ap.parse_args(argv)
    from biaslab.metrics.files import read_predictions
    n = len(read_predictions(a.pred))
    rows = []
    for th in a.threads:
        for s in a.seeds:
            sec = run(a.pred, s, th)
            rows.append({"seeds": s, "threads": th, "seconds": round(sec, 1)})
            print(f"seeds {s} threads {th}: {sec:.1f} s", flush=True)
    slope = {}
    for th in a.threads:
        r = sorted((x for x in rows if x["threads"] == th), key=lambda x: x["seeds"])
        if len(r) >= 2:
            slope[th] = round((r[-1]["seconds"] - r[0]["seconds"])
                              / (r[-1]["seeds"] - r[0]["seeds"]), 1)
    res = {"pred": os.path.relpath(a.pred, ROOT), "n_captions": n, "runs": rows,
           "seconds_per_extra_seed": slope, "machine": platform.processor() or
           platform.machine(), "cpus": os.cpu_count(),
           "command": "python benchmarks/evaluate_captions_seeds.py"}
    OUT.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
