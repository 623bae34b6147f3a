"""Benchmark: the audit's appearance test (paper 004 Sect. 5.1.4,
``biaslab.analysis.audit_attribute.appearance_table``) on 1 and 2 worker processes.

Data: the workspace's default (``data/prepared``, ``data/labels``, ``data/features`` after
``dvc repro``), gender groups as stage ``audit`` builds them; the params' ``audit.appearance``
settings. Measures the wall time of the whole table per ``workers`` value (each run once,
after one untimed warm-up of joblib's worker pool), checks that the tables are identical,
and records the ratio against 1 worker measured in the same run.

Run: ``.venv/bin/python benchmarks/appearance.py``; writes ``benchmarks/results/appearance.json``.
"""
from __future__ import annotations

import datetime as dt
import os
import platform
import sys
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from biaslab.analysis import attribute_eval, audit_attribute  # noqa: E402
from biaslab.models.features import load_features  # noqa: E402
from biaslab.runtime.io import load_params, write_json  # noqa: E402


def main() -> int:
    os.chdir(REPO)
    params = load_params("params.yaml")
    app = dict((params.get("audit") or {}).get("appearance") or {})
    app.pop("workers", None)
    labels = pd.read_parquet("data/labels/images.parquet")
    groups = attribute_eval.group_labels(
        "gender", dict(zip(labels["image_id"].astype(int), labels["gender"])), None)
    ids, feats = load_features("data/features/images")
    objects = pd.read_parquet("data/prepared/objects.parquet")
    names = attribute_eval.attribute_groups("gender")
    audit_attribute.appearance_table(feats, ids, objects, groups, names, **{
        **app, "n_permutations": 5}, workers=2)          # warm-up: joblib's process pool
    times, tables = {}, {}
    for w in (1, 2):
        t0 = time.perf_counter()
        tables[w] = audit_attribute.appearance_table(feats, ids, objects, groups, names, **app,
                                                     workers=w)
        times[w] = round(time.perf_counter() - t0, 2)
        print(f"workers={w}: {times[w]} s")
    same = tables[1].equals(tables[2])
    out = {"benchmark": "appearance", "date": dt.date.today().isoformat(),
           "machine": {"cpu": platform.processor() or platform.machine(),
                       "cores": os.cpu_count()},
           "settings": app, "n_categories": int(len(tables[1])),
           "n_tested": int(tables[1]["tested"].sum()), "wall_s": times,
           "ratio_vs_1_worker": {w: round(times[w] / times[1], 3) for w in times},
           "tables_identical": bool(same)}
    write_json(REPO / "benchmarks/results/appearance.json", out)
    print(out)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
