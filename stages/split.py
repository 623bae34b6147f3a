"""Stage `split`: deterministic train/val/test split stratified by image gender (params
`split`) -> data/split.parquet, metrics/split.json."""
from biaslab.io import load_params, read_parquet, write_json, write_parquet
from biaslab.labels import stratified_split


def main() -> None:
    p = load_params()["split"]
    split = stratified_split(read_parquet("data/labels/images.parquet"), p["fractions"],
                             p["seed"])
    write_parquet("data/split.parquet", split)
    counts = split.groupby(["split", "gender"]).size()
    write_json("metrics/split.json", {f"{s}/{g}": int(n) for (s, g), n in counts.items()})
    print(counts.to_string())


if __name__ == "__main__":
    main()
