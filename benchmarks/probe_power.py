"""Where the probe checks' uncertainty comes from, and what more probe pairs or more seeds
would buy (16 of the default's inconclusive checks are probe checks).

usage (after `dvc repro`, from the repository root):
    python benchmarks/probe_power.py     # -> benchmarks/results/probe_power.json

A model's probe value is the mean of its pair sensitivities over the n probe pairs of an
attribute; the checks take a t (or Welch) interval of those per-seed means over k seeds. The
pairs are the same for every seed, so the per-seed means vary by

    Var(per-seed mean) = sigma2_seed + sigma2_inter / n

(two-way layout seed x pair without replication: sigma2_inter is the seed x pair interaction,
estimated by the residual mean square; sigma2_seed = Var(row means) - that / n). More pairs
shrink only the second term, more seeds divide both. For each inconclusive probe check of
``metrics/validity.json`` whose per-pair values ``data/probe/pairs.parquet`` holds (families
classifier, captioner, captioner_margin; classifier_logit is not stored per pair) this
predicts the interval's half-width with the observed means and components, for pairs x1 / x3
and the seeds of the run / 5 / 10, and says whether the observed effect would then be
decided. It is a prediction from the estimated components (the same data), not a re-run.
"""
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from biaslab.runtime import stats  # noqa: E402
from biaslab.runtime.io import write_json  # noqa: E402

COLUMN = {"classifier": ("classifier", "sensitivity"), "captioner": ("captioner", "sensitivity"),
          "captioner_margin": ("captioner", "margin_sensitivity")}
CHECK = re.compile(r"^(\w+)/(\w+?)(?:-(\w+))?/(\w+)[<>≥≤]")
SCENARIOS = [(1, None), (3, None), (1, 5), (3, 5), (1, 10)]


def components(pairs: pd.DataFrame, model: str, col: str, dataset: str, attr: str) -> dict | None:
    """Mean, Var(row means), interaction variance / n and k, n of one (model, dataset,
    attribute) seed x pair table; None when absent or with fewer than 2 seeds."""
    g = pairs[(pairs["model"] == model) & (pairs["dataset"] == dataset)
              & (pairs["attribute"] == attr)]
    if g.empty:
        return None
    s = g.pivot_table(index="seed", columns="pair", values=col).to_numpy(float)
    k, n = s.shape
    if k < 2:
        return None
    rm, cm, gm = s.mean(axis=1), s.mean(axis=0), s.mean()
    resid = s - rm[:, None] - cm[None, :] + gm
    v_inter = float((resid ** 2).sum() / ((k - 1) * (n - 1))) if n > 1 else 0.0
    return {"mean": float(rm.mean()), "var_rows": float(rm.var(ddof=1)),
            "var_pair_part": v_inter / n, "k": k, "n": n}


def _var(c: dict, pairs_x: int) -> float:
    # sigma2_seed (its estimate clipped at 0, the usual ANOVA rule) + the interaction part
    # divided by pairs_x times more pairs
    return max(c["var_rows"] - c["var_pair_part"], 0.0) + c["var_pair_part"] / pairs_x


def half_width(a: dict, b: dict | None, pairs_x: int, seeds: int) -> tuple[float, float]:
    """(effect, 95 % half-width): the t interval over ``seeds`` seeds for one row, Welch's for
    a difference (:mod:`biaslab.runtime.stats`, the intervals the checks use)."""
    if b is None:
        hw = stats.t_halfwidth(float(np.sqrt(_var(a, pairs_x))), seeds)
        return a["mean"], float(hw or 0.0)
    d = stats.difference_of_records(
        {"mean": a["mean"], "std": float(np.sqrt(_var(a, pairs_x))), "n": seeds},
        {"mean": b["mean"], "std": float(np.sqrt(_var(b, pairs_x))), "n": seeds})
    return d["diff"], float(d["ci95"] or 0.0)


def main() -> int:
    pf, vf = ROOT / "data/probe/pairs.parquet", ROOT / "metrics/validity.json"
    if not pf.exists() or not vf.exists():
        sys.exit(f"probe_power: {pf} or {vf} missing (run `dvc repro` first)")
    pairs = pd.read_parquet(pf)
    checks = json.loads(vf.read_text())["checks"]
    rows, decided = [], {f"pairs_x{p}_seeds_{s or 'run'}": 0 for p, s in SCENARIOS}
    shares = []
    for c in checks:
        if c.get("source") != "metrics/probe.json" or c.get("verdict") != "inconclusive":
            continue
        m = CHECK.match(c["id"])
        if not m or m.group(1) not in COLUMN:
            rows.append({"id": c["id"], "predicted": None,
                         "why": "no per-pair values in data/probe/pairs.parquet"})
            continue
        fam, row, ref, attr = m.groups()
        model, col = COLUMN[fam]
        a = components(pairs, model, col, row, attr)
        b = components(pairs, model, col, ref, attr) if ref else None
        if a is None or (ref and b is None):
            continue
        pred = {}
        for px, s in SCENARIOS:
            eff, hw = half_width(a, b, px, s or a["k"])
            key = f"pairs_x{px}_seeds_{s or 'run'}"
            pred[key] = {"effect": round(eff, 4), "half_width": round(hw, 4),
                         "decided": bool(abs(eff) > hw)}
            decided[key] += int(abs(eff) > hw)
        part = [x for x in (a, b) if x]
        # share of Var(per-seed mean) that more pairs would remove (clipped to [0, 1]: the
        # seed component's estimate can come out negative)
        share = float(np.mean([min(x["var_pair_part"] / x["var_rows"], 1.0)
                               if x["var_rows"] else 0.0 for x in part]))
        shares.append((fam, share))
        rows.append({"id": c["id"], "observed": {"mean": c["mean"], "lo": c["lo"],
                                                 "hi": c["hi"], "n": c["n"]},
                     "pairs": a["n"], "seeds": a["k"],
                     "pair_noise_share_of_seed_variance": round(share, 3),
                     "predicted": pred})
    fam_share = {f: round(float(np.mean([s for g, s in shares if g == f])), 3)
                 for f in sorted({g for g, _ in shares})}
    out = {"command": "python benchmarks/probe_power.py",
           "inconclusive_probe_checks": len(rows),
           "with_prediction": sum(r["predicted"] is not None for r in rows),
           "predicted_decided": decided,
           "mean_pair_noise_share_by_family": fam_share,
           "checks": rows,
           "note": "predictions from the variance components of this run's probe "
                   "(two-way seed x pair layout), same observed means; pairs_x3 = three "
                   "times synthetic.probe_pairs, seeds_5 / seeds_10 = that many training "
                   "seeds of each row"}
    write_json(ROOT / "benchmarks/results/probe_power.json", out)
    print(json.dumps({k: out[k] for k in ("inconclusive_probe_checks", "with_prediction", "predicted_decided",
                                          "mean_pair_noise_share_by_family")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
