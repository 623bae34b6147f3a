"""Stage `label_gender`: caption-level and image-level gender from captions (params `label`),
agreement with perceived gender -> data/labels/, metrics/labels.json."""
import sys

from biaslab.io import InputError, load_params, read_parquet, write_json, write_parquet
from biaslab.labels import agreement, label_captions, label_images


def main() -> None:
    p = load_params()["label"]
    caps = label_captions(read_parquet("data/prepared/captions.parquet"), words=p["words"])
    imgs = label_images(caps, rule=p["rule"], words=p["words"], k=p["k"])
    write_parquet("data/labels/captions.parquet", caps)
    write_parquet("data/labels/images.parquet", imgs)
    perceived = read_parquet("data/prepared/perceived_gender.parquet")
    metrics = {
        "rule": p["rule"], "words": p["words"], "k": p["k"],
        "images": {g: int(n) for g, n in imgs["gender"].value_counts().sort_index().items()},
        "captions": {g: int(n) for g, n in
                     caps["caption_gender"].value_counts().sort_index().items()},
        "agreement_with_perceived_gender": agreement(imgs, perceived),
    }
    write_json("metrics/labels.json", metrics)
    print(metrics)


if __name__ == "__main__":
    try:
        main()
    except (InputError, KeyError, ValueError) as e:
        sys.exit(f"label_gender: {e}")
