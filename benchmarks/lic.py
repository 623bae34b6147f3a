"""Benchmark: LIC wall time and classifier training throughput on real COCO captions.

Data: coco-mini ``captions_val2017.json`` (real COCO val2017 captions). Image gender from the
human captions (``biaslab.data.gender.image_gender``, rule ``any_mention``, list ``lic``). As there
is no captioning model here, the "model captions" are the first human caption of every image
(by annotation id), so LIC should be near 0 and LIC_M near LIC_D: a sanity check of the
pipeline on real text, not a paper number.

Measured for the LSTM classifier with the ``paper`` preset (thesis 2.8.1) and the ``ci`` preset:

* training throughput: ``textclf.train`` on the seed-0 balanced LIC_M training set, captions x
  epochs / seconds (``--throughput-epochs`` epochs for paper, the preset's epochs for ci), with
  1 and with 2 torch threads;
* LIC wall time: ``biaslab.metrics.lic.lic`` (LIC_M and LIC_D) with 1 torch thread, for
  ``--paper-seeds`` seeds and ``--paper-human-indices`` human-caption indices (default 1 of 5,
  to keep the run short: the paper preset trains 864 captions x 20 epochs per classifier) and
  ``--ci-seeds`` seeds with all 5 indices;
* speed ratios measured in the same run, the baseline being the paper preset (and 2 threads).

Run: ``.venv/bin/python benchmarks/lic.py`` (about 5 minutes on 2 shared cores); writes
``benchmarks/results/lic.json``.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from biaslab.models import textclf  # noqa: E402
from biaslab.data.gender import image_gender  # noqa: E402
from biaslab.runtime.io import write_json  # noqa: E402
from biaslab.metrics.lic import balanced_split, lic_details, preprocess  # noqa: E402

DEFAULT_CAPTIONS = REPO.parent / "shared" / "coco-mini" / "annotations" / "captions_val2017.json"


def load(path: Path):
    data = json.loads(path.read_text())
    caps = defaultdict(list)
    for a in sorted(data["annotations"], key=lambda a: a["id"]):
        caps[a["image_id"]].append(a["caption"])
    genders = {i: image_gender(c) for i, c in caps.items()}
    model = {i: c[0] for i, c in caps.items()}
    return model, dict(caps), genders


def throughput(model, genders, cfg) -> dict:
    train_ids, _ = balanced_split({i: g for i, g in genders.items() if g in ("female", "male")},
                                  seed=0)
    texts = [preprocess(model[i]) for i in train_ids]
    labels = [genders[i] for i in train_ids]
    t = time.perf_counter()
    textclf.train(texts, labels, cfg, seed=0)
    sec = time.perf_counter() - t
    return {"n_captions": len(texts), "epochs": cfg.epochs, "seconds": round(sec, 2),
            "captions_per_s": round(len(texts) * cfg.epochs / sec, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--captions", type=Path, default=DEFAULT_CAPTIONS)
    ap.add_argument("--paper-seeds", type=int, default=1)
    ap.add_argument("--paper-human-indices", type=int, default=1)
    ap.add_argument("--ci-seeds", type=int, default=2)
    ap.add_argument("--throughput-epochs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "lic.json")
    args = ap.parse_args(argv)

    load0 = os.getloadavg()
    t_all = time.perf_counter()
    model, human, genders = load(args.captions)
    paper = textclf.default_config("lstm", "paper", progress=False, num_threads=1)
    ci = textclf.default_config("lstm", "ci", progress=False, num_threads=1)

    res: dict = {"throughput": {}, "lic": {}}
    for threads in (1, 2):
        res["throughput"][f"paper_{threads}thread"] = throughput(
            model, genders, textclf.default_config("lstm", "paper", progress=False,
                                                   epochs=args.throughput_epochs,
                                                   num_threads=threads))
        res["throughput"][f"ci_{threads}thread"] = throughput(
            model, genders, textclf.default_config("lstm", "ci", progress=False,
                                                   num_threads=threads))
        print(json.dumps(res["throughput"]), flush=True)
    for name, cfg, seeds, k in (("paper", paper, args.paper_seeds, args.paper_human_indices),
                                ("ci", ci, args.ci_seeds, None)):
        t = time.perf_counter()
        r = lic_details(model, human, genders, classifier="lstm", seeds=seeds, config=cfg,
                        max_human_captions=k)
        sec = time.perf_counter() - t
        n_clf = len(r["seeds"]) * (1 + r["n_human_indices"])
        res["lic"][name] = {
            "seconds": round(sec, 1), "seconds_per_seed": round(sec / len(r["seeds"]), 1),
            "torch_threads": cfg.num_threads,
            "n_classifiers": n_clf,
            "captions_per_s_overall": round(
                n_clf * 2 * r["n_train_per_gender"] * cfg.epochs / sec, 1),
            **{k: (round(r[k], 2) if isinstance(r[k], float) else r[k])
               for k in ("LIC_M", "LIC_M_std", "LIC_D", "LIC_D_std", "LIC", "LIC_std",
                         "n_images", "n_images_by_gender", "n_train_per_gender",
                         "n_test_per_gender", "n_human_indices", "seeds")},
            "per_seed": [{k: (round(v, 2) if isinstance(v, float) else
                              [round(x, 2) for x in v] if isinstance(v, list) else v)
                          for k, v in p.items()} for p in r["per_seed"]],
            "config": textclf.config_to_dict(cfg)}
        print(f"{name}: LIC_M {r['LIC_M']:.2f} LIC_D {r['LIC_D']:.2f} LIC {r['LIC']:.2f} "
              f"({sec:.0f} s)", flush=True)
    tp, lw = res["throughput"], res["lic"]
    cps = {k: v["captions_per_s"] for k, v in tp.items()}
    res["ratios_vs_paper_preset"] = {
        "training_throughput_ci_over_paper_1thread": round(cps["ci_1thread"]
                                                           / cps["paper_1thread"], 2),
        "training_throughput_ci_over_paper_2threads": round(cps["ci_2thread"]
                                                            / cps["paper_2thread"], 2),
        "training_throughput_1thread_over_2threads_paper": round(cps["paper_1thread"]
                                                                 / cps["paper_2thread"], 2),
        "training_throughput_1thread_over_2threads_ci": round(cps["ci_1thread"]
                                                              / cps["ci_2thread"], 2),
        "lic_seconds_per_classifier_paper_over_ci": round(
            (lw["paper"]["seconds"] / lw["paper"]["n_classifiers"])
            / (lw["ci"]["seconds"] / lw["ci"]["n_classifiers"]), 2)}
    res["meta"] = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "processor": platform.processor(),
                    "cpu_count": os.cpu_count(), "torch": torch.__version__,
                    "torch_threads": torch.get_num_threads(),
                    "python": platform.python_version(),
                    "loadavg_start": [round(x, 2) for x in load0],
                    "loadavg_end": [round(x, 2) for x in os.getloadavg()],
                    "note": "2 CPU cores shared with other workers: timings are noisy"},
        "data": {"captions": str(args.captions),
                 "model_captions": "first human caption of each image (no captioning model)",
                 "gender": "biaslab.data.gender.image_gender(any_mention, lic) of the human captions"},
        "total_seconds": round(time.perf_counter() - t_all, 1)}
    write_json(args.out, res)
    print(json.dumps({k: res[k] for k in ("throughput", "ratios_vs_paper_preset")}, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
