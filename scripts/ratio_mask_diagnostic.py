"""Diagnostic: is the Ratio protocol's person mask gender-neutral?

Paper 000's Ratio blacks out every person of a test image and counts the classifier's gender
predictions. A model that ignores context should then be at Ratio 1. On the embedded synthetic
data the models trained on S_augment / S_synthetic read gender from the person's body shape
(renderer version 2 drew men with a rectangular shirt torso, women with a trapezoid dress; version 3
draws both with one silhouette), and a
black *rectangle* over the person may itself look male to them.

This script evaluates the trained classifiers (``classifier.datasets`` rows original, augment,
synthetic; every seed of ``classifier.seeds``) on the test images with the person box filled
black (the protocol), mid grey and the image's mean colour, and on uniform images of each masked
image's mean colour (no box, no context), and prints mean P(man), mean P(woman) and the
threshold-free Ratio_E = sum P(man) / sum P(woman) (biaslab.classify.expected_ratio) averaged
over seeds. Run after ``dvc repro`` in the repository root:

    python scripts/ratio_mask_diagnostic.py [--out plots/report/ratio_mask_diagnostic.md]

It reads data/prepared, data/labels, data/split.parquet and data/models/classifier, writes the
masked images to a temporary directory and their features to the feature cache.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from biaslab.classify import (GenderObjectClassifier, encode_files, expected_ratio,  # noqa: E402
                              test_table, write_blackout_images)
from biaslab.runtime.io import atomic_path, load_params, read_parquet  # noqa: E402
from biaslab.runtime.paths import model_dir  # noqa: E402

PREP = "data/prepared"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="plots/report/ratio_mask_diagnostic.md")
    ap.add_argument("--rows", nargs="+", default=["original", "augment", "synthetic"])
    args = ap.parse_args(argv)
    params = load_params()
    c = params["classifier"]
    cache = params.get("features", {}).get("cache_dir", "data/cache/features")
    persons = read_parquet(f"{PREP}/persons.parquet")
    test = test_table(read_parquet(f"{PREP}/images.parquet"),
                      read_parquet("data/labels/images.parquet"),
                      read_parquet("data/split.parquet"),
                      read_parquet(f"{PREP}/objects.parquet"), persons)
    tmp = Path(tempfile.mkdtemp(prefix="ratio_mask_"))
    sets = {}
    for fill in (0, 128, "mean"):
        m = write_blackout_images(test, persons, tmp / f"fill_{fill}",
                                  sources=tuple(c.get("blackout", ["box"])),
                                  dilate_px=int(c.get("blackout_dilate_px", 0)), fill=fill)
        sets[f"box filled {fill}" + (" (the protocol)" if fill == 0 else "")] = \
            m["path"].tolist()
    uniform = []
    for p in sets["box filled 0 (the protocol)"]:
        a = np.asarray(Image.open(p).convert("RGB"), np.float32)
        q = tmp / "uniform" / Path(p).name
        q.parent.mkdir(exist_ok=True)
        Image.fromarray(np.full_like(a, a.mean((0, 1))).astype(np.uint8)).save(q)
        uniform.append(str(q))
    sets["uniform image (no box, no context)"] = uniform
    lines = [f"# Is the Ratio mask gender-neutral? ({len(test)} test images, "
             f"{len(sets['uniform image (no box, no context)'])} with persons; seeds "
             f"{list(c['seeds'])}; `python scripts/ratio_mask_diagnostic.py`)", "",
             "| training set | input | mean P(man) | mean P(woman) | Ratio_E raw |",
             "|---|---|---|---|---|"]
    for d in args.rows:
        for name, paths in sets.items():
            rows = []
            for s in c["seeds"]:
                clf = GenderObjectClassifier.load(model_dir("classifier", d, s))
                f = encode_files(paths, cache, clf.config["backbone"],
                                 image_size=clf.config.get("image_size"), batch_size=1)
                pw, pm = clf.gender_proba(f)
                rows.append((pm.mean(), pw.mean(), expected_ratio(pw, pm)["ratio"]))
            r = np.mean(rows, 0)
            lines.append(f"| {d} | {name} | {r[0]:.3f} | {r[1]:.3f} | {r[2]:.2f} |")
    from biaslab import report as R
    # it outlives runs of other profiles: say which run it belongs to
    text = R.stamp("\n".join(lines) + "\n", R.made_by("scripts/ratio_mask_diagnostic.py",
                                                        Path(__file__).resolve().parents[1]))
    with atomic_path(args.out) as t:
        Path(t).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
