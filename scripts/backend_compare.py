"""copy_paste vs render: the synthetic-artifact test (Table 3) on counterfactuals from each
backend (biaslab/analysis/backends.py states the claim).

usage (after set-up, from the repository root):
    python scripts/backend_compare.py --run --collect    # queue the copy_paste run, compare
    python scripts/backend_compare.py --collect          # compare finished runs only

--run queues `dvc exp run --queue -n backend-<B> -S generate.backend=<B>` for each backend in
--backends that no record of `dvc exp show` has yet (the workspace counts: on the synthetic
default it is `render`), extra `-S` overrides go to every queued experiment, and runs the queue
(`dvc exp run --run-all`; each is a whole pipeline, about 17 min on 2 cores).

--collect writes plots/report/backend_compare.md (Δ, Leakage and probe sensitivities side by
side, and the verdicts) and plots/report/backend_compare.json ({"runs": {backend: name},
"checks": [...]}) from `dvc exp show --json`.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from biaslab.analysis import backends as B  # noqa: E402
from biaslab import report as R  # noqa: E402
from biaslab.runtime.io import atomic_path, write_json  # noqa: E402


def _show() -> list:
    from biaslab.report.dvcview import exp_show
    return exp_show(ROOT)   # every baseline's experiments, not only HEAD's


def run(backends: list[str], overrides: list[str]) -> None:
    have = B.runs_by_backend(_show())
    extra = [x for o in overrides for x in ("-S", o)]
    queued = 0
    for b in backends:
        if b in have:
            print(f"backend_compare: `{b}` already measured ({have[b].get('name')})", flush=True)
            continue
        cmd = ["dvc", "exp", "run", "--queue", "-n", f"backend-{b}",
               "-S", f"generate.backend={b}", *extra]
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, cwd=ROOT, check=True)
        queued += 1
    if queued:
        subprocess.run(["dvc", "exp", "run", "--run-all"], cwd=ROOT, check=True)


def collect(out_dir: Path, a: str, b: str) -> str:
    runs = B.runs_by_backend(_show())
    text = "\n".join(["# Counterfactual backends: copy_paste vs render", "",
                      "Each cell: mean ± 95 % CI over seeds; Δ is Table 3's per-seed "
                      "|Ratio_orig - Ratio_inp| / Ratio_orig x100 on the same inpainted test "
                      "images (biaslab/analysis/backends.py).", "", B.markdown(runs, a, b)])
    prov = R.made_by("scripts/backend_compare.py", ROOT)
    text = R.stamp(text, prov)      # it outlives runs of other profiles
    out_dir.mkdir(parents=True, exist_ok=True)
    with atomic_path(out_dir / "backend_compare.md") as tmp:
        tmp.write_text(text, encoding="utf-8")
    write_json(out_dir / "backend_compare.json",
               {"runs": {k: v.get("name") for k, v in runs.items()},
                "checks": B.checks(runs, a, b), "made_by": prov})
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--run", action="store_true", help="queue and run the missing backends")
    ap.add_argument("--collect", action="store_true", help="write the comparison")
    ap.add_argument("--backends", default="render,copy_paste",
                    help="the oracle, then the backend expected to carry artifacts")
    ap.add_argument("-S", dest="overrides", action="append", default=[],
                    help="extra `dvc exp run -S` override for every queued experiment")
    ap.add_argument("--out-dir", default=str(ROOT / "plots" / "report"))
    a = ap.parse_args(argv)
    if not (a.run or a.collect):
        ap.error("give --run and/or --collect")
    names = [x.strip() for x in a.backends.split(",") if x.strip()]
    if len(names) != 2:
        ap.error(f"--backends: give two backends, got {a.backends!r}")
    if a.run:
        run(names, a.overrides)
    if a.collect:
        print(collect(Path(a.out_dir), names[1], names[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
