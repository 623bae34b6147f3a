"""Stage `prepare`: a dataset directory (params `data.root`) -> normalised parquet tables in
data/prepared/ (schema: biaslab/schema.md), drop counts in metrics/prepare.json.

`data.source` picks the reader: coco / synthetic (COCO layout, biaslab.data.coco) or openimages
(OpenImages CSVs with MIAP, biaslab.data.openimages: its rows the protocol leaves out are counted
under `excluded`, apart from the malformed ones under `dropped`)."""

import pandas as pd

from biaslab.data.coco import read_coco
from biaslab.data.openimages import read_openimages
from biaslab.runtime.io import load_params, run_stage, stage_parser, write_json, write_parquet

OUT = "data/prepared"


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    p = load_params()["data"]
    excluded = None
    if p["source"] == "openimages":
        tables, drops, excluded = read_openimages(p["root"])
    else:
        tables, drops = read_coco(p["root"], kp_iou=p.get("kp_iou", 0.3))
    if p.get("max_images"):
        # Deterministic subsample for small scales: the first n images after a seeded shuffle.
        keep = tables["images"].sample(frac=1.0, random_state=p.get("seed", 0))
        keep = set(keep["image_id"].head(int(p["max_images"])))
        drops["over_max_images"] = len(tables["images"]) - len(keep)
        tables = {k: v[v["image_id"].isin(keep)].reset_index(drop=True)
                  for k, v in tables.items()}
    for name, df in tables.items():
        write_parquet(f"{OUT}/{name}.parquet", df)
    objs = tables["objects"].drop_duplicates(["image_id", "category"])
    gender = tables["perceived_gender"]["perceived_gender"].value_counts()
    write_json("metrics/prepare.json", {
        "source": p["source"], "images": len(tables["images"]),
        "captions": len(tables["captions"]), "persons": len(tables["persons"]),
        "persons_with_polygon": int((tables["persons"]["polygon"] != "[]").sum()),
        "persons_with_keypoints": int(tables["persons"]["keypoints"].notna().sum()),
        "images_with_objects": int(objs["image_id"].nunique()),
        "object_categories": int(objs["category"].nunique()),
        "perceived_gender_rows": len(tables["perceived_gender"]),
        "perceived_gender": {g: int(gender.get(g, 0)) for g in ("female", "male", "other")},
        "dropped": drops, "dropped_total": int(sum(drops.values())),
        **({"excluded": excluded} if excluded is not None else {}),
    })
    print(pd.Series({k: len(v) for k, v in tables.items()}).to_string(), "\ndropped:", drops)
    return 0


if __name__ == "__main__":
    run_stage(main)
