"""DVC stage `dcg_apply`: LIBRA on top of a captioner (paper 003 sec. 4 "Inference"; logic:
biaslab.libra.dcg.debias, the same code as `biaslab libra debias`).

Input: `libra.apply.pred` (a COCO results file of any captioner, e.g. the captioner stage's
output) or, when it is null, a stand-in built from the test split: one human caption with
gender words per test image labelled female/male (`human`) and the same captions with their
gender words swapped (`swapped`: a captioner that always gets the gender wrong). Each input is
debiased and scored against the image gender labels (caption gender wrong / neutral / both).

On data with a planted truth (the synthetic default) two more stand-ins are the captioner
controls that name the gender their context implies, person ignored
(biaslab.analysis.controls.captioner_captions; the same test images as `human`): `context_reader` reads
objects, scene and cast (the Bayes decision: at b = 0.8 it is wrong on few images) and
`context_reader[cast]` reads the colour cast alone (wrong on about (1 - b) / 2 of them).
Every gender error of theirs comes from context, where paper 003 says LIBRA lowers Error. Each
input's `error_change` is the per-image paired change of Error (after - before, percentage
points) with its t 95 % CI over images (biaslab.metrics.captions.error_change), the number
validity's `libra/dcg/<control>_error<0` checks read.

Reads  data/libra/dcg/, data/features/images{,_ids}.npy, data/prepared/images.parquet,
       data/labels/images.parquet, data/labels/captions.parquet, data/split.parquet,
       `data.root`'s planted truth when it has one (annotations/synth_truth.csv,
       synth_params.json), params `libra.apply` (pred, num_beams, max_images), `libra.seed`,
       `libra.threads`, `libra.words`, `data.root`
Writes data/libra/apply/ (input_<name>.json, debiased_<name>.json: COCO results format),
       metrics/dcg_apply.json
Progress: a tqdm bar over each input's captions on stderr (biaslab.runtime.progress: throttled lines
       when stderr is not a terminal; BIASLAB_PROGRESS=0 turns it off).

Usage: python stages/dcg_apply.py [--params params.yaml] [--model data/libra/dcg] ...
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

import pandas as pd

from biaslab.analysis import controls as K
from biaslab.data import synthetic as S
from biaslab.data.gender import FEMALE, MALE, caption_gender, swap
from biaslab.runtime.io import (InputError, load_params, read_parquet, run_stage,
                                skip_without_captions, stage_parser, write_json)
from biaslab.libra import dcg as D
from biaslab.metrics.captions import error_change
from biaslab.libra.t5 import word_spans
from biaslab.runtime import runstats


def gender_scores(captions: dict[int, str], labels: dict[int, str], words: str) -> dict:
    """Fractions of captions (images labelled female/male) whose caption gender is the image's
    (`correct`), the other one (`wrong`, Burns et al.'s gender error), `both` or `none`."""
    ids = [i for i in captions if labels.get(i) in (FEMALE, MALE)]
    if not ids:
        return {"n": 0}
    out = {"correct": 0, "wrong": 0, "both": 0, "none": 0}
    for i in ids:
        g = caption_gender(captions[i], words)
        out["correct" if g == labels[i] else "wrong" if g in (FEMALE, MALE) else g] += 1
    return {"n": len(ids), **{k: v / len(ids) for k, v in out.items()}}


#: the context-reader controls debiased on the synthetic default: name -> attributes read
CONTEXT_READERS = {"context_reader": K.ATTRIBUTES, "context_reader[cast]": ("cast",)}


def context_reader_captions(root: str, ids: list[int], labels: dict[int, str], seed: int,
                            reads=K.ATTRIBUTES) -> dict[int, str] | None:
    """The captioner control ``context_reader`` (biaslab.analysis.controls) reading ``reads`` on images
    ``ids``: one caption per image naming the gender the planted context implies (none on a
    tie). None when ``root`` has no planted truth (real data)."""
    try:
        truth = S.read_truth(root)
        bias = float(S.read_generator_params(root)["bias"])
    except InputError:
        return None
    ids = [i for i in ids if i in truth]
    if not ids:
        return None
    t = pd.DataFrame({"image_id": ids, "gender": [labels[i] for i in ids],
                      "objects": [truth[i]["objects"] for i in ids],
                      "scene": [truth[i]["scene"] for i in ids],
                      "cast": [truth[i]["cast"] for i in ids]})
    return K.captioner_captions("context_reader", t, bias=bias, seed=seed, reads=tuple(reads))


def _words(t: str) -> list[str]:
    return [w.lower() for _, _, w in word_spans(t)]


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--model", default="data/libra/dcg")
    ap.add_argument("--features", default="data/features/images")
    ap.add_argument("--images", default="data/prepared/images.parquet")
    ap.add_argument("--labels", default="data/labels/images.parquet")
    ap.add_argument("--captions", default="data/labels/captions.parquet")
    ap.add_argument("--split", default="data/split.parquet")
    ap.add_argument("--cache", default="data/cache/features")
    ap.add_argument("--out", default="data/libra/apply")
    ap.add_argument("--metrics", default="metrics/dcg_apply.json")
    a = ap.parse_args(argv)
    params = load_params(a.params)
    if skip_without_captions("dcg_apply", [a.out, a.metrics], a.captions):
        return 0
    p = params["libra"]
    ap_p = p.get("apply") or {}
    words = p.get("words", "libra")
    seed = p.get("seed", 0)
    try:
        model = D.load(a.model, num_threads=p.get("threads"))
    except FileNotFoundError as e:
        raise InputError(a.model, str(e)) from e
    labels_t = read_parquet(a.labels)
    labels = dict(zip(labels_t["image_id"].astype(int), labels_t["gender"]))

    inputs: dict[str, dict[int, str]] = {}
    if ap_p.get("pred"):
        from biaslab.metrics.files import read_predictions
        inputs["pred"] = read_predictions(ap_p["pred"])
    else:
        caps = read_parquet(a.captions).sort_values("caption_id")
        split = read_parquet(a.split)
        test = set(split.loc[split["split"] == "test", "image_id"].astype(int))
        human: dict[int, str] = {}
        for iid, cap in zip(caps["image_id"].astype(int), caps["caption"]):
            if iid in test and iid not in human and labels.get(iid) in (FEMALE, MALE) \
                    and caption_gender(cap, words) == labels[iid]:
                human[iid] = cap
        if not human:
            raise InputError(a.split, "no test image labelled female/male with a gendered "
                                      "caption: nothing to debias")
        inputs["human"] = human
        inputs["swapped"] = {i: swap(c, None, words) for i, c in human.items()}
        root = (params.get("data") or {}).get("root")
        for name, reads in CONTEXT_READERS.items():
            ctx = context_reader_captions(str(root), sorted(human), labels, seed, reads) \
                if root else None
            if ctx:
                inputs[name] = ctx
    max_n = ap_p.get("max_images")
    rng = np.random.default_rng(seed)

    table = read_parquet(a.images) if Path(a.images).exists() else None
    metrics: dict = {"source": "pred" if ap_p.get("pred") else "test split stand-in",
                     "num_beams": int(ap_p.get("num_beams", 1)), "eta": model.settings.eta,
                     # the masking rate debias used (dcg.debias: infer_eta, else eta)
                     "infer_eta": (model.settings.eta if model.settings.infer_eta is None
                                   else model.settings.infer_eta)}
    out = Path(a.out)
    for name, preds in inputs.items():
        ids = sorted(preds)
        if max_n and len(ids) > max_n:
            ids = sorted(rng.choice(ids, size=int(max_n), replace=False).tolist())
        if model.settings.image_input == D.FEATURES:
            imgs = D.image_features(ids, model.settings, a.features, table, a.cache,
                                    p.get("threads"))
        else:
            path = dict(zip(table["image_id"].astype(int), table["path"].astype(str)))
            imgs = [path[i] for i in ids]
        t0 = time.perf_counter()
        res = D.debias(model, [preds[i] for i in ids], imgs,
                       num_beams=int(ap_p.get("num_beams", 1)), seed=seed,
                       progress=None)   # tqdm on stderr (auto: throttled lines in a log)
        secs = time.perf_counter() - t0
        deb = dict(zip(ids, res))
        write_json(out / f"input_{name}.json",
                   [{"image_id": i, "caption": preds[i]} for i in ids])
        write_json(out / f"debiased_{name}.json", [{"image_id": i, "caption": deb[i]}
                                                   for i in ids])
        metrics[name] = {
            "n": len(ids),
            "changed": float(np.mean([_words(preds[i]) != _words(deb[i]) for i in ids])),
            "before": gender_scores({i: preds[i] for i in ids}, labels, words),
            "after": gender_scores(deb, labels, words),
            "error_change": error_change({i: preds[i] for i in ids}, deb, labels, words),
            "captions_per_s": len(ids) / secs if secs else None,
            "examples": [{"image_id": i, "input": preds[i], "debiased": deb[i]}
                         for i in ids[:5]],
        }
    metrics, run = runstats.split(metrics)  # throughput: benchmarks/runs/, not metrics/
    write_json(a.metrics, metrics)
    runstats.publish("dcg_apply", run)
    print({k: ({kk: vv for kk, vv in v.items() if kk != "examples"} if isinstance(v, dict)
               else v) for k, v in metrics.items()})
    return 0


if __name__ == "__main__":
    run_stage(main, errors=(ValueError,))
