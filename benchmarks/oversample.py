"""Over-sampling solver: the rounded LP (``biaslab.data.datasets.oversample``) against the integer
programme it replaced (``_milp_counts`` with c_i >= 1 under the same bisection), on the
default's Original manifest (``data/datasets/original.parquet``; run ``dvc repro
build_datasets`` first), in the same run. Records wall time, the bound reached and the
largest repeat per cap; the MILP gets ``--milp-limit`` seconds per cap (HiGHS ``time_limit``)
and is reported as "no point" when it finds none.

usage: python benchmarks/oversample.py [--caps 10 20 none] [--milp-limit 60]
       [--out benchmarks/results/oversample.json]
"""
import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from biaslab.data import datasets as D
from biaslab.data import gender as G


def _milp(m: pd.DataFrame, cap, factor: float, limit: float):
    """The replaced solver: bisection over the bound with the full integer programme."""
    _, x = D._presence(m)
    female = (m["gender"] == G.FEMALE).to_numpy()
    both = x[female].any(0) & x[~female].any(0)
    opts = dict(D.MILP_OPTIONS)
    old = D.MILP_OPTIONS.copy()
    D.MILP_OPTIONS.update({"time_limit": float(limit)})
    try:
        c, used = D._relaxed(lambda t: D._milp_counts(
            x[:, both], female, t, lower=1, upper=np.inf if cap is None else cap,
            maximize=False, seed=0, max_total=np.floor(factor * len(m))), 0.05, "milp")
        return {"max_skew": used, "max_repeats": int(c.max()), "n_samples": int(c.sum())}
    except ValueError as e:
        return {"error": str(e)}
    finally:
        D.MILP_OPTIONS.clear()
        D.MILP_OPTIONS.update(old)
        del opts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--caps", nargs="+", default=["10", "20", "none"])
    ap.add_argument("--factor", type=float, default=6.0)
    ap.add_argument("--milp-limit", type=float, default=60.0)
    ap.add_argument("--out", default="benchmarks/results/oversample.json")
    a = ap.parse_args()
    m = pd.read_parquet("data/datasets/original.parquet")
    rows = []
    for cap_s in a.caps:
        cap = None if cap_s == "none" else int(cap_s)
        t = time.perf_counter()
        o = D.oversample(m, max_copies=cap, max_factor=a.factor)
        lp_s = time.perf_counter() - t
        c = D.cooccurrence(o)
        t = time.perf_counter()
        mi = _milp(m, cap, a.factor, a.milp_limit)
        milp_s = time.perf_counter() - t
        rows.append({"cap": cap_s, "lp": {"seconds": round(lp_s, 2),
                                          "max_skew_bound": o.attrs["max_skew"],
                                          "max_skew_reached": c["objects_max_abs_skew"],
                                          "max_repeats": c["max_repeats"],
                                          "n_samples": c["n_samples"]},
                     "milp": {"seconds": round(milp_s, 2), **mi},
                     "milp_over_lp_time": round(milp_s / lp_s, 1) if lp_s else None})
        print(rows[-1], flush=True)
    Path(a.out).write_text(json.dumps({"manifest": "data/datasets/original.parquet",
                                       "n_images": len(m), "max_factor": a.factor,
                                       "milp_time_limit_s": a.milp_limit, "rows": rows},
                                      indent=2) + "\n")


if __name__ == "__main__":
    main()
