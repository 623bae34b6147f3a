"""Gender LIC_M of two published captioners at the paper preset (thesis 2.8.1: LSTM embedding
100, hidden 256, 20 epochs, lr 5e-5), 3 seeds each, on 2 workers: the check that
the ci profile cannot make on a CPU in CI time (the full paper profile is ~17.5 h here).

Usage: python benchmarks/published_paper_subset.py [--models nic nic_equalizer] [--seeds 3]
Writes benchmarks/results/published_paper_subset.json (per model: LIC_M record, per seed,
the thesis' value and ±, seconds)."""
import argparse
import json
import time
from pathlib import Path

from biaslab.data import published as P
from biaslab.metrics.lic import lic_details
from biaslab.runtime.parallel import map_jobs
from biaslab.runtime.stats import record

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["nic", "nic_equalizer"])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--root", default=str(ROOT.parent / "shared" / "published-captions"))
    a = ap.parse_args()
    paper = P.read_paper_tables(ROOT / "published/paper_tables.csv")
    jobs = [(m, s) for m in a.models for s in range(a.seeds)]

    def one(job):
        m, s = job
        df = P.read_outputs(a.root, m, "gender")
        t = time.perf_counter()
        r = lic_details(dict(zip(df["image_id"].astype(int), df["caption"])), None,
                        P.labels(df, "gender"), seeds=[s], config="paper", workers=1)
        return {"LIC_M": r["LIC_M"], "seconds": time.perf_counter() - t, "config": r["config"]}

    t0 = time.perf_counter()
    res = map_jobs(one, jobs, 2, on_done=lambda i, r: print(jobs[i], r["LIC_M"],
                                                             round(r["seconds"]), flush=True))
    out = {"command": "python benchmarks/published_paper_subset.py " + " ".join(
        ["--models", *a.models, "--seeds", str(a.seeds)]), "total_s": time.perf_counter() - t0,
        "config": res[0]["config"], "models": {}}
    for m in a.models:
        vals = [r["LIC_M"] for (mm, _), r in zip(jobs, res) if mm == m]
        row = paper[(paper.table == "2.2") & (paper.model == m) & (paper.encoder == "lstm")
                    & (paper.metric == "LIC_M")].iloc[0]
        rec = record(vals)
        out["models"][m] = {"LIC_M": rec, "per_seed": vals, "thesis": float(row.value),
                            "thesis_std": float(row.spread),
                            "within": abs(rec["mean"] - float(row.value)) <= float(row.spread),
                            "seconds": [r["seconds"] for (mm, _), r in zip(jobs, res) if mm == m]}
    path = ROOT / "benchmarks/results/published_paper_subset.json"
    path.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    print(json.dumps(out["models"], indent=1))


if __name__ == "__main__":
    main()
