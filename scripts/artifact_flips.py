"""Diagnostic: where do the synthetic-artifact test's flips come from?

Paper 000's Table 3 inpaints a random body part of every test person with the caption (so the
person's gender) as the prompt and reads the change of the gender ratio, Δ, as the models'
use of inpainting artifacts. This script re-builds the inpainted test set with each backend
of ``--backends`` (default copy_paste and render) exactly as stage ``artifact_test`` does
(``biaslab.counterfactual.generate.make_backend``,
``biaslab.analysis.artifact.build_inpainted_test_set``, seed ``artifact.seed``), scores the workspace's
classifiers (``artifact.datasets`` x ``classifier.seeds``) on the original and the inpainted
images, and writes, per backend and training set, every flipped gender call by body part and
direction, and the mean change of P(man) - P(woman) by part and the person's gender.

A gender-preserving edit that models read as an artifact shortcut would flip calls towards the
group whose training images carried the artifacts; an edit that damages the person's gender cue
flips them away from that person's gender. Run after ``dvc repro`` in the repository root:

    python scripts/artifact_flips.py [--out plots/report/artifact_flips.md]

It reads data/prepared, data/labels, data/split.parquet, data/models/classifier and the
features; the inpainted images go to a temporary directory, their features to the cache.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from biaslab.analysis.artifact import build_inpainted_test_set  # noqa: E402
from biaslab.classify import (GenderObjectClassifier, gender_thresholds,  # noqa: E402
                              model_features, test_table)
from biaslab.counterfactual.generate import make_backend  # noqa: E402
from biaslab.models.features import load_features  # noqa: E402
from biaslab.runtime.io import atomic_path, load_params, read_parquet  # noqa: E402
from biaslab.runtime.paths import model_dir  # noqa: E402

PREP = "data/prepared"


def calls(p_woman: np.ndarray, p_man: np.ndarray, thr: tuple[float, float]) -> np.ndarray:
    """The gender call per image as Table 3 counts it: "man", "woman", "both" or "neither"."""
    m, w = np.asarray(p_man) >= thr[1], np.asarray(p_woman) >= thr[0]
    return np.where(m & w, "both", np.where(m, "man", np.where(w, "woman", "neither")))


def toward(before: str, after: str) -> str:
    """Direction of a flip in the man-vs-woman call: "man", "woman" or "-" (no change)."""
    score = {"woman": -1, "neither": 0, "both": 0, "man": 1}
    d = score[after] - score[before]
    return "man" if d > 0 else "woman" if d < 0 else "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="copy_paste,render")
    ap.add_argument("--out", default="plots/report/artifact_flips.md")
    args = ap.parse_args(argv)
    params = load_params()
    a, g, c = params["artifact"], params["generate"], params["classifier"]
    cache = params.get("features", {}).get("cache_dir", "data/cache/features")
    images = read_parquet(f"{PREP}/images.parquet")
    persons = read_parquet(f"{PREP}/persons.parquet")
    labels = read_parquet("data/labels/images.parquet")
    split = read_parquet("data/split.parquet")
    test = test_table(images, labels, split, read_parquet(f"{PREP}/objects.parquet"), persons)
    test = test[test["n_persons"] > 0].assign(prompt="")
    ids, base = load_features()
    md = ["# Synthetic-artifact test: flips by body part (scripts/artifact_flips.py)", "",
          f"Test images with a person: {len(test)}; seeds {list(c['seeds'])}; part seed "
          f"{a.get('seed', 0)}. A cell is one (image, seed).", ""]
    with tempfile.TemporaryDirectory() as tmp:
        for be in args.backends.split(","):
            backend = make_backend({**g, "backend": be}, persons, images, labels, split,
                                   data_root=params.get("data", {}).get("root"))
            parts = build_inpainted_test_set(
                test, persons, backend, f"{tmp}/{be}", seed=int(a.get("seed", 0)),
                parts=a.get("parts", ["head", "left_hand", "right_hand"]),
                radius_scale=float(a.get("radius_scale", 1.0)),
                box_fraction=float(a.get("box_fraction", 0.3)))
            orig = test.set_index("image_id").loc[parts["image_id"]].reset_index()
            for ds in a.get("datasets", ["original", "augment", "synthetic"]):
                frames = []
                for seed in c["seeds"]:
                    clf = GenderObjectClassifier.load(model_dir("classifier", ds, seed))
                    thr = gender_thresholds(clf)
                    fo = model_features(clf, orig[["image_id", "path"]], ids, base, cache,
                                        batch_size=1)
                    fi = model_features(clf, parts[["image_id", "path"]], ids, base, cache,
                                        derived=True, batch_size=1)
                    (wo, mo), (wi, mi) = clf.gender_proba(fo), clf.gender_proba(fi)
                    frames.append(pd.DataFrame({
                        "part": parts["part"].to_numpy(), "gender": parts["gender"].to_numpy(),
                        "before": calls(wo, mo, thr), "after": calls(wi, mi, thr),
                        "change": (np.asarray(mi) - np.asarray(wi))
                        - (np.asarray(mo) - np.asarray(wo))}))
                d = pd.concat(frames, ignore_index=True)
                d["toward"] = [toward(b, x) for b, x in zip(d["before"], d["after"])]
                fl = d[d["before"] != d["after"]]
                n_m = int((fl["toward"] == "man").sum())
                n_w = int((fl["toward"] == "woman").sum())
                md += [f"## {be} / {ds}: {len(fl)} of {len(d)} calls flipped ({n_m} towards "
                       f"man, {n_w} towards woman)", "",
                       "| part | before | after | n |", "|---|---|---|---|"]
                for (p, b, x), n in fl.groupby(["part", "before", "after"]).size().items():
                    md.append(f"| {p} | {b} | {x} | {n} |")
                md += ["", "Mean change of P(man) - P(woman), by part and the person's gender:",
                       "", "| part | female | male |", "|---|---|---|"]
                ch = d.groupby(["part", "gender"])["change"].mean().unstack()
                for p, row in ch.iterrows():
                    md.append(f"| {p} | {row.get('female', float('nan')):+.3f} | "
                              f"{row.get('male', float('nan')):+.3f} |")
                md.append("")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    from biaslab import report as R
    # it outlives runs of other profiles: say which run it belongs to
    text = R.stamp("\n".join(md) + "\n", R.made_by("scripts/artifact_flips.py", ROOT))
    with atomic_path(args.out) as t:
        Path(t).write_text(text)
    print(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
