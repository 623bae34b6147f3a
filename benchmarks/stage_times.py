"""Wall time per DVC stage: run a DVC command (default `dvc repro`), time each
"Running stage '<name>'" block from DVC's own output, and record the result.

usage: python benchmarks/stage_times.py --name synthetic [-- dvc repro -f]
       python benchmarks/stage_times.py --name coco_mini -- dvc exp run -S data=coco_mini

Writes benchmarks/results/stage_times_<name>.json: {"command", "machine", "total_s",
"stages": {stage: seconds}, "cached": [stages DVC restored or skipped]}. The command's output
is passed through unchanged.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

RUN = re.compile(r"Running stage '([^']+)'")
CACHED = re.compile(r"Stage '([^']+)' (?:is cached|didn't change)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", required=True, help="result name (e.g. the profile)")
    ap.add_argument("cmd", nargs=argparse.REMAINDER, help="command (default: dvc repro)")
    a = ap.parse_args(argv)
    cmd = [c for c in a.cmd if c != "--"] or ["dvc", "repro"]
    t0 = time.perf_counter()
    stages: dict[str, float] = {}
    cached: list[str] = []
    cur, t_cur = None, t0
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         bufsize=1)
    assert p.stdout is not None
    for line in p.stdout:
        sys.stdout.write(line)
        now = time.perf_counter()
        m = RUN.search(line)
        if m:
            if cur:
                stages[cur] = round(now - t_cur, 1)
            cur, t_cur = m.group(1), now
        c = CACHED.search(line)
        if c:
            cached.append(c.group(1))
    rc = p.wait()
    end = time.perf_counter()
    if cur:
        stages[cur] = round(end - t_cur, 1)
    out = {"command": " ".join(cmd), "returncode": rc, "total_s": round(end - t0, 1),
           "stages": stages, "cached": cached,
           "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                       "load_average_end": list(os.getloadavg())}}
    res = Path(__file__).resolve().parent / "results" / f"stage_times_{a.name}.json"
    res.parent.mkdir(parents=True, exist_ok=True)
    res.write_text(json.dumps(out, indent=2) + "\n")
    print(f"stage_times: total {out['total_s']} s -> {res}", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
