"""Stage `split`: deterministic train/val/test split stratified by image gender (params
`split`: fractions, seed, and `fixed`, COCO splits assigned whole, e.g. the synthetic
generator's separate test set `synthtest` -> test) -> data/split.parquet, metrics/split.json."""

from biaslab.runtime.io import (load_params, read_parquet, run_stage, stage_parser, write_json,
                                write_parquet)
from biaslab.data.labels import split_with_fixed

IMAGES = "data/prepared/images.parquet"


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    p = load_params()["split"]
    split = split_with_fixed(read_parquet("data/labels/images.parquet"), read_parquet(IMAGES),
                             p["fractions"], p["seed"], p.get("fixed"), source=IMAGES)
    write_parquet("data/split.parquet", split)
    counts = split.groupby(["split", "gender"]).size()
    write_json("metrics/split.json", {f"{s}/{g}": int(n) for (s, g), n in counts.items()})
    print(counts.to_string())
    return 0


if __name__ == "__main__":
    run_stage(main)
