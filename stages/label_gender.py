"""Stage `label_gender`: caption-level and image-level gender from captions (params `label`),
agreement with perceived gender -> data/labels/, metrics/labels.json.

`label.source: perceived` (data without captions, OpenImages with MIAP) takes image gender from
the prepared perceived labels instead; the caption table is then empty."""

from biaslab.runtime.io import (InputError, load_params, read_parquet, run_stage, stage_parser,
                                write_json, write_parquet)
from biaslab.data.labels import agreement, label_captions, label_images, label_images_perceived


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    p = load_params()["label"]
    caps = label_captions(read_parquet("data/prepared/captions.parquet"), words=p["words"])
    perceived = read_parquet("data/prepared/perceived_gender.parquet")
    source = p.get("source", "captions")
    if source == "perceived":
        if perceived.empty:
            raise InputError("data/prepared/perceived_gender.parquet",
                             "label.source is perceived but the data has no perceived gender "
                             "labels")
        imgs = label_images_perceived(perceived)
    else:
        if caps.empty:
            raise InputError("data/prepared/captions.parquet",
                             "the data has no captions: set label.source: perceived (the "
                             "openimages profile does)")
        imgs = label_images(caps, rule=p["rule"], words=p["words"], k=p["k"])
    write_parquet("data/labels/captions.parquet", caps)
    write_parquet("data/labels/images.parquet", imgs)
    metrics = {
        "source": source, "rule": p["rule"], "words": p["words"], "k": p["k"],
        "images": {g: int(n) for g, n in imgs["gender"].value_counts().sort_index().items()},
        "captions": {g: int(n) for g, n in
                     caps["caption_gender"].value_counts().sort_index().items()},
        "agreement_with_perceived_gender": agreement(imgs, perceived),
    }
    write_json("metrics/labels.json", metrics)
    print(metrics)
    return 0


if __name__ == "__main__":
    run_stage(main, errors=(KeyError, ValueError))
