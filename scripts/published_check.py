"""CI's check of the published profile (issue 28; "same bytes on any machine"): recompute
``published_bias`` for a subset of the released captioners (``--models``, default ``nic``) on
this machine and compare the result, byte for byte after the stage's rounding, with the
committed ``metrics/published.json`` (the same model's block and its input files' sha256).

Each model's numbers are computed independently of the others (its own LIC jobs and seeds), so
a subset checks the same code paths as ``dvc repro --force published/dvc.yaml`` at a ninth of
its time (about 90 s for NIC against 650 s for all nine on the 2-core dev machine, stop 60).
Exit 0 when every checked block is identical, 1 otherwise; the differing keys are printed.

    python scripts/published_check.py [--models nic sat]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def _diff(a, b, path="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _diff(a.get(k), b.get(k),
                                                                   f"{path}.{k}")]
    return [] if a == b else [path]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["nic"])
    a = ap.parse_args(argv)
    committed = json.loads(subprocess.run(
        ["git", "show", "HEAD:metrics/published.json"], cwd=REPO, capture_output=True,
        text=True, check=True).stdout)
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    unknown = [m for m in a.models if m not in committed["models"]]
    if unknown:
        print(f"published_check: {unknown} not in the committed metrics/published.json "
              f"(models: {sorted(committed['models'])})", file=sys.stderr)
        return 2
    params["published"]["models"] = list(a.models)
    with tempfile.TemporaryDirectory() as tmp:
        pfile, out = Path(tmp) / "params.yaml", Path(tmp) / "published.json"
        pfile.write_text(yaml.safe_dump(params, sort_keys=False))
        subprocess.run([sys.executable, "stages/published_bias.py", "--params", str(pfile),
                        "--out", str(out)], cwd=REPO, check=True)
        got = json.loads(out.read_text())
    diffs = []
    for m in a.models:
        diffs += _diff(got["models"][m], committed["models"][m], f"models.{m}")
    diffs += [f"inputs.{k}" for k, v in got["inputs"].items()
              if committed["inputs"].get(k) != v]
    print(f"::published:: {len(a.models)} of {len(committed['models'])} models recomputed "
          f"({', '.join(a.models)}): {len(diffs)} values differ from the committed "
          f"metrics/published.json{': ' + ', '.join(diffs[:20]) if diffs else ''}")
    return 1 if diffs else 0


if __name__ == "__main__":
    raise SystemExit(main())
