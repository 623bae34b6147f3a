"""The whole embedded default under simulated machines: each profile is a fresh clone of HEAD
reproduced from scratch with the environment another x86-64 CPU would present
(``biaslab.runtime.numerics.SIMULATED_MACHINES``), a number of worker processes and a numeric
mode, then checked against the committed record by ``biaslab.runtime.reprocheck`` as another
machine (data stages byte-identical, every verdict the same, every number within its
tolerance).

usage: python scripts/machine_profiles.py --profile avx2 --workers 1 [--profile sse ...]
       [--mode standard|portable|native] [--keep DIR]

A profile is ``<machine>`` with ``--workers N`` applied to every ``workers`` parameter (they
decide only how many processes share the work, never a result, so the comparison leaves them
out). Each profile takes as long as ``dvc repro`` of the default. Results are merged into
``benchmarks/results/machine_profiles.json`` as ``{"<machine>/w<N>/<mode>": {"env",
"workers", "mode", "seconds", "comparable", "bytes_differ", "failures", "max_drift",
"reference"}}`` (``max_drift``: the largest drift per metrics file and kind, with its
tolerance), the largest drift per kind over all profiles and the committed record's
fragile verdicts into ``benchmarks/results/reprocheck_drift.json``, each run's stage times into
``benchmarks/results/stage_times_machine_<machine>_w<N>_<mode>.json``; the command exits 1
when the check fails.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from biaslab.runtime import numerics, reprocheck  # noqa: E402

RESULTS = REPO / "benchmarks/results/machine_profiles.json"


def _set_workers(params: dict, n: int) -> dict:
    if isinstance(params, dict):
        return {k: (n if k == "workers" else _set_workers(v, n)) for k, v in params.items()}
    return params


def run_profile(machine: str, workers: int, mode: str = "standard",
                keep: Path | None = None) -> dict:
    """Reproduce HEAD's default in a fresh clone under one simulated machine; returns the
    record written to the results file."""
    env_machine = numerics.SIMULATED_MACHINES[machine]
    work = Path(tempfile.mkdtemp(prefix=f"machine-{machine}-", dir=keep))
    clone = work / "repo"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    os.symlink(REPO / ".venv", clone / ".venv")
    params = _set_workers(yaml.safe_load((clone / "params.yaml").read_text()), workers)
    # the mode is a param (each stage's cmd sets BIASLAB_NUMERICS from it): another mode than
    # the record's is another record, so reprocheck compares only the stages it leaves alone
    params.setdefault("numerics", {})["mode"] = mode
    (clone / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = {k: v for k, v in os.environ.items()
           if k not in numerics.ENV and k != "BIASLAB_NUMERICS"}
    env.update(env_machine)
    env["PATH"] = f"{REPO / '.venv/bin'}:{env['PATH']}"
    env["DVC_NO_ANALYTICS"] = "1"
    t0 = time.perf_counter()
    log = work / "repro.log"
    name = f"machine_{machine}_w{workers}_{mode}"
    with open(log, "w") as f:   # timed per stage, as every recorded run of the default
        r = subprocess.run([str(REPO / ".venv/bin/python"), "benchmarks/stage_times.py",
                            "--name", name, "--", "dvc", "repro"], cwd=clone, env=env,
                           stdout=f, stderr=subprocess.STDOUT)
    seconds = round(time.perf_counter() - t0, 1)
    if r.returncode != 0:
        raise SystemExit(f"{machine}: dvc repro failed (exit {r.returncode}), log: {log}")
    times = clone / f"benchmarks/results/stage_times_{name}.json"
    if times.exists():
        shutil.copy2(times, REPO / "benchmarks/results" / times.name)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout.strip()
    runs = REPO / "benchmarks/runs/machine_profiles"      # the fresh lock, for a later look
    runs.mkdir(parents=True, exist_ok=True)
    shutil.copy2(clone / "dvc.lock", runs / f"{name}.dvc.lock")
    res = reprocheck.check_against_git(clone, REPO, same_machine=False)   # a simulated other CPU
    rec = {"env": env_machine, "workers": workers, "mode": mode, "seconds": seconds,
           "reference": f"dvc.lock and metrics at {head}", "comparable": len(res["comparable"]),
           "skipped": res["skipped"], "bytes_compared": res["bytes_compared"],
           "bytes_differ": res["bytes_differ"], "failures": res["failures"],
           "fragile_flips": res["fragile_flips"], "max_drift": reprocheck.max_drift(res),
           "ok": res["ok"]}
    if keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return rec


def write_drift(results: dict) -> dict:
    """``benchmarks/results/reprocheck_drift.json``: what the tolerance of
    ``reprocheck.TOLERANCE`` rests on -- per kind of number, the largest drift any recorded
    profile showed as a fraction of its tolerance (with the profile, file and key), each
    profile's fragile verdict flips, and the committed record's fragile verdicts with their
    margins."""
    worst: dict = {}
    for key, rec in results.items():
        for f, kinds in rec.get("max_drift", {}).items():
            for kind, d in kinds.items():
                if kind == "verdict":
                    continue
                cur = worst.get(kind)
                if cur is None or d["fraction"] > cur["fraction"]:
                    worst[kind] = {"profile": key, "file": f, **d}
    validity = json.loads((REPO / "metrics/validity.json").read_text())
    out = {"tolerance": reprocheck.TOLERANCE, "largest_drift_by_kind": worst,
           "profiles": {k: {"ok": r.get("ok"), "bytes_differ": len(r.get("bytes_differ", [])),
                            "failures": len(r.get("failures", [])),
                            "fragile_flips": r.get("fragile_flips", [])}
                        for k, r in results.items() if "max_drift" in r},
           "fragile_verdicts": reprocheck.fragile_verdicts(validity),
           "checks": len(validity.get("checks", []))}
    path = REPO / "benchmarks/results/reprocheck_drift.json"
    if path.exists():       # drift measured by other means (recorded by hand, with its command)
        out["measured_elsewhere"] = json.loads(path.read_text()).get("measured_elsewhere", {})
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1, sort_keys=True, default=str) + "\n")
    tmp.replace(path)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", action="append", required=True,
                    choices=sorted(numerics.SIMULATED_MACHINES))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--mode", choices=numerics.MODES, default=numerics.MODES[0])
    ap.add_argument("--keep", type=Path, help="keep the clones under this directory")
    a = ap.parse_args(argv)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                           capture_output=True, text=True).stdout.strip()
    if dirty:
        print("machine_profiles: the working tree differs from HEAD; the clones run HEAD's "
              "stages with the working tree's biaslab", file=sys.stderr)
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    bad = 0
    for machine in a.profile:
        key = f"{machine}/w{a.workers}/{a.mode}"
        print(f"machine_profiles: {key} ...", flush=True)
        rec = run_profile(machine, a.workers, a.mode, a.keep)
        results[key] = rec
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        tmp = RESULTS.with_suffix(".tmp")
        tmp.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
        tmp.replace(RESULTS)
        write_drift(results)
        print(f"machine_profiles: {key}: {rec['comparable']} stages comparable, "
              f"{len(rec['bytes_differ'])} outs differ, {len(rec['failures'])} numbers or "
              f"verdicts beyond tolerance, {rec['seconds']} s", flush=True)
        for d in rec["bytes_differ"]:
            print(f"  differs: {d}")
        for d in rec["fragile_flips"]:
            print(f"  fragile verdict flipped: {d['file']}: {d['key']}: {d['reference']} -> "
                  f"{d['fresh']} (margin {d['drift']:.3g} <= tolerance {d['tolerance']:.3g})")
        for f in rec["failures"][:30]:
            print(f"  {f['file']}: {f['key']}: {f['reference']!r} -> {f['fresh']!r} "
                  f"(tolerance {f['tolerance']}, {f['why']})")
        if not rec["comparable"]:
            print(f"  no stage had the committed lock's code and params: the committed "
                  f"dvc.lock is not the lock of HEAD's code (skipped: {rec['skipped']})")
        bad += (not rec["ok"]) or not rec["comparable"]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
