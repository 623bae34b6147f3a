"""Paper 000 Table 4 (filter ablation) as DVC experiments.

usage (after set-up, from the repository root):
    python scripts/filter_ablation.py --run             # queue one experiment per filter
                                                        # combination and run the queue
    python scripts/filter_ablation.py --collect         # plots/report/table4.md from
                                                        # `dvc exp show --json`
    python scripts/filter_ablation.py --run --collect -S data=coco_mini

--run queues `dvc exp run --queue -S filters.weights=[...] -n ablation-<w>` for the eight
combinations of Table 4 (biaslab.report.table4.TABLE4_WEIGHTS over prompt adherence, object
consistency, color fidelity) and runs them with `dvc exp run --run-all`. Each re-runs only
`select` and the stages after it (generate and score are cached). Extra `-S` overrides go to
every experiment. Queued experiments run in a temporary copy of the repository; the data
profiles compose `data.root` to an absolute path (`${repo_path:...}`), so
`-S data=coco_mini` finds ../shared/coco-mini from that copy too.

--collect reads every experiment's params and metrics (`dvc exp show --json`) and writes one
row per distinct weights: the selected candidates' mean filter scores and the CLIPScore of the
captioner trained on S_synthetic (biaslab.report.table4.table4_from_experiments).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from biaslab import report as R  # noqa: E402
from biaslab.report import table4 as T4  # noqa: E402
from biaslab.report.dvcview import exp_show  # noqa: E402


def run(overrides: list[str], weights=T4.TABLE4_WEIGHTS) -> None:
    extra = []
    for o in overrides:
        extra += ["-S", o]
    for w in weights:
        name = "ablation-" + "".join(str(int(x)) for x in w)
        cmd = ["dvc", "exp", "run", "--queue", "-n", name,
               "-S", f"filters.weights=[{','.join(str(x) for x in w)}]", *extra]
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, cwd=ROOT, check=True)
    subprocess.run(["dvc", "exp", "run", "--run-all"], cwd=ROOT, check=True)


def collect(out: Path) -> str:
    rows = T4.table4_from_experiments(exp_show(ROOT))   # every baseline's experiments
    md = ("# Table 4: filter ablation (paper 000)\n\n"
          "Object / Color / Prompt: mean filter scores of the selected candidates (stand-ins "
          "for the paper's human ratings); CLIPScore of the captioner trained on S_synthetic.\n\n"
          + T4.table4_markdown(rows) + "\n")
    md = R.stamp(md, R.made_by("scripts/filter_ablation.py", ROOT))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(md)
    tmp.replace(out)
    return md


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", action="store_true", help="queue and run the 8 experiments")
    ap.add_argument("--collect", action="store_true", help="write the table from dvc exp show")
    ap.add_argument("-S", dest="overrides", action="append", default=[],
                    help="extra `dvc exp run -S` override for every experiment")
    ap.add_argument("--out", default=str(ROOT / "plots" / "report" / "table4.md"))
    a = ap.parse_args(argv)
    if not (a.run or a.collect):
        ap.error("give --run and/or --collect")
    if a.run:
        run(a.overrides)
    if a.collect:
        print(collect(Path(a.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
