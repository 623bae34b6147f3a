"""CI's check of the published profile: recompute ``published_bias`` for a subset of the
released captioners (``--models``, default ``nic``) on this machine and compare the result with
the committed ``metrics/published.json`` by the reproducibility contract of
``biaslab.runtime.reprocheck``: the same input files (sha256), every count and text identical,
every number within its declared tolerance (LIC trains LSTMs, whose last bits depend on the
CPU in the default numeric mode).

Each model's numbers are computed independently of the others (its own LIC jobs and seeds), so
a subset checks the same code paths as ``dvc repro --force published/dvc.yaml`` at a ninth of
its time (about 90 s for NIC against 202 s for all nine in standard numerics on the 2-core dev
machine).
Exit 0 when every checked block passes, 1 otherwise; each failure is printed with both
values and its tolerance.

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
    sys.path.insert(0, str(REPO))
    from biaslab.runtime.reprocheck import compare_numbers
    diffs, drifts = [], []
    for m in a.models:
        f, d = compare_numbers(committed["models"][m], got["models"][m], f"models.{m}")
        diffs += [f"{x['key']}: {x['reference']!r} -> {x['fresh']!r} (tolerance "
                  f"{x['tolerance']}, {x['why']})" for x in f]
        drifts += d
    diffs += [f"inputs.{k}: another file" for k, v in got["inputs"].items()
              if committed["inputs"].get(k) != v]
    moved = [d for d in drifts if d["drift"]]
    worst = max(moved, key=lambda d: d["drift"] / d["tolerance"], default=None)
    print(f"::published:: {len(a.models)} of {len(committed['models'])} models recomputed "
          f"({', '.join(a.models)}): {len(drifts)} numbers compared, {len(moved)} moved"
          + (f" (largest: {worst['key']} {worst['reference']} -> {worst['fresh']}, "
             f"tolerance {worst['tolerance']:.3g})" if worst else "")
          + f"; {len(diffs)} beyond tolerance" + ("".join(f"\n  {d}" for d in diffs[:20])))
    return 1 if diffs else 0


if __name__ == "__main__":
    raise SystemExit(main())
