"""Benchmark: added time of the model-level baselines of paper 000 Table 1
(biaslab.classify.methods) against the plain head (ERM), on the same inputs in one run.

For every method (ERM first), ``--seeds`` seeds: wall-clock seconds of
``biaslab.classify.train_classifier`` on the ORIGINAL manifest's features (the ci params of
params.yaml ``classifier``, the method's ``classifier.method_params``) and of
``biaslab.classify.evaluate`` (mAP, Ratio on the persons-blacked-out test images, Leakage with
attackers trained on the training images, ``classifier.leakage_rounds`` rounds) -- what stages
train_method and eval_classifier spend per model beyond their fixed start-up cost. Reported:
per method the median over seeds of train / eval / train+eval seconds and the ratio to ERM's
median, epochs run, and the mAP / Ratio / Leakage of each seed (a sanity check, not a result:
one small synthetic run). torch runs on 1 thread (as the stages do); the 1-minute load average
before and after is recorded because the CPU is shared.

Inputs: a finished pipeline data directory (``--data``, default ``data``; e.g. the lead's
``/work/main/data``), read only: datasets/original.parquet, features/, prepared/, labels/,
split.parquet, eval_classifier/masked/. Features of the masked test images are computed once
into a temporary cache (``--cache``).

Run: ``.venv/bin/python benchmarks/classifier_methods.py --data /work/main/data``; writes
``benchmarks/results/classifier_methods.json``.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from biaslab.classify import (TrainSettings, encode_files, evaluate,  # noqa: E402
                              manifest_features, object_matrix, select_labels, test_table,
                              train_classifier)
from biaslab import registry  # noqa: E402
from biaslab.models.features import load_features, set_threads  # noqa: E402
from biaslab.runtime.io import write_json  # noqa: E402
from biaslab.runtime.settings import from_params  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="data")
    ap.add_argument("--params", default=str(REPO / "params.yaml"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--methods", nargs="+", default=registry.METHODS.names())
    ap.add_argument("--cache", default=None)
    ap.add_argument("--out", default=str(REPO / "benchmarks/results/classifier_methods.json"))
    args = ap.parse_args()
    data = Path(args.data)
    params = yaml.safe_load(Path(args.params).read_text())
    p = params["classifier"]
    settings = from_params(TrainSettings, p, "classifier", unknown="ignore")
    fp = params["features"]
    set_threads(1)
    load0 = os.getloadavg()[0]

    train = pd.read_parquet(data / "datasets/original.parquet")
    labels = select_labels(train, settings.min_cooccur, settings.cooccur_rule)
    ids, base = load_features(data / "features/images")
    cache = args.cache or tempfile.mkdtemp(prefix="bench_cm_")
    feats = manifest_features(train, ids, base, cache, fp["backbone"],
                              image_size=fp["image_size"])
    prep = data / "prepared"
    persons = pd.read_parquet(prep / "persons.parquet")
    test = test_table(pd.read_parquet(prep / "images.parquet"),
                      pd.read_parquet(data / "labels/images.parquet"),
                      pd.read_parquet(data / "split.parquet"),
                      pd.read_parquet(prep / "objects.parquet"), persons)
    masked_dir = data / "eval_classifier/masked"
    masked = test[test["image_id"].isin(persons["image_id"])][["image_id", "gender"]].copy()
    masked["path"] = [str(next(masked_dir.glob(f"{i}.*"))) for i in masked["image_id"]]
    row = {int(i): k for k, i in enumerate(ids)}
    f_test = base[[row[int(i)] for i in test["image_id"]]]
    f_masked = encode_files(masked["path"].tolist(), cache, fp["backbone"],
                            image_size=fp["image_size"], num_threads=1)
    lab = train["objects"].apply(len).gt(0).to_numpy() & \
        train["gender"].isin(["female", "male"]).to_numpy()
    lk = {"rounds": int(p.get("leakage_rounds", 5)), "seed": 0}

    results = {}
    for name in args.methods:
        rec = {"train_s": [], "eval_s": [], "epochs": [], "mAP": [], "ratio": [],
               "leakage": []}
        for seed in args.seeds:
            t = time.perf_counter()
            clf, hist = train_classifier(feats, train, labels, seed=seed, settings=settings,
                                         method=name,
                                         method_params=(p.get("method_params") or {}).get(name))
            rec["train_s"].append(time.perf_counter() - t)
            t = time.perf_counter()
            r = evaluate(clf, f_test, object_matrix(test["objects"], labels),
                         test["labelled"].to_numpy(), test["gender"].tolist(), f_masked,
                         masked_genders=masked["gender"].tolist(), train_feats=feats[lab],
                         train_objects=object_matrix(train["objects"][lab], labels),
                         train_genders=train["gender"][lab].tolist(), leakage_kwargs=lk)
            rec["eval_s"].append(time.perf_counter() - t)
            rec["epochs"].append(len(hist))
            for k in ("mAP", "ratio", "leakage"):
                v = r.get(k)
                rec[k].append(None if v is None or not np.isfinite(v) else round(float(v), 2))
        med = {k: statistics.median(rec[k]) for k in ("train_s", "eval_s")}
        med["total_s"] = statistics.median([a + b for a, b in zip(rec["train_s"],
                                                                  rec["eval_s"])])
        results[name] = {**{f"median_{k}": round(v, 3) for k, v in med.items()},
                         **{k: [round(v, 3) for v in rec[k]] for k in ("train_s", "eval_s")},
                         **{k: rec[k] for k in ("epochs", "mAP", "ratio", "leakage")}}
        print(name, results[name], flush=True)
    base_t = results.get("erm")
    if base_t:
        for name, r in results.items():
            for k in ("train_s", "eval_s", "total_s"):
                r[f"ratio_{k}"] = round(r[f"median_{k}"] / base_t[f"median_{k}"], 2)
    write_json(args.out, {
        "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "torch_threads": 1, "loadavg_1m_before": round(load0, 2),
                    "loadavg_1m_after": round(os.getloadavg()[0], 2)},
        "inputs": {"data": str(data), "n_train_rows": int(len(train)),
                   "n_labels": len(labels), "n_test": int(len(test)),
                   "n_masked": int(len(masked)), "seeds": args.seeds,
                   "classifier": {k: settings.config()[k] for k in ("epochs", "lr", "batch_size",
                                                                    "patience", "hidden")},
                   "leakage_rounds": lk["rounds"]},
        "note": ("seconds per model inside one process (no stage start-up: a train_classifier "
                 "stage on the ci scale spends ~8-10 s in total, mostly start-up, see "
                 "stage_times_coco_mini_ci.json); ratio_* = median / ERM's median"),
        "methods": results})


if __name__ == "__main__":
    main()
