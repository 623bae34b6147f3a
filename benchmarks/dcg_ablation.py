"""Why the tiny DCG rewrote correct captions, and what each part of the default's DCG buys
: stage `dcg_train` + `dcg_apply` re-run on the workspace's own inputs (after
`dvc repro`) with one `libra.dcg` setting changed per row, outputs to a temporary directory.

usage: python benchmarks/dcg_ablation.py [--rows NAME ...] [--out benchmarks/results/dcg_ablation.json]

Rows (each a set of `libra.dcg` overrides of params.yaml):
  paper        the paper's generate DCG (Eq. 9) on the BCS pairs alone, masking eta at inference
               (40 epochs, as in the paper)
  generate+pairs  the same decoder with the identity / swap pairs and no inference masking
  edit-only    the edit formulation on the BCS pairs alone
  edit+eta     the default with the paper's inference masking (infer_eta = eta = 0.2)
  default      params.yaml as committed
  epochs10     the default at 10 epochs

Per row: the dcg_apply fractions (human captions kept correct, gender swaps fixed, context
readers' Error before / after with the paired change) and the share of captions whose words
changed, the training time, and the DCG's training set size. Writes one JSON object.
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
ROWS = {
    "paper": {"formulation": "generate", "identity_pairs": 0.0, "swap_pairs": 0.0,
              "infer_eta": None, "epochs": 40},
    "generate+pairs": {"formulation": "generate", "infer_eta": 0.0},
    "edit-only": {"identity_pairs": 0.0, "swap_pairs": 0.0},
    "edit+eta": {"infer_eta": 0.2},
    "default": {},
    "epochs10": {"epochs": 10},
}


def _stage(name):
    spec = importlib.util.spec_from_file_location(f"stage_{name}", REPO / "stages" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_row(name: str, overrides: dict, base: dict, tmp: Path) -> dict:
    params = copy.deepcopy(base)
    params["libra"]["dcg"].update(overrides)
    d = tmp / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    p = ["--params", str(d / "params.yaml")]
    t0 = time.perf_counter()
    _stage("dcg_train").main(p + ["--out", str(d / "dcg"), "--metrics", str(d / "dcg.json"),
                                  "--live", str(d / "live")])
    train_s = time.perf_counter() - t0
    _stage("dcg_apply").main(p + ["--model", str(d / "dcg"), "--out", str(d / "apply"),
                                  "--metrics", str(d / "apply.json")])
    dm = json.loads((d / "dcg.json").read_text())
    am = json.loads((d / "apply.json").read_text())
    out = {"overrides": overrides, "dcg_train_s": round(train_s, 1),
           "n_train": dm["n_train"] + dm.get("n_identity", 0) + dm.get("n_swap", 0)}
    for k, v in am.items():
        if isinstance(v, dict) and "after" in v:
            out[k] = {"changed": v["changed"], "correct_before": v["before"].get("correct"),
                      "correct_after": v["after"].get("correct"),
                      "wrong_before": v["before"].get("wrong"),
                      "wrong_after": v["after"].get("wrong"),
                      "error_change": v.get("error_change")}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", nargs="*", default=list(ROWS), choices=list(ROWS))
    ap.add_argument("--out", default=str(REPO / "benchmarks/results/dcg_ablation.json"))
    a = ap.parse_args(argv)
    base = yaml.safe_load((REPO / "params.yaml").read_text())
    res = {"command": "python benchmarks/dcg_ablation.py " + " ".join(sys.argv[1:]),
           "rows": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.rows:
            res["rows"][name] = run_row(name, ROWS[name], base, Path(tmp))
            r = res["rows"][name]
            print(f"{name}: " + ", ".join(
                f"{k} changed {100 * v['changed']:.1f}% correct {100 * v['correct_before']:.1f}"
                f" -> {100 * v['correct_after']:.1f}%" for k, v in r.items()
                if isinstance(v, dict) and "changed" in v) + f"; train {r['dcg_train_s']} s",
                  flush=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(f"-> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
