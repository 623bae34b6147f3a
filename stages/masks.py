"""DVC stage `masks`: persons to inpaint and their masks omega (paper 000 appendix A.1; logic:
biaslab.counterfactual.masks).

Reads  data/prepared/{images,persons}.parquet, data/labels/images.parquet, data/split.parquet
and the `masks:` section of params.yaml; writes data/masks/masks.parquet, one PNG per image in
data/masks/png/ and metrics/masks.json (counts by skip reason and mask source).

Usage (from the repository root): python stages/masks.py [--params params.yaml]
    [--prepared data/prepared] [--labels data/labels/images.parquet]
    [--split data/split.parquet] [--out data/masks] [--metrics metrics/masks.json]
"""
from __future__ import annotations

import os

from biaslab.counterfactual.masks import build_masks_from_params
# noqa: E501
from biaslab.runtime.io import (load_params, read_parquet, run_stage, stage_parser, write_json,
                                write_parquet)


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--prepared", default="data/prepared")
    ap.add_argument("--labels", default="data/labels/images.parquet")
    ap.add_argument("--split", default="data/split.parquet")
    ap.add_argument("--out", default="data/masks")
    ap.add_argument("--metrics", default="metrics/masks.json")
    args = ap.parse_args(argv)
    p = load_params(args.params)["masks"]
    png_dir = os.path.join(args.out, "png")
    segmenter = None
    # paper tier: SAM inside MIAP's boxes (paper 000 app. A.1); load_params has already
    # refused shape sam without a sam_model (biaslab.runtime.validate.check_masks)
    if p.get("shape") == "sam":
        from biaslab.counterfactual.sam import SamBoxSegmenter
        segmenter = SamBoxSegmenter(p["sam_model"])
    table, counts = build_masks_from_params(
        p, read_parquet(f"{args.prepared}/images.parquet"),
        read_parquet(f"{args.prepared}/persons.parquet"),
        read_parquet(args.labels), read_parquet(args.split), png_dir, segmenter=segmenter)
    keep = {os.path.basename(x) for x in table["mask_path"]}
    if os.path.isdir(png_dir):  # masks of a previous run that no image uses any more
        for f in os.listdir(png_dir):
            if f not in keep:
                os.unlink(os.path.join(png_dir, f))
    write_parquet(f"{args.out}/masks.parquet", table)
    write_json(args.metrics, {**counts, "splits": p.get("splits"),
                              "area_threshold_px": p["area_threshold_px"],
                              "reference_long_side": p.get("reference_long_side"),
                              "dilate_px": p["dilate_px"],
                              "crowd_min_inside": p.get("crowd_min_inside", 3),
                              "shape": p.get("shape", "polygon"),
                              **({"sam_model": p["sam_model"]} if segmenter else {})})
    print(counts)
    return 0


if __name__ == "__main__":
    run_stage(main, errors=(KeyError, ValueError))
