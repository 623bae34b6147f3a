"""Benchmark: LIBRA's T5 stage at 1 and 2 torch threads, on an idle machine and beside one busy
core (what a stage meets in CI, where the test suite's other worker keeps one core busy), and
with OpenMP's wait policy (``run(..., wait_policy="PASSIVE")``: threads sleep at a barrier).

The stage itself (``stages/t5_finetune.py``, the workspace's own inputs
data/labels/captions.parquet and data/split.parquet, so run ``dvc repro split`` first) with
``libra.threads`` 1 and 2 in a copy of params.yaml, outputs to a temporary directory. The busy
core is a process spinning in pure Python. Wall seconds per setting; each setting's output
files hashed, to show whether the thread count changes the bytes.

Run: ``.venv/bin/python benchmarks/libra_threads.py`` (about 8 minutes on 2 cores); writes
``benchmarks/results/libra_threads.json``.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def _digest(d: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in d.rglob("*") if p.is_file()):
        if f.name in ("libra_t5.json",):        # holds timings
            continue
        h.update(f.relative_to(d).as_posix().encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def run(threads: int, busy: bool, tmp: Path, wait_policy: str | None = None) -> dict:
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["libra"]["threads"] = threads
    pf = tmp / f"params_{threads}_{int(busy)}.yaml"
    pf.write_text(yaml.safe_dump(params))
    out = tmp / f"t5_{threads}_{int(busy)}_{wait_policy}"
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "stages/t5_finetune.py", "--params", str(pf),
                        "--out", str(out), "--metrics", str(tmp / f"m_{threads}_{int(busy)}.json"),
                        "--live", str(tmp / f"live_{threads}_{int(busy)}")], cwd=REPO,
                       check=True, capture_output=True,
                       env={**os.environ, "BIASLAB_NUMERICS": params["numerics"]["decoding"],
                            **({"OMP_WAIT_POLICY": wait_policy} if wait_policy else {})})
        wall = time.perf_counter() - t0
    finally:
        if burner:
            burner.kill()
    return {"threads": threads, "busy_core": busy, "omp_wait_policy": wait_policy,
            "wall_s": round(wall, 1),
            "out_sha256_16": _digest(out)}


def main() -> int:
    if not (REPO / "data/labels/captions.parquet").is_file():
        sys.exit("benchmarks/libra_threads.py: run `dvc repro split` first")
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for busy in (False, True):
            for threads in (2, 1):
                rows.append(run(threads, busy, Path(d)))
                print(rows[-1], flush=True)
    res = {"what": __doc__.split("\n\n")[0], "date": dt.date.today().isoformat(),
           "cpu": next((ln.split(":", 1)[1].strip() for ln in
                        Path("/proc/cpuinfo").read_text().splitlines()
                        if ln.startswith("model name")), "?"),
           "cores": os.cpu_count(), "runs": rows}
    for busy in (False, True):
        w = {r["threads"]: r["wall_s"] for r in rows if r["busy_core"] == busy}
        res[f"ratio_1_over_2_threads_{'busy' if busy else 'idle'}"] = round(w[1] / w[2], 2)
    (REPO / "benchmarks/results/libra_threads.json").write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
