"""What the Ratio protocol's mask fill reads as: for every classifier of the
default run, the mask effect Ratio_E(masked) / Ratio_E(the same images drawn without their
person) with each fill (black 0, grey 128, the mean colour of the unmasked pixels), on the
100 context-free images (probe/neutral.csv) and on the 600 probe images in context, plus how
far each fill drives the frozen features outside the training range (median over images of
the largest |z| under the Original seed-0 head's standardisation). It is the evidence for
``classifier.blackout_fill: mean``.

Usage (after ``dvc repro`` on the synthetic default):
    python benchmarks/mask_fill.py [--fills 0 128 mean]
Writes benchmarks/results/mask_fill.json."""
import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

from biaslab.analysis import probe as P
from biaslab.classify import GenderObjectClassifier, file_id, model_features
from biaslab.models.features import load_features
from biaslab.runtime.io import load_params, write_json
from biaslab.runtime.paths import model_dir
from biaslab.data.synthetic import read_neutral, read_probe

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks/results/mask_fill.json"
TMP = Path("data/cache/mask_fill")


def _fill(v: str):
    return v if v == "mean" else int(v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fills", nargs="+", default=["0", "128", "mean"])
    a = ap.parse_args()
    params = load_params()
    c = params["classifier"]
    root = params["data"]["root"]
    cache = params["features"]["cache_dir"]
    t0 = time.perf_counter()
    sets = {"no_context": read_neutral(root), "context": read_probe(root)}
    empty = {k: P.person_free_images(f, root, TMP / "empty") for k, f in sets.items()}
    masked = {(k, fill): P.blackout_probe(f, TMP / f"{k}_{fill}", sources=tuple(c["blackout"]),
                                          dilate_px=int(c["blackout_dilate_px"]),
                                          fill=_fill(fill))
              for k, f in sets.items() for fill in a.fills}
    genders = {"no_context": sets["no_context"]["value"],
               "context": sets["context"]["person_gender"]}
    ids, base = load_features()

    def table(f):
        return f[["path"]].assign(image_id=[file_id(p) for p in f["path"]])

    tables = {**{(k, "empty"): table(f) for k, f in empty.items()},
              **{key: table(f) for key, f in masked.items()}}
    ref = GenderObjectClassifier.load(model_dir("classifier", "original", int(c["seeds"][0])))
    mu, sd = ref.head.mean.numpy(), ref.head.std.numpy()
    zmax = {f"{k}/{fill}": float(np.median(np.abs(
        (model_features(ref, t, ids, base, cache, derived=True) - mu) / sd).max(1)))
        for (k, fill), t in tables.items()}
    out = {}
    for d in list(c["datasets"]) + [m for m in c.get("methods") or [] if m != "adversarial"]:
        clfs = [GenderObjectClassifier.load(model_dir("classifier", d, s)) for s in c["seeds"]]
        probs = {key: [clf.gender_proba(model_features(clf, t, ids, base, cache, derived=True))
                       for clf in clfs] for key, t in tables.items()}
        out[d] = {k: {fill: {x: P.mask_neutral_record(
            probs[(k, fill)], genders[k], empty=probs[(k, "empty")], n_boot=500)[x]
            for x in ("mask_effect", "mask_effect_lo", "mask_effect_hi", "ratio_expected",
                      "ratio_expected_empty", "mask_effect_per_seed")}
            for fill in a.fills} for k in sets}
        print(d, {k: {f: round(v["mask_effect"], 2) for f, v in r.items()}
                  for k, r in out[d].items()}, flush=True)
    write_json(OUT, {"what": __doc__.split("\n\n")[0], "seeds": list(c["seeds"]),
                     "bounds": [0.67, 1.5], "median_max_abs_z": zmax, "by_dataset": out,
                     "seconds": round(time.perf_counter() - t0, 1),
                     "machine": f"{platform.machine()}, {platform.python_version()}"})
    print(json.dumps(zmax, indent=1))


if __name__ == "__main__":
    main()
