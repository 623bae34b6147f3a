"""Wall time per DVC stage: run a DVC command (default `dvc repro`), time each
"Running stage '<name>'" block from DVC's own output, and record the result.

usage: python benchmarks/stage_times.py --name synthetic [-- dvc repro -f]
       python benchmarks/stage_times.py --name coco_mini -- dvc exp run -S data=coco_mini

Writes benchmarks/results/stage_times_<name>.json: {"command", "machine", "total_s",
"stages": {stage: seconds}, "cpu_s": {stage: CPU seconds}, "cores": {stage: cpu_s / wall},
"cpu_total_s", "cores_total", "cached": [stages DVC restored or skipped]}. The command's output
is passed through unchanged.

CPU time is the machine-wide busy time from /proc/stat (user + nice + system + irq + softirq)
between two stage boundaries, so forked workers, Java (METEOR) and DVC itself all count; it is
the pipeline's CPU use only on an otherwise idle machine (utilisation = summed
CPU time / wall time, in cores; 2.0 = both cores busy). Absent where /proc/stat is not readable.
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

def busy_seconds() -> float | None:
    """Machine-wide busy CPU seconds since boot (/proc/stat), or None off Linux."""
    try:
        with open("/proc/stat") as f:
            parts = f.readline().split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in parts[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


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
    cpu: dict[str, float] = {}
    cached: list[str] = []
    cur, t_cur = None, t0
    b0 = b_cur = busy_seconds()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         bufsize=1)
    assert p.stdout is not None
    for line in p.stdout:
        sys.stdout.write(line)
        now = time.perf_counter()
        m = RUN.search(line)
        if m:
            b = busy_seconds()
            if cur:
                stages[cur] = round(now - t_cur, 1)
                if b is not None:
                    cpu[cur] = round(b - b_cur, 1)
            cur, t_cur, b_cur = m.group(1), now, b
        c = CACHED.search(line)
        if c:
            cached.append(c.group(1))
    rc = p.wait()
    end = time.perf_counter()
    b_end = busy_seconds()
    if cur:
        stages[cur] = round(end - t_cur, 1)
        if b_end is not None:
            cpu[cur] = round(b_end - b_cur, 1)
    total = round(end - t0, 1)
    out = {"command": " ".join(cmd), "returncode": rc, "total_s": total,
           "stages": stages, "cached": cached}
    if b_end is not None and b0 is not None:
        out.update(cpu_s=cpu, cores={k: round(cpu[k] / stages[k], 2) for k in cpu
                                     if stages.get(k)},
                   cpu_total_s=round(b_end - b0, 1),
                   cores_total=round((b_end - b0) / total, 2) if total else None)
    out.update({
           "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                       "load_average_end": list(os.getloadavg())}})
    res = Path(__file__).resolve().parent / "results" / f"stage_times_{a.name}.json"
    res.parent.mkdir(parents=True, exist_ok=True)
    res.write_text(json.dumps(out, indent=2) + "\n")
    print(f"stage_times: total {out['total_s']} s, {out.get('cores_total')} cores busy on "
          f"average -> {res}", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
