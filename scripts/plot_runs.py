"""Write the overlay plots' run lists in dvc.yaml from params.yaml (every
training set x seed is drawn, not the first three seeds).

usage (from the repository root): python scripts/plot_runs.py [--check]

DVC's top-level plots name their files one by one (no globs), so the lists of
``classifier_loss``, ``classifier_val_mAP``, ``classifier_val_gender_acc`` and
``captioner_loss`` are generated: classifier ``datasets`` + ``methods`` x ``seeds`` and captioner
``datasets`` x ``seeds`` of params.yaml, as ``biaslab.runtime.paths.live_dir`` names their DVCLive
directories. ``--check`` exits 1 when dvc.yaml differs (tests/test_params.py runs it).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from biaslab.runtime.paths import live_dir  # noqa: E402

#: runs that do not log a plot's file: the adversarial baseline has no gender head
EXCLUDE = {"classifier_val_gender_acc": ("adversarial",)}
#: plot id -> (model kind, DVCLive files under the run directory, y field)
PLOTS = {
    "classifier_loss": ("classifier", ("plots/metrics/train/loss.tsv",
                                       "plots/metrics/val/loss.tsv"), "loss"),
    "classifier_val_mAP": ("classifier", ("plots/metrics/val/mAP.tsv",), "mAP"),
    "classifier_val_gender_acc": ("classifier", ("plots/metrics/val/gender_acc.tsv",),
                                  "gender_acc"),
    "captioner_loss": ("captioner", ("plots/metrics/train/loss.tsv",
                                     "plots/metrics/val/loss.tsv"), "loss"),
}


def runs(params: dict, kind: str, exclude=()) -> list[str]:
    """DVCLive run directories of ``kind`` under ``params``, datasets then methods."""
    p = params.get(kind) or {}
    names = list(p.get("datasets") or []) + (list(p.get("methods") or [])
                                               if kind == "classifier" else [])
    return [live_dir(kind, n, s) for n in names if n not in exclude
            for s in (p.get("seeds") or [])]


def render(text: str, params: dict) -> str:
    """``text`` (dvc.yaml) with the y-lists of :data:`PLOTS` regenerated."""
    for pid, (kind, files, field) in PLOTS.items():
        lines = [f"        {d}/{f}: {field}" for f in files
                 for d in runs(params, kind, EXCLUDE.get(pid, ()))]
        pat = re.compile(rf"(  - {pid}:\n(?:      .*\n)*?      y:\n)((?:        .*\n)*)")
        m = pat.search(text)
        if not m:
            raise SystemExit(f"plot_runs: plot {pid} with a y: list not found in dvc.yaml")
        text = text[:m.start(2)] + "\n".join(lines) + "\n" + text[m.end(2):]
    return text


def main(argv: list[str]) -> int:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    old = (ROOT / "dvc.yaml").read_text()
    new = render(old, params)
    if "--check" in argv:
        if new != old:
            print("plot_runs: dvc.yaml's plot run lists differ from params.yaml; run "
                  "python scripts/plot_runs.py", file=sys.stderr)
            return 1
        return 0
    if new != old:
        (ROOT / "dvc.yaml").write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
