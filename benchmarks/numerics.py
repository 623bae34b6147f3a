"""Cost of the portable numerics (biaslab.runtime.numerics): the same work with the pinned
CPU paths and with the libraries' own (``BIASLAB_NUMERICS=native``), as ratios measured in
the same run.

usage: python benchmarks/numerics.py [--repeats 3]
           [--stage-times PORTABLE.json NATIVE.json]

1. The workloads of ``scripts/numerics_fingerprint.py`` (the training/scoring code paths on
   tiny inputs), each in a fresh interpreter, alternating portable and native, ``--repeats``
   times; the minimum seconds per workload and mode, and portable / native.
2. With ``--stage-times``: two ``benchmarks/stage_times.py`` results of the whole default
   (e.g. ``stage_times_portable_fresh_clone.json`` and
   ``stage_times_machine_avx512_w2_native.json``, both fresh clones on the same idle machine)
   give the ratio per stage and in total -- the cost a user of the default pays.

Writes ``benchmarks/results/numerics.json``. Timings are never asserted in tests.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks/results/numerics.json"


def _fingerprint(native: bool) -> dict:
    env = dict(os.environ, TQDM_DISABLE="1")
    env.pop("BIASLAB_NUMERICS", None)
    if native:
        from biaslab.runtime import numerics
        for k in numerics.ENV:        # the shell as it was before the pins
            env.pop(k, None)
        env["BIASLAB_NUMERICS"] = "native"
    r = subprocess.run([sys.executable, "scripts/numerics_fingerprint.py"], cwd=REPO, env=env,
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def workloads(repeats: int) -> dict:
    best: dict[str, dict[str, float]] = {"portable": {}, "native": {}}
    for _ in range(repeats):
        for mode in ("portable", "native"):
            for k, s in _fingerprint(mode == "native")["seconds"].items():
                best[mode][k] = min(s, best[mode].get(k, float("inf")))
    return {k: {"portable_s": best["portable"][k], "native_s": best["native"][k],
                "ratio": round(best["portable"][k] / best["native"][k], 3)}
            for k in best["portable"]}


def stages(portable: Path, native: Path) -> dict:
    a, b = json.loads(portable.read_text()), json.loads(native.read_text())
    rows = {k: {"portable_s": a["stages"][k], "native_s": b["stages"][k],
                "ratio": round(a["stages"][k] / b["stages"][k], 3)}
            for k in a["stages"] if k in b["stages"] and b["stages"][k] > 0}
    return {"portable": portable.name, "native": native.name, "total": {
        "portable_s": a["total_s"], "native_s": b["total_s"],
        "ratio": round(a["total_s"] / b["total_s"], 3)}, "per_stage": rows}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--stage-times", nargs=2, type=Path, metavar=("PORTABLE", "NATIVE"))
    a = ap.parse_args(argv)
    res = {"machine": {"processor": platform.processor() or platform.machine(),
                       "cpus": os.cpu_count()},
           "workloads": workloads(a.repeats)}
    if a.stage_times:
        res["default"] = stages(*a.stage_times)
    OUT.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
